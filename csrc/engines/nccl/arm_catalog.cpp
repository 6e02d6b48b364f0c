#include "engines/nccl/arm_catalog.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

namespace dynamiccl {

using namespace nccl;

namespace {

// Chunk arms: the protocol's default chunk divided by these (a chunk larger than the step
// buffer would only be clamped back by NCCL).
constexpr int kChunkDivisors[] = {2, 4};

// Chunk sizes are offered where the chunk shapes a pipeline: ring and tree with Simple or LL128
// (LL moves a few bytes per flag and is latency-bound; NVLS, CollNet and PAT chunk their own way).
bool chunk_tunable(int algo, int proto) {
  return (algo == kAlgoRing || algo == kAlgoTree) &&
         (proto == kProtoSimple || proto == kProtoLL128);
}

}  // namespace

std::string nccl_arm_name(int algo, int proto, int cap, int chunk_bytes) {
  std::string s = std::string(algo_name(algo)) + "/" + proto_name(proto);
  if (cap > 0) s += "/c" + std::to_string(cap);
  if (chunk_bytes > 0) s += "/k" + std::to_string(chunk_bytes / 1024) + "K";
  return s;
}

namespace {

// "123" within [lo, hi] (at most 9 digits), else -1.
int parse_bounded(const std::string& digits, int lo, int hi) {
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  const long v = std::stol(digits);
  return v >= lo && v <= hi ? static_cast<int>(v) : -1;
}

}  // namespace

bool parse_nccl_arm_name(const std::string& name, Action* action) {
  std::vector<std::string> parts;
  for (size_t begin = 0;;) {
    const size_t slash = name.find('/', begin);
    parts.push_back(name.substr(begin, slash == std::string::npos ? slash : slash - begin));
    if (slash == std::string::npos) break;
    begin = slash + 1;
  }
  if (parts.size() < 2 || parts.size() > 4) return false;
  const std::vector<std::string> algos = algo_names(), protos = proto_names();
  const auto algo = std::find(algos.begin(), algos.end(), parts[0]);
  const auto proto = std::find(protos.begin(), protos.end(), parts[1]);
  if (algo == algos.end() || proto == protos.end()) return false;
  int cap = -1, chunk = -1;
  size_t i = 2;
  if (i < parts.size() && !parts[i].empty() && parts[i][0] == 'c') {  // "cN"
    cap = parse_bounded(parts[i].substr(1), 1, DYNAMICCL_NCCL_MAX_CHANNELS);
    if (cap < 0) return false;
    ++i;
  }
  if (i < parts.size()) {  // "kNK": N KiB, a chunk the plugin would hand NCCL for the protocol
    const std::string& k = parts[i];
    if (k.size() < 3 || k[0] != 'k' || k.back() != 'K') return false;
    const int kib = parse_bounded(k.substr(1, k.size() - 2), 1, 1 << 20);
    if (kib < 0) return false;
    chunk = kib * 1024;
    if (!dynamiccl_nccl_chunk_valid(static_cast<int>(proto - protos.begin()),
                                    static_cast<size_t>(chunk))) {
      return false;
    }
    ++i;
  }
  if (i != parts.size()) return false;
  *action = Action{static_cast<int8_t>(algo - algos.begin()),
                   static_cast<int8_t>(proto - protos.begin()), static_cast<int16_t>(cap), chunk};
  return true;
}

NcclArmCatalog::NcclArmCatalog(NcclCostModel model, std::vector<int> caps, bool derive_caps,
                               int nccl_version)
    : model_(std::move(model)), chunks_offered_(nccl_version >= DYNAMICCL_NCCL_CHUNK_MIN_VERSION) {
  const int nch = model_.graph_channels(kAlgoRing);
  if (caps.empty() && derive_caps) caps = {nch / 4, nch / 2};
  std::sort(caps.begin(), caps.end());
  caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
  for (int c : caps) {
    if (c >= 1) caps_.push_back(c);
  }
  for (int o = 0; o < kNumOps; ++o) {
    std::vector<Arm>& list = arms_[o];
    list.push_back(Arm{"default", Action{}});
    const int f = func_of(static_cast<OpKind>(o));
    if (f < 0) continue;  // not tunable through NCCL's tuner
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        if (!model_.available(f, a, p)) continue;
        list.push_back(Arm{nccl_arm_name(a, p, 0),
                           Action{static_cast<int8_t>(a), static_cast<int8_t>(p), -1}});
        for (int c : caps_) {
          // LL moves a few bytes per flag: latency-bound, its channel count hardly matters.
          if (p == kProtoLL || c >= model_.graph_channels(a)) continue;
          list.push_back(
              Arm{nccl_arm_name(a, p, c),
                  Action{static_cast<int8_t>(a), static_cast<int8_t>(p), static_cast<int16_t>(c)}});
        }
      }
    }
    // Chunk arms come after all others, so that the arms an older NCCL's catalog has keep their
    // indices.
    if (!chunks_offered_) continue;
    for (int a = 0; a < kNumAlgos; ++a) {
      for (int p = 0; p < kNumProtos; ++p) {
        if (!model_.available(f, a, p) || !chunk_tunable(a, p)) continue;
        for (int divisor : kChunkDivisors) {
          const int chunk = static_cast<int>(default_chunk_bytes(p)) / divisor;
          list.push_back(Arm{nccl_arm_name(a, p, 0, chunk),
                             Action{static_cast<int8_t>(a), static_cast<int8_t>(p), -1, chunk}});
        }
      }
    }
  }
}

const std::vector<Arm>& NcclArmCatalog::arms(OpKind op) const {
  return arms_[static_cast<int>(op)];
}

double NcclArmCatalog::prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                                     int /*group_size: the model's communicator*/) const {
  const std::vector<Arm>& list = arms(op);
  if (arm >= list.size()) return std::numeric_limits<double>::max();
  if (func_of(op) < 0) return 0.0;  // one arm: nothing to order
  const double t = model_.predict_us(op, list[arm].action, effective_bytes);
  return t < 0 ? std::numeric_limits<double>::max() : t;
}

double NcclArmCatalog::footprint(OpKind op, uint16_t arm, uint64_t effective_bytes) const {
  const std::vector<Arm>& list = arms(op);
  const int func = func_of(op);
  int def_algo = -1, def_proto = -1;
  if (arm >= list.size() || func < 0 || !model_.pick(func, effective_bytes, &def_algo, &def_proto))
    return 1.0;
  const Action& a = list[arm].action;
  const int algo = a.algo >= 0 ? a.algo : def_algo;
  const int proto = a.proto >= 0 ? a.proto : def_proto;
  const int cap = a.channels > 0 ? a.channels : model_.graph_channels(algo);
  const int used = model_.channels_used(algo, proto, effective_bytes, cap);
  const int def = model_.channels_used(def_algo, def_proto, effective_bytes,
                                       model_.graph_channels(def_algo));
  return def > 0 ? static_cast<double>(used) / def : 1.0;
}

int NcclArmCatalog::default_channels(OpKind op, uint64_t effective_bytes) const {
  const int func = func_of(op);
  int algo = -1, proto = -1;
  if (func < 0 || !model_.pick(func, effective_bytes, &algo, &proto)) return 0;
  return model_.channels_used(algo, proto, effective_bytes, model_.graph_channels(algo));
}

NcclArmCatalog nccl_catalog_for(const Topology& topology, const GroupShape& shape,
                                std::vector<int> caps, bool derive_caps, int nccl_version) {
  return NcclArmCatalog(NcclCostModel(derive_comm_inputs(topology, shape)), std::move(caps),
                        derive_caps, nccl_version);
}

}  // namespace dynamiccl
