// The online learner of one process group: per-state (role, op, size bin, exposure, fused)
// choice among an engine's arms, updated only from consensus rounds so that every rank decides
// identically.
//
// Contract (docs/architecture.md, "Rank consistency" and "Consensus rounds"): decide() is a
// pure function of (the sequence of contexts seen so far, the RoundResults applied so far, the
// config). Nothing local — clocks, this rank's timings, unseeded randomness, pointer values,
// hash-map iteration order — may influence it. The caller (the backend's consensus controller or
// the simulator) feeds apply_round() with numbers that are identical on every rank, at the same
// call index on every rank.
//
// Per state, the life cycle (docs/learner.md, "A state's life cycle"):
//   warm-up   : the first `warmup_calls` calls run the engine default (the baseline);
//   probing   : candidates (the default plus the best arms by the catalog's prior; arms priced
//               far beyond the best prior are left out; each gets one probe and waits for its
//               first cost before more) are tried deterministically, interleaved with the
//               incumbent so that the fraction of probe calls stays within the head's
//               `probe_budget`; an arm whose cost
//               is confidently worse than the incumbent's is eliminated — after one cost if it
//               is hopeless. Arms are compared by a winsorized mean (robust to the heavy-tailed
//               timings of shared machines);
//   exploit   : the incumbent runs; the incumbent changes only when a challenger is better by
//               more than `switch_margin` (hysteresis), so near-equal arms do not flap; the
//               budget decays to `converged_budget` (occasional re-checks of the runner-up);
//   re-open   : a robust two-sided CUSUM on the incumbent's cost ("trigger agent") raises an
//               alarm on a sustained shift; the previous best few arms are re-probed, the
//               others parked;
//   settled   : once the incumbent has held for `settle_calls` calls, the state stops probing and
//               asks for the costs of only a fraction of its calls, so that measuring costs at
//               most 0.1% of its time (RoundResult::round_cost_us): its other calls cost what
//               frozen calls cost. The measured ones feed the CUSUM and, for a non-default
//               incumbent, compare it with the default again (rollback if the default is now
//               confidently cheaper).
//
// Do no harm (conservative exploration). The default arm is the baseline. A state tracks what
// learning has cost it over the default: the realized extra cost of every measured non-default
// call (probes, and the incumbent once it is not the default: its savings count as negative
// extra), plus the expected extra of probes whose costs are still in flight. A probe is taken only
//   (a) when the state can afford it: realized + in flight + the probe's expected extra stays
//       within `regret_budget` x the time the state's calls would have cost on the default
//       (calls x the default's cost), or the probe repays: the arm's costs put it confidently
//       below the default (PolicyState::repays), and
//   (b) for an arm never measured, when it is worth it: the expected saving per call (if the arm
//       turns out cheaper) times the calls the state has seen (its expected remaining life)
//       exceeds the expected extra cost of probing it. Both expectations treat the arm's true
//       cost ratio to the default as log-normal around the prior's ratio (kPriorSigma): an arm
//       the prior prices far above the default waits until the state has proven long-lived.
// So learning costs at most `regret_budget` of a state's time on the default, and pays for
// itself out of what it wins (savings raise the budget).
// Guards: a step-time regression beyond `step_regression` (and beyond the step time's own noise)
// while running a non-default arm, or a loss stall during exploration, freezes exploration and
// falls back to the best known arm when it beats the default by the switch margin, else to the
// default.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/types.h"
#include "policy/arm_catalog.h"
#include "policy/rules.h"

