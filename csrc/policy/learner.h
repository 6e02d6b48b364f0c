// The online learner of one process group: per-state (role, op, size bin) choice among an
// engine's arms, updated only from consensus rounds so that every rank decides identically.
//
// Contract (DESIGN.md §2.6, §3): decide() is a pure function of (the sequence of contexts seen
// so far, the RoundResults applied so far, the config). Nothing local — clocks, this rank's
// timings, unseeded randomness, pointer values, hash-map iteration order — may influence it.
// The caller (the backend's consensus controller or the simulator) feeds apply_round() with
// numbers that are identical on every rank, at the same call index on every rank.
//
// Per state, the life cycle (DESIGN.md §4):
//   warm-up   : the first `warmup_calls` calls run the engine default (the baseline);
//   probing   : candidates (the default plus the best arms by the catalog's prior; arms priced
//               far beyond the best prior are left out, dear ones get one probe and wait for its
//               cost) are tried deterministically, interleaved with the incumbent so that the
//               fraction of probe calls stays within the head's `probe_budget`; an arm whose cost
//               is confidently worse than the incumbent's is eliminated — after one cost if it
//               is hopeless. Arms are compared by a winsorized mean (robust to the heavy-tailed
//               timings of shared machines);
//   exploit   : the incumbent runs; the incumbent changes only when a challenger is better by
//               more than `switch_margin` (hysteresis), so near-equal arms do not flap; the
//               budget decays to `converged_budget` (occasional re-checks of the runner-up);
//   re-open   : a robust two-sided CUSUM on the incumbent's cost ("trigger agent") raises an
//               alarm on a sustained shift; the previous best few arms are re-probed first, in a
//               short burst, the others only if that is inconclusive.
// Guards: a step-time regression beyond `step_regression` while running a non-default arm, or a
// loss stall during exploration, freezes exploration and falls back to the best known arm.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/types.h"
#include "policy/arm_catalog.h"

namespace dynamiccl {

enum class Mode : uint8_t { kLearn = 0, kFrozen = 1, kOff = 2 };
const char* mode_name(Mode m);
bool parse_mode(const std::string& name, Mode* out);

// Budgets of one role's head. What each field means: head_fields().
struct HeadConfig {
  double probe_budget = 0.25;
  double converged_budget = 0.01;
  int warmup_calls = 8;
  int min_samples = 6;
  double switch_margin = 0.03;
  int max_candidates = 16;
  double cusum_threshold = 8.0;
  double cusum_drift = 0.5;
};

// HeadConfig's fields by name, for files that set them (the simulator's `learner` key).
struct HeadField {
  const char* name;
  const char* doc;
  bool integer;  // an int field (else a double)
  void (*set)(HeadConfig& head, double value);
};
const std::vector<HeadField>& head_fields();
const HeadField* find_head_field(const std::string& name);  // nullptr: no such field
std::vector<std::string> head_field_names();

struct LearnerConfig {
  Mode mode = Mode::kLearn;
  std::array<HeadConfig, kNumRoles> heads = default_heads();
  double step_regression = 0.10; // guard: step time worse than baseline by this fraction
  int loss_stall_rounds = 20;    // guard: rounds without loss improvement during exploration
  uint64_t seed = 0;             // shared seed for any tie-breaking randomness
  static std::array<HeadConfig, kNumRoles> default_heads();
};

// One call's rank-reduced cost, as agreed by consensus.
struct CallOutcome {
  uint32_t state_id = 0;
  uint16_t arm = kDefaultArm;
  float cost_us = 0.f;  // > 0; calls whose cost is unknown are simply not reported
};

struct RoundResult {
  std::vector<CallOutcome> calls;
  double step_time_us = NAN;  // rank-reduced mean step time since the last round; NaN = none
  double loss = NAN;          // rank-reduced mean loss since the last round; NaN = none
  // (state, arm) pairs some rank found unavailable (e.g. NCCL marked the slot unavailable):
  // the arm is dropped for that state, on every rank.
  std::vector<std::pair<uint32_t, uint16_t>> unavailable;
};

struct ArmStats {
  std::string name;
  uint64_t calls = 0;      // calls decided with this arm
  uint64_t samples = 0;    // costs received for it
  double mean_us = 0;
  double median_us = 0;    // over a window of recent samples
  double center_us = 0;    // what the learner compares arms by: winsorized mean, current regime
  bool eliminated = false;
};

struct StateStats {
  uint32_t state_id = 0;
  Role role = Role::kDefault;
  OpKind op = OpKind::kAllReduce;
  int size_bin = 0;
  uint16_t incumbent = kDefaultArm;
  std::string phase;        // "warmup" | "probing" | "exploit" | "frozen"
  uint64_t calls = 0;
  uint64_t probes = 0;
  uint32_t alarms = 0;      // CUSUM re-openings
  bool frozen = false;      // a guard froze exploration
  uint64_t converged_at_call = 0;  // call count at which probing ended last (0 = not yet)
  std::vector<ArmStats> arms;
};

// Everything the learner knows, in a form Python turns into JSON (save_policy / load_policy).
struct ArmSnapshot {
  std::string name;
  uint64_t samples = 0;
  double mean_us = 0;
  double m2 = 0;           // sum of squared deviations (Welford)
  bool eliminated = false;
};
struct StateSnapshot {
  Role role = Role::kDefault;
  OpKind op = OpKind::kAllReduce;
  int size_bin = 0;
  std::string incumbent;   // arm name
  bool converged = false;
  std::vector<ArmSnapshot> arms;
};
struct PolicySnapshot {
  std::vector<StateSnapshot> states;
};

class Learner {
 public:
  Learner(LearnerConfig config, std::shared_ptr<const ArmCatalog> catalog);
  ~Learner();
  Learner(const Learner&) = delete;
  Learner& operator=(const Learner&) = delete;

  // Hot path: well under a microsecond, no heap allocation once the state exists.
  Decision decide(const CollectiveContext& ctx);
  // Consensus: identical input on every rank, at the same call index on every rank.
  void apply_round(const RoundResult& round);

  uint32_t epoch() const;
  Mode mode() const;
  void set_mode(Mode m);  // must be called at the same call index on every rank
  std::vector<StateStats> stats() const;
  PolicySnapshot snapshot() const;
  // Warm start: states and arm statistics are matched by (role, op, size bin) and arm name;
  // unknown arms are ignored. Must be applied identically on every rank.
  void restore(const PolicySnapshot& snap);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dynamiccl
