// Drives the project's real learner through a scenario: every call of every step is decided by
// the group's Learner, costed by the truth (with noise), and compared with what NCCL's default
// and the oracle (the truth's best arm for that call) would have cost on the same noise draw.
// Costs reach the learner only through consensus rounds, as in the backend.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/types.h"
#include "nccl_model/topology.h"
#include "policy/arm_catalog.h"
#include "policy/learner.h"
#include "sim/scenario_spec.h"

namespace dynamiccl {
namespace sim {

// Collective time summed over calls, in microseconds, for the three policies.
struct CostTotals {
  double default_us = 0;
  double learned_us = 0;
  double oracle_us = 0;
  uint64_t calls = 0;
  uint64_t probes = 0;
  uint64_t rounds = 0;   // consensus rounds run (total only)
  double rounds_us = 0;  // what they cost the job (total only; in learned_us too)
};

// One learner state (group, role, op, size bin) at the end of the run.
struct StateResult {
  std::string group;
  Role role = Role::kDefault;
  OpKind op = OpKind::kAllReduce;
  int size_bin = 0;
  int arms = 0;                    // arms offered (1 = nothing to learn)
  int64_t calls_to_converge = -1;  // the learner's call count when it first converged
  std::string incumbent;           // the learner's incumbent at the end
  std::string default_arm;         // NCCL's own pick (algo/proto) for the state's last call
  std::string oracle_arm;          // the truth's best arm for the state's last call
  CostTotals totals;
  CostTotals after_convergence;  // calls after the state first converged
  uint32_t alarms = 0;           // CUSUM re-openings reported by the learner
  // The learner's last events for the state (StateStats::events), arms by name as stats() gives
  // them in a job.
  struct Event {
    uint64_t call = 0;
    uint64_t step = 0;
    std::string what, from, to;
  };
  std::vector<Event> events;
};

// How fast a state got back near the oracle after a congestion episode began.
struct RecoveryResult {
  int episode = 0;
  int step = 0;
  std::string group;
  Role role = Role::kDefault;
  OpKind op = OpKind::kAllReduce;
  int size_bin = 0;
  bool needs_switch = false;    // the arm that was best before is > 5% off the new best
  double ratio_at_start = 1.0;  // chosen arm's cost / oracle's on the state's first call after
  int64_t calls = -1;           // calls until a window of 8 averages within 5%; -1 = never
};

// What a group's learner knew at the end, as save_policy writes it for a real job: the training
// data of a learned prior (dynamiccl_pg/prior/).
struct GroupPolicy {
  std::string group;
  int group_size = 1;
  int nodes = 1;
  PolicySnapshot snapshot;
};

struct SimResult {
  std::string name;
  int steps = 0;
  CostTotals total;
  CostTotals after_convergence;
  std::array<CostTotals, kNumRoles> roles{};
  std::vector<double> step_default_us, step_learned_us, step_oracle_us;
  // With compute (ScenarioSpec::compute active; empty otherwise): each step's wall time under
  // the step model (sim/step_model.h) for NCCL's default on every call, the learner's choices
  // (consensus rounds included) and the step-time oracle: per step the best of three plans on
  // the same noise draws: the default, the per-call oracle (each call's fastest arm), and a
  // greedy plan (call by call, the arm that ends the current phase earliest given the calls
  // before it, ties to the lower arm index).
  std::vector<double> step_time_default_us, step_time_learned_us, step_time_oracle_us;
  std::vector<StateResult> states;
  std::vector<RecoveryResult> recoveries;
  std::vector<std::string> groups;    // "name: nodes x gpus_per_node, N channels"
  std::vector<GroupPolicy> policies;  // one per group
};

// The catalog a group's learner gets, from the product's NCCL catalog for the group's shape: a
// learned prior (prior/learned_prior_catalog.h) wraps it. Empty: the catalog itself.
using CatalogWrapper = std::function<std::shared_ptr<const ArmCatalog>(
    std::shared_ptr<const ArmCatalog> base, const nccl::GroupShape& shape)>;

// One arm of one call, as NCCL believes and as it really is (for inspection and tests).
struct ArmCost {
  std::string name;
  double prior_us = 0;  // NCCL's nominal model (the catalog's prior)
  double truth_us = 0;  // the truth under the given step's congestion, without noise
};

class SimRunner {
 public:
  // Throws std::invalid_argument on bad specs.
  // `rules`: the learner's rules (policy/rules.h); some off only to measure what they buy.
  explicit SimRunner(const ScenarioSpec& spec, CatalogWrapper wrap = nullptr, RuleSet rules = {});
  ~SimRunner();
  SimRunner(const SimRunner&) = delete;
  SimRunner& operator=(const SimRunner&) = delete;

  void run();              // the scenario's remaining steps
  void run_steps(int n);   // n more steps (a benchmark may run past the scenario's end)
  uint64_t calls() const;  // simulated calls so far
  int calls_per_step() const;
  SimResult result() const;

  // The arm catalog of a group: the NCCL engine's own (engines/nccl/arm_catalog.h).
  const ArmCatalog& catalog(const std::string& group) const;
  // The arms a group offers for `op` and their nominal / true costs at `step`.
  std::vector<ArmCost> arm_costs(const std::string& group, OpKind op, uint64_t effective_bytes,
                                 int step) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Runs the whole scenario.
SimResult run_scenario(const ScenarioSpec& spec, CatalogWrapper wrap = nullptr, RuleSet rules = {});

}  // namespace sim
}  // namespace dynamiccl
