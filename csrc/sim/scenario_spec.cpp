#include "sim/scenario_spec.h"

#include <stdexcept>

#include "nccl_model/topology.h"
#include "sim/workload.h"

namespace dynamiccl {
namespace sim {

namespace {
constexpr long long kMaxRanks = 100000;
std::string str(long long v) { return std::to_string(v); }
}  // namespace

std::vector<SpecProblem> spec_problems(const ScenarioSpec& s) {
  std::vector<SpecProblem> out;
  auto fail = [&out](const std::string& path, const std::string& what) {
    out.push_back({path, what});
  };
  const TopologySpec& t = s.topology;
  const long long ranks = static_cast<long long>(t.nodes) * t.gpus_per_node;
  if (ranks < 2) fail("topology", "needs at least 2 ranks (nodes x gpus_per_node)");
  if (ranks > kMaxRanks)
    fail("topology", str(ranks) + " ranks is more than the " + str(kMaxRanks) + " supported");
  if (t.nodes > 1 && t.inter.type.empty())
    fail("topology.inter", "missing (required when nodes > 1)");
  const std::string ib = link_type_name(LinkType::kIb);
  if (t.sharp && !t.inter.type.empty() && t.inter.type != ib)
    fail("topology.sharp", "in-network reduction needs inter.type '" + ib + "'");

  for (size_t i = 0; i < s.workload.size(); ++i) {
    const WorkloadSpec& w = s.workload[i];
    if (w.kind != "ddp") continue;
    const std::string at = "workload[" + std::to_string(i) + "]";
    const bool has_params = !w.param_bytes.empty();
    const bool has_layers = w.layers > 0 || w.layer_bytes > 0;
    if (has_params == has_layers) {
      fail(at, "give either param_bytes, or layers and layer_bytes");
    } else if (has_layers) {
      if (w.layers == 0) fail(at + ".layers", "missing (required with layer_bytes)");
      if (w.layer_bytes == 0) fail(at + ".layer_bytes", "missing (required with layers)");
    }
  }
  plan_groups(s, &out);

  for (size_t i = 0; i < s.congestion.size(); ++i) {
    const CongestionSpec& c = s.congestion[i];
    const std::string at = "congestion[" + std::to_string(i) + "]";
    if (c.to_step <= c.from_step)
      fail(at, "to_step (" + str(c.to_step) + ") must be greater than from_step (" +
                   str(c.from_step) + ")");
    if (c.from_step >= s.steps)
      fail(at + ".from_step",
           str(c.from_step) + " is not before the end (steps=" + str(s.steps) + ")");
  }
  return out;
}

void validate_spec(const ScenarioSpec& spec) {
  const std::vector<SpecProblem> problems = spec_problems(spec);
  if (problems.empty()) return;
  std::string what;
  for (const SpecProblem& p : problems)
    what += (what.empty() ? "" : "; ") + p.path + ": " + p.message;
  throw std::invalid_argument(what);
}

}  // namespace sim
}  // namespace dynamiccl