namespace dynamiccl {

// Budgets of one role's head.
struct HeadConfig {
  double probe_budget = 0.25;  // max fraction of a state's calls spent probing while exploring
  double converged_budget =
      0.01;              // probing fraction once the state has converged (budget decays to it)
  int warmup_calls = 8;  // default-arm calls before probing starts
  int min_samples = 6;   // samples per arm before it can be compared / eliminated
  double switch_margin = 0.03;   // a challenger must be this much cheaper (relative) to take over
  int max_candidates = 16;       // at most this many arms (best by prior, default always kept)
  double cusum_threshold = 8.0;  // CUSUM alarm level, in units of the incumbent's cost std-dev
  double cusum_drift = 0.5;      // CUSUM slack, same unit
  double regret_budget = 0.01;   // what learning may cost over the default, fraction of its time
  int settle_calls = 256;        // exploit calls without an event before a state settles
  // Overlapped states: a challenger that won on duration is adopted only after a step trial.
  int trial_pairs = 8;       // step pairs before a trial gives its verdict (earlier: clearer)
  int max_trial_pairs = 48;  // pairs after which an undecided trial keeps the incumbent
};

// Every HeadConfig field by name, with its accepted range and meaning: the one description that
// validation, DYNAMICCL_HEADS, the simulator's `learner` overrides and the docs read.
struct HeadSetting {
  const char* name;
  double HeadConfig::*real = nullptr;  // one of the two is set
  int HeadConfig::*integer = nullptr;
  double min = 0, max = 0;
  bool min_open = false;  // the range excludes `min`
  const char* doc = "";
  double get(const HeadConfig& h) const { return real ? h.*real : h.*integer; }
  bool accepts(double v) const { return (min_open ? v > min : v >= min) && v <= max; }
  std::string range() const;  // "0 < x <= 1", "integer >= 1", ...
};
const std::vector<HeadSetting>& head_settings();
// Sets `key` of `head` to `value`; throws std::invalid_argument naming the key or the value and
// what is accepted.
void set_head_setting(HeadConfig& head, const std::string& key, double value);

struct LearnerConfig {
  Mode mode = Mode::kLearn;
  std::array<HeadConfig, kNumRoles> heads = default_heads();
  double step_regression = 0.10;  // guard: step time worse than baseline by this fraction
  int loss_stall_rounds = 20;     // guard: rounds without loss improvement during exploration
  // The learner's named rules (policy/rules.h), all on: tests, the simulator's ablations and
  // DYNAMICCL_TEST_ABLATE (benchmarks) switch some off.
  RuleSet rules;
  static std::array<HeadConfig, kNumRoles> default_heads();
};

// One call's rank-reduced cost, as agreed by consensus.
struct CallOutcome {
  uint32_t state_id = 0;
  uint16_t arm = kDefaultArm;
  float cost_us = 0.f;       // > 0; NaN: no rank could time it (only probes need reporting then)
  bool probe = false;        // the decision was a probe (its expected extra was committed)
  bool after_probe = false;  // Decision::after_probe
  // NCCL >= 2.30: the channels NCCL ran the call with, the most over ranks (0: not said).
  uint16_t channels = 0;
};

struct RoundResult {
  std::vector<CallOutcome> calls;
  double step_time_us = NAN;  // rank-reduced mean step time since the last round; NaN = none
  // Each step that ended since the last round, in order: its wall time, max over ranks. The
  // steps are those marked by mark_step() (same call index on every rank), oldest first; the
  // first entry is the step numbered `first_step`.
  std::vector<double> step_times_us;
  uint64_t first_step = 0;
  double loss = NAN;  // rank-reduced mean loss since the last round; NaN = none
  // What measuring costs the job: a consensus round (its control-plane all-reduce), µs, serving
  // up to `round_calls` measured calls; rounds that measure nothing are skipped, so sparse
  // measurements each cost a round of their own, and this round's probes (else its measured
  // calls) pay its price between them. 0 = unknown (measuring is free).
  double round_cost_us = 0;
  int round_calls = 1;
  // (state, arm) pairs some rank found unavailable (e.g. NCCL marked the slot unavailable):
  // the arm is dropped for that state, on every rank.
  std::vector<std::pair<uint32_t, uint16_t>> unavailable;
};

struct ArmStats {
  uint16_t arm = kDefaultArm;  // index in the engine's arm list
  std::string name;
  uint64_t calls = 0;    // calls decided with this arm
  uint64_t samples = 0;  // costs received for it
  // Costs since the state's last re-open, which the mean, median and centre are over (all 0
  // without one: a focused re-open parks the arms it does not re-probe, the default too).
  uint64_t regime_samples = 0;
  double mean_us = 0;
  double median_us = 0;  // over a window of recent samples
  double center_us = 0;  // what the learner compares arms by: winsorized mean, current regime
  double prior_us = 0;   // the catalog's prior (learned or analytic) it was ordered by; inf = none
  double prior_sigma = NAN;  // how sure that prior said it was (ArmPrior::sigma); NaN: unsaid
  bool eliminated = false;
};

// What a step trial rests on: the paired differences of step times, challenger minus incumbent.
struct TrialEvidence {
  uint64_t pairs = 0;
  double mean_delta_us = 0;  // > 0: the challenger made steps slower
  double stderr_us = 0;
};

// Something that changed a state's course, for people reading what the learner did.
struct StateEvent {
  uint64_t call = 0;  // the state's call count when it happened
  uint64_t step = 0;  // and the group's steps ended before it (Learner::mark_step)
  std::string what;   // "converged", "switched", "reopened...", "settled", "rollback...", ...
  uint16_t from_arm = kDefaultArm;  // the incumbent before and after
  uint16_t to_arm = kDefaultArm;
  // A step trial's verdict: what it rests on (StepTrialStats keeps only the last trial's).
  // pairs == 0: not a verdict, or one before any pair.
  TrialEvidence trial;
};

// An overlapped state's step trial: incumbent and challenger alternated across steps, judged by
// the paired difference of step times (challenger minus incumbent).
struct StepTrialStats : TrialEvidence {
  std::string challenger;  // empty: no trial has run
  std::string verdict;     // "running" | "adopted" | "rejected" | "no effect"
};

struct StateStats {
  uint32_t state_id = 0;
  Role role = Role::kDefault;
  OpKind op = OpKind::kAllReduce;
  int size_bin = 0;
  Exposure exposure = Exposure::kExposed;
  bool fused = false;
  uint16_t incumbent = kDefaultArm;
  std::string phase;  // "warmup" | "probing" | "exploit" | "settled" | "frozen"
  uint64_t calls = 0;
  uint64_t measured_calls = 0;  // calls whose cost the state asked for
  uint64_t probes = 0;
  // Probes before the state first converged (all of them while it has not): what learning it
  // took, without the runner-up re-checks and re-opens after.
  uint64_t probes_to_converge = 0;
  uint32_t alarms = 0;             // CUSUM re-openings
  bool frozen = false;             // a guard froze exploration
  uint64_t converged_at_call = 0;  // call count at which probing ended last (0 = not yet)
  // Do-no-harm accounting, µs: what learning cost over the default (negative: it saved), and
  // the budget it may not exceed (regret_budget x calls x the default's cost).
  double extra_us = 0;
  double budget_us = 0;
  // The default's cost those are reckoned against: its centre, or without costs since the last
  // re-open the last centre it had (0 = not measured yet).
  double reference_us = 0;
  // Channels of the default's call (states with channel caps; 0 = not known): as the prior's
  // model derives them, and the most NCCL reported running it on (NCCL >= 2.30).
  int assumed_channels = 0;
  int nccl_channels = 0;
  std::vector<StateEvent> events;  // the most recent, oldest first
  std::vector<ArmStats> arms;
  StepTrialStats trial;  // overlapped states only
};

// Everything the learner knows, in a form Python turns into JSON (save_policy / load_policy).
struct ArmSnapshot {
  std::string name;
  uint64_t samples = 0;
  double mean_us = 0;
  double m2 = 0;  // sum of squared deviations (Welford)
  // The engine's analytic prior of the arm when the state was created (0 = none): what a
  // learned prior is trained to correct (dynamiccl_pg/prior/). Not restored.
  double analytic_us = 0;
  bool eliminated = false;
  // Overlapped states: a step trial found the arm shortens the step (adopted) or does not
  // (rejected); both survive a warm start, so per-call evidence does not undo them.
  bool step_adopted = false;
  bool step_rejected = false;
};
struct StateSnapshot {
  Role role = Role::kDefault;
  OpKind op = OpKind::kAllReduce;
  int size_bin = 0;
  Exposure exposure = Exposure::kExposed;
  bool fused = false;
  std::string incumbent;  // arm name
  bool converged = false;
  std::vector<ArmSnapshot> arms;
};
struct PolicySnapshot {
  std::vector<StateSnapshot> states;
};

// The keys of a policy file, defined once. The bindings write and read a snapshot's
// (python/policy_bindings.cpp), dynamiccl_pg/policy_io.py writes the levels around the snapshots,
// dynamiccl_pg/policy_schema.py checks every level (through _C.policy_keys()). Every key is
// required; each list is in the order error messages name them.
namespace policy_key {
// The file: {"format": ..., "fingerprint": {...}, "groups": {group name: group}}.
inline constexpr const char* kFormat = "format";
inline constexpr const char* kFingerprint = "fingerprint";
inline constexpr const char* kGroups = "groups";
inline constexpr std::array<const char*, 3> kFile = {kFormat, kFingerprint, kGroups};
// A group: {"group_size": n, "nodes": n, "group_desc": "...", "engines": {engine: snapshot}}.
// nodes: the nodes the group spans (a learned prior's feature, dynamiccl_pg/prior/).
inline constexpr const char* kGroupSize = "group_size";
inline constexpr const char* kNodes = "nodes";
inline constexpr const char* kGroupDesc = "group_desc";
inline constexpr const char* kEngines = "engines";
inline constexpr std::array<const char*, 4> kGroup = {kGroupSize, kNodes, kGroupDesc, kEngines};
// A snapshot (PolicySnapshot): {"states": [state...]}.
inline constexpr const char* kStates = "states";
inline constexpr std::array<const char*, 1> kSnapshot = {kStates};
// A state (StateSnapshot).
inline constexpr const char* kRole = "role";
inline constexpr const char* kOp = "op";
inline constexpr const char* kSizeBin = "size_bin";
inline constexpr const char* kExposure = "exposure";
inline constexpr const char* kFused = "fused";
inline constexpr const char* kIncumbent = "incumbent";
inline constexpr const char* kConverged = "converged";
inline constexpr const char* kArms = "arms";
inline constexpr std::array<const char*, 8> kState = {kRole,  kOp,        kSizeBin,   kExposure,
                                                      kFused, kIncumbent, kConverged, kArms};
// An arm of a state (ArmSnapshot).
inline constexpr const char* kName = "name";
inline constexpr const char* kSamples = "samples";
inline constexpr const char* kMeanUs = "mean_us";
inline constexpr const char* kM2 = "m2";
inline constexpr const char* kAnalyticUs = "analytic_us";
inline constexpr const char* kEliminated = "eliminated";
inline constexpr const char* kStepAdopted = "step_adopted";
inline constexpr const char* kStepRejected = "step_rejected";
inline constexpr std::array<const char*, 8> kArm = {
    kName, kSamples, kMeanUs, kM2, kAnalyticUs, kEliminated, kStepAdopted, kStepRejected};
}  // namespace policy_key

// What a group's steps are (Learner::set_step_source). Marked: DDP's last bucket or
// dynamiccl_pg.step(); overlapped states are judged by them. Rounds: the group marks none and each
// consensus round is a step, a window of calls; the CPU learner judges every state by them (on
// cores shared with other work a call's own duration does not follow what a loop pays:
// benchmarks/results/cost_statistics.md), the NCCL learner none (kernel times, which that sharing
// does not reach, do follow it).
enum class StepSource : uint8_t { kMarked, kRoundsJudged, kRoundsIgnored };

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
  // The training step ends here: called at the same call index on every rank (DDP's last
  // bucket, dynamiccl_pg.step()). Overlapped states are judged by step time, step by step.
  void mark_step();
  // What the group's steps are (StepSource). Same on every rank.
  void set_step_source(StepSource source);
  // The round schedule closed a window of K learned calls here (RoundScheduler::Boundary::at),
  // the same call index on every rank: the next probe opens a new window and commits its round.
  void close_window();

  uint32_t epoch() const;
  Mode mode() const;
  void set_mode(Mode m);  // must be called at the same call index on every rank
  std::vector<StateStats> stats() const;
  PolicySnapshot snapshot() const;
  // Warm start: states and arm statistics are matched by (role, op, size bin, exposure, fused)
  // and arm name;
  // unknown arms are ignored. Must be applied identically on every rank.
  void restore(const PolicySnapshot& snap);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dynamiccl
