#include "prior/features.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "engines/cpu/schedule.h"
#include "nccl_model/cost_model.h"

namespace dynamiccl {
namespace prior {

namespace {

std::vector<std::string> cpu_schedule_names() {
  std::vector<std::string> names;
  for (const CpuSchedule* s : cpu_schedules()) names.push_back(s->name);
  return names;
}

double log2_or_zero(double v) { return v > 1 ? std::log2(v) : 0.0; }

}  // namespace

// Scales keep every feature within about [0, 1] for the sizes jobs see.
const std::vector<std::string>& feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const std::string& e : engine_names().list()) n.push_back("engine_" + e);
    for (const std::string& o : op_names().list()) n.push_back("op_" + o);
    n.insert(n.end(), {"overlapped", "fused", "log2_bytes/40", "log2_group_size/16",
                       "log2_nodes/12", "log2_ranks_per_node/8", "arm_default"});
    for (const std::string& a : nccl::algo_names()) n.push_back("nccl_algo_" + a);
    for (const std::string& p : nccl::proto_names()) n.push_back("nccl_proto_" + p);
    for (const std::string& s : cpu_schedule_names()) n.push_back("cpu_schedule_" + s);
    n.insert(n.end(), {"capped", "log2_channels_or_segments/6", "chunked", "log2_chunk_kib/12",
                       "analytic_log_ratio/4", "analytic_tie"});
    return n;
  }();
  return names;
}

void append_features(const StateFeatures& s, const Action& a, double analytic_log_ratio,
                     std::vector<double>* out) {
  const auto one_hot = [&](int value, int count) {
    for (int i = 0; i < count; ++i) out->push_back(i == value ? 1.0 : 0.0);
  };
  const size_t start = out->size();
  one_hot(static_cast<int>(s.engine), kNumEngines);
  one_hot(static_cast<int>(s.call.op), kNumOps);
  out->push_back(s.call.exposure == Exposure::kOverlapped ? 1.0 : 0.0);
  out->push_back(s.call.fused ? 1.0 : 0.0);
  out->push_back(log2_or_zero(static_cast<double>(s.call.effective_bytes)) / 40);
  out->push_back(log2_or_zero(s.call.group_size) / 16);
  out->push_back(log2_or_zero(s.nodes) / 12);
  out->push_back(log2_or_zero(static_cast<double>(s.call.group_size) / std::max(s.nodes, 1)) / 8);
  out->push_back(a.is_default() ? 1.0 : 0.0);
  const bool nccl = s.engine == EngineKind::kNccl;
  one_hot(nccl ? a.algo : -1, nccl::kNumAlgos);
  one_hot(nccl ? a.proto : -1, nccl::kNumProtos);
  one_hot(nccl ? -1 : a.algo, static_cast<int>(cpu_schedules().size()));
  out->push_back(a.channels > 0 ? 1.0 : 0.0);
  out->push_back(log2_or_zero(a.channels) / 6);
  out->push_back(a.chunk_bytes > 0 ? 1.0 : 0.0);
  out->push_back(log2_or_zero(a.chunk_bytes / 1024.0) / 12);
  out->push_back(std::clamp(analytic_log_ratio, -8.0, 8.0) / 4);
  // Priced exactly as the default: for NCCL the configuration NCCL's model picks itself (a twin
  // of the default, which can only tie), a fact a smooth function of the ratio cannot isolate.
  out->push_back(std::fabs(analytic_log_ratio) < kTieLogRatio ? 1.0 : 0.0);
  if (out->size() - start != feature_count()) {
    throw std::logic_error("prior features: wrote " + std::to_string(out->size() - start) +
                           " values, the schema names " + std::to_string(feature_count()));
  }
}

// FNV-1a over the arm vocabulary's names, in order.
const std::string& catalog_fingerprint() {
  static const std::string fp = [] {
    uint64_t h = 1469598103934665603ull;
    const auto add = [&](const std::string& s) {
      for (unsigned char c : s + ";") h = (h ^ c) * 1099511628211ull;
    };
    for (const auto& list : {nccl::algo_names(), nccl::proto_names(), cpu_schedule_names()}) {
      for (const std::string& n : list) add(n);
      add("|");
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return std::string(buf);
  }();
  return fp;
}

}  // namespace prior
}  // namespace dynamiccl
