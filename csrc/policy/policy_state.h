// One learner state, a (role, op, size bin) of a process group, and its life cycle: warm-up on
// the engine default, budgeted deterministic probing with early elimination, exploitation with
// hysteresis, focused re-opening on a CUSUM alarm (see learner.h for the contract). The Learner
// owns the table of states, the guards and the snapshots; everything that concerns a single
// state lives here. The procedure per call is inline (policy/per_call.h: the hot path); the rest
// is in parts named after docs/learner.md: policy_candidates.cpp (the candidates and their
// prices), policy_state.cpp (costs folded in and the round's evaluation: switch, eliminate,
// resolve, converge, re-check, settle), policy_recovery.cpp (re-open after a change),
// policy_trials.cpp (step trials), policy_snapshot.cpp (stats, snapshots, freeze).
//
// Determinism: every function below reads only the state itself, the head's budgets and the
// costs handed to fold(). Nothing reads a clock, a random source, or this rank's own timings.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "core/types.h"
#include "policy/arm_catalog.h"
#include "policy/arm_evidence.h"
#include "policy/arm_slot.h"
#include "policy/budget.h"
#include "policy/cusum.h"
#include "policy/learner.h"
#include "policy/rules.h"
#include "policy/step_trial_board.h"
#include "policy/tuning.h"

namespace dynamiccl {

// Events kept per state for stats() (the most recent).
constexpr size_t kMaxEvents = 12;

enum class LearnPhase : uint8_t { kWarmup, kProbing, kExploit };

// Why a step trial's challenger was proposed: faster per call, or holding less (a footprint rung
// of the descent).
enum class TrialKind : uint8_t { kFaster, kFootprint };

class PolicyState {
 public:
  // Candidates: the engine default plus at most (max_candidates - 1) arms with the lowest prior
  // cost for this call's size and group, without those a prior pruned or priced beyond
  // kPriorCutoff x the best prior (the kChallengers best always stay, pruned ones last), all
  // kept in probe order (pruned last, then prior, then arm index).
  PolicyState(uint32_t id, const CollectiveContext& ctx, int size_bin, const HeadConfig& head,
              const ArmCatalog& catalog, RegretBudget* group_budget, StepTrialBoard* trials,
              ArmEvidenceBoard* evidence, RuleSet rules = {});

  // Hot path: picks the slot for the next call and counts it; `measure` tells whether its cost
  // is wanted. No allocation.
  int choose(Mode mode, bool* probe, bool* measure);

  // One paired step difference of this state's trial (challenger minus incumbent, µs).
  void add_trial_pair(double incumbent_step_us, double challenger_step_us);
  // What a probe of this state added to its step beyond the incumbent (StepTrialBoard): an
  // exposed call's cost over the incumbent's centre, winsorized as the arm's centre sees it
  // (0 before the incumbent has a cost); an overlapped call's, nothing the step shows by it.
  double probe_step_extra_us(uint16_t arm, float cost_us) const;
  // Whether a pair with a probed step counts in this state's trial (StepTrialBoard).
  bool keeps_probed_pair(double incumbent_step_us, double challenger_step_us) const;
  // A probe whose cost will never come (the engine could not time it): its committed extra is
  // released.
  void release_probe(uint16_t arm);
  // The state's share of the consensus round that carried its probe (else its measured call:
  // the incumbent's costs compared beside probes, warm-up, watch samples): learning's cost.
  void charge_round(double share_us) {
    extra_us_ += share_us;
    group_->spent_us += share_us;
  }
  // NCCL ran a call of the default on `channels` (agreed: the most over ranks). Caps holding
  // less than kMinCapShare of them are dropped.
  void note_default_channels(int channels);
  // Folds one agreed cost (`probe`: the decision was a probe). Returns true when it raised a
  // CUSUM alarm (probing re-opened). `learning` is false in frozen/off mode: statistics still
  // accumulate, nothing changes.
  bool fold(uint16_t arm, float cost_us, bool probe, bool learning);
  // Once per round after the costs: switch, eliminate, resolve, converge, re-check, settle.
  void evaluate(const MeasureCost& measure);
  // The arm can never run for this state again; an incumbent falls back to the best arm known in
  // the current regime (the default when none is known).
  void drop_arm(uint16_t arm);
  // Guard freeze: stop exploring, run the best known arm if it beats the default by the switch
  // margin, else the default.
  void freeze();
  // Warm start from a snapshot of the same (role, op, size bin): exploit immediately.
  void restore(const StateSnapshot& snap, const std::vector<Arm>& arms);

  StateStats stats(const std::vector<Arm>& arms) const;
  StateSnapshot snapshot(const std::vector<Arm>& arms) const;

  uint32_t id() const { return id_; }
  Role role() const { return role_; }
  OpKind op() const { return op_; }
  int size_bin() const { return size_bin_; }
  LearnPhase phase() const { return phase_; }
  bool frozen() const { return frozen_; }
  bool settled() const { return settled_; }
  bool converged() const { return phase_ == LearnPhase::kExploit; }
  int incumbent_slot() const { return incumbent_; }
  int default_slot() const { return default_slot_; }
  ArmSlot& slot(int i) { return slots_[i]; }
  const ArmSlot& slot(int i) const { return slots_[i]; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  // Slot of `arm`, or -1 when it is not a candidate of this state.
  int slot_of(uint16_t arm) const { return arm < slot_of_arm_.size() ? slot_of_arm_[arm] : -1; }

 private:
  // Probing: round robin over candidates still short of need_ calls (a gated candidate waits
  // for its first cost; those never probed take their first in the prior's order), then, once the
  // incumbent has need_ costs, the undecided candidate with the widest
  // confidence interval (costs in flight counted); -1 if none. The footprint descent's next rung,
  // when it waits for its first cost, goes first: the descent is what shortens the step of an
  // overlapped state (DDP interference scenario: behind arms that cannot win, the rung's probe came
  // late, and the run captured 93% of the step oracle's headroom instead of 95%).
  int probe_target();
  // First probes go in the prior's order: of the candidates never probed, only those at the best
  // price may be (+inf: none wants one). The budget decides when, not which: when each had its
  // turn, a refund arriving between two turns let a worse arm in first (simulated socket
  // transport: ring/LL, priced 1.9x and 20x in truth, before tree at 0.65x; its probe spent the
  // group's budget and tree waited 70 calls).
  double next_first_probe_price() const;
  // A candidate short of need_ calls that may be probed now.
  bool wants_first_probes(int i) const;
  // A gated candidate whose first cost is still in flight.
  bool awaiting(const ArmSlot& a) const;
  // Do-no-harm gate (a) of learner.h: the probe's expected extra fits in the group's regret
  // budget, or the probe repays it. Not before the state's default has a cost: there is nothing
  // to measure the extra against yet.
  bool affordable(const ArmSlot& a) const;
  // Confidently cheaper than the default (the upper bound of its centre; for a lone cost, with the
  // default's spread, only while the state has shown no slow outlier: one could hit the next
  // probe, and before three costs the ledger charges it in full), and, where the step judges, not
  // found to lengthen it: a probe gives budget back (the ledger charges probes per call). Without
  // this, one disastrous probe elsewhere (ring/LL over NCCL's socket transport: 18-51x the
  // default) stops every state's probes for thousands of calls, a winning arm's too.
  bool repays(const ArmSlot& a) const;
  // Gate (b): an arm never measured waits (deferred) until the state has seen the calls that
  // make a first probe worth it (kPriorSigma); decided when a probing episode begins.
  bool worth_probing(const ArmSlot& a) const;
  void begin_probing();
  // The incumbent's call outside a settled state: measured while probes flow (comparisons need its
  // costs beside theirs, in the same rounds) in the windows that carry a probe (elsewhere its costs
  // would each bring a round about), or while its costs are too few to compare; otherwise for the
  // fraction that keeps measuring within kLearningOverhead of the state's time: every call where
  // rounds cost nothing (update_measure_rates).
  int incumbent_call(bool* measure);
  // A settled state's call: the incumbent, measured only for a fraction of calls (kWatchOverhead),
  // some of which check the default again when the incumbent is not the default.
  int watch(bool* probe, bool* measure);
  // A trial's call: the incumbent until the trial's first step, then the step's arm. Measured,
  // so that rounds keep running (they carry the step times) and the arms keep their costs.
  int trial_call(bool* measure);
  // While another state's step trial runs, the group's steps alternate between its incumbent and
  // its challenger, and a call's cost depends on which ran beside it (on a CPU the default runs on
  // Gloo's threads, our schedules queue on ours). A state probing every other call would take all
  // its probes in steps of one kind and all its incumbent's costs in both: a WAN run adopted tree,
  // measured 3x faster than rd that way, for a 1.4x longer step. So probes taken during a trial
  // go to the kinds of step in turn (with two trials, four kinds: each lane's arm). True when a
  // probe may run in this step, which it then claims: the next probe goes to the next kind.
  bool claim_probe_step();
  // Whether a challenger is judged by step time (StepSource): overlapped states of a group that
  // marks steps, every state of a CPU learner whose steps are rounds.
  bool judged_by_step() const;
  // Per-call costs are no promise of step time where the group's rounds are its steps, judged
  // because per call does not follow the wall clock there (a loop of tiny calls on shared cores:
  // benchmarks/results/cost_statistics.md).
  bool per_call_misleads() const;
  bool on(Rule r) const { return rules_.on(r); }
  // The board's free lane (-1 none); with one lane (Rule::kTwoLanes off) only while none runs.
  int free_lane() const {
    if (on(Rule::kTwoLanes)) return trials_->free_lane();
    return trials_->busy() ? -1 : 0;
  }
  // Step trials (policy_trials.cpp).
  // Faster per call while holding no more: it can only shorten the step, so its trial may run
  // (and pay back) while the do-no-harm budget is spent, as long as its pairs show no harm.
  bool pays_back(int challenger, TrialKind kind) const;
  bool may_open_trial(int challenger, TrialKind kind) const;
  void retry_stopped_trial();
  void open_trial(int challenger, TrialKind kind);
  void propose_footprint_trial();
  void evaluate_trial();
  // Adopted: the challenger becomes the incumbent. Rejected: it is not tried again. Stopped: no
  // verdict on it; a step trial's challenger is trialed again once the board and the budget
  // allow (retry_stopped_trial), a footprint trial's once the descent proposes it. Shorter on
  // average: a footprint rung whose pairs showed the step shorter, not confidently, is rejected,
  // and the descent goes on below it (or, with no rung below, runs on once). Inconclusive (no
  // effect, or rejected on a spent budget by its pairs' mean): rejected; after a footprint rung
  // the descent ends.
  enum class TrialEnd { kAdopted, kRejected, kStopped, kShorterOnAverage, kInconclusive };
  void end_trial(const char* verdict, TrialEnd end);
  void reject_for_longer_steps();
  // Per-call switches.
  void adopt_per_call(int challenger);
  // The arm at slot `i` can never run for this state again (`why`: the events' and the trial's
  // word for it).
  void drop_slot(int i, const char* why);
  int widest_target() const;
  // Probes after which an undecided near-tie is resolved without a verdict (kProbeCapFactor).
  uint32_t probe_cap() const { return static_cast<uint32_t>(head_.min_samples) * kProbeCapFactor; }
  void set_prior_ratios();  // each arm's prior cost relative to the default's (constructor)
  void refresh_views();     // views of arms whose costs arrived since the last refresh
  // Posts this state's measured arms to the group's board and prices its unmeasured ones by what
  // the board says (arm_evidence.h); at every round.
  void exchange_evidence();
  // The slot of the arm `cap` caps (same algorithm, protocol, chunk); -1 if none.
  int uncapped_twin(const ArmSlot& cap) const;
  // The prior's price of an arm, as the group's measured costs correct it.
  static double priced_us(const ArmSlot& a) { return a.prior_us * a.evidence_factor; }
  // The phases of evaluate().
  void update_measure_rates(const MeasureCost& measure);
  void evaluate_probing(double keep);
  void switch_to_cheapest(double keep);
  bool resolve_challengers(bool inc_ready, double keep);
  void evaluate_exploit(double keep);
  void recheck_runner_up(double keep);
  bool fresh_enough(const ArmSlot& a, const ArmSlot& inc) const;
  double fresh_median_ucb(const ArmSlot& a, const ArmSlot& inc) const;
  void converge();
  void settle();
  void unsettle();
  void note(const char* what, int from_slot, int to_slot);
  void update_budget_view();  // ref_us_ and every arm's expected extra
  void wake_deferred();       // a deferred arm became worth probing: probe it
  void rollback_if_default_cheaper();
  void release_all(ArmSlot& a);  // drops the expected extra of its probes in flight
  void reopen_focused(int challenger, int keep_incumbent, bool slower);
  void update_tail();
  bool hopeless(const ArmSlot& c, const ArmSlot& inc) const;
  bool cannot_win_by_prior(const ArmSlot& c) const;  // against the incumbent, at the margin
  // The share of the incumbent's cost slot i must beat to take over: `keep` (1 - switch_margin)
  // for a challenger, 1 for NCCL's default. The margin is the price of leaving the default (a
  // switch must pay it back); returning to it only needs the default confidently cheaper, so an
  // arm adopted under other conditions cannot stay up to a margin slower than the engine's own
  // choice, and the asymmetry still keeps a state from flapping.
  double keep_for(int i, double keep) const { return i == default_slot_ ? 1.0 : keep; }
  int pick_runner_up() const;
  int best_known() const;

  uint32_t id_;
  RuleSet rules_;
  Role role_;
  OpKind op_;
  int size_bin_;
  Exposure exposure_;
  bool fused_;
  HeadConfig head_;
  uint64_t warmup_calls_;
  uint32_t probe_ppm_;
  uint32_t converged_ppm_;

  std::vector<ArmSlot> slots_;        // probe order
  std::vector<int16_t> slot_of_arm_;  // catalog arm index -> slot, -1 if not a candidate
  int default_slot_ = 0;
  int incumbent_ = 0;
  int runner_up_ = -1;  // exploit: the arm re-checked now and then
  int rr_cursor_ = 0;
  LearnPhase phase_ = LearnPhase::kWarmup;
  bool frozen_ = false;
  int focus_from_ = -1;         // incumbent before a focused re-open still in progress
  uint32_t need_ = 0;           // costs an arm needs before it is compared (min_samples)
  uint32_t hopeless_need_ = 1;  // costs an early elimination rests on (update_tail)
  double tail_ = 0;             // the state's outlier rate (update_tail)
  uint32_t budget_ppm_ = 0;     // current probing fraction
  CallCredit probe_credit_;
  uint64_t calls_ = 0;
  uint64_t measured_calls_ = 0;
  uint64_t probes_ = 0;
  std::optional<uint64_t> probes_to_converge_;  // probes_ when the state first converged
  uint32_t alarms_ = 0;
  uint64_t converged_at_call_ = 0;
  Cusum cusum_;
  // Do no harm (learner.h): the default's cost (the baseline), what learning has cost over it,
  // and the expected extra of probes in flight.
  double ref_us_ = 0;
  double extra_us_ = 0;  // this state's part of what the group spent over the default
  RegretBudget* group_;
  // Settling.
  bool settled_ = false;
  uint64_t quiet_since_ = 0;         // call count of the last event (convergence, switch, ...)
  uint32_t watch_ppm_ = kPpmOne;     // fraction of a settled state's calls that are measured
  uint32_t learning_ppm_ = kPpmOne;  // the same before settling
  CallCredit learning_credit_;
  MeasureCost measure_;             // what measuring costs the job, as the last round said
  uint32_t trial_time_probes_ = 0;  // probes taken during other states' trials (claim_probe_step)
  bool probes_flow_ = true;         // the last probe search found an affordable target
  CallCredit watch_credit_;
  uint32_t check_ppm_ = 0;   // rate of the default's rollback checks (halves when they confirm
  CallCredit check_credit_;  // the incumbent, down to kMinWatchFraction)
  std::vector<StateEvent> events_;
  // The last trial, when it stopped without a verdict: its two arms (open_trial resumes it).
  struct StoppedTrial {
    int challenger = -1;
    int incumbent = -1;
  } stopped_;
  StepTrialBoard* trials_;      // the group's step trials
  int lane_ = -1;               // the board's lane of this state's running trial
  ArmEvidenceBoard* evidence_;  // what the group's measured arms say (arm_evidence.h)
  bool has_caps_ = false;       // some candidate holds less than the default
  // Channels of the default's call (states with channel caps): as the prior's model derives
  // them, and the most NCCL reported running it on (0: not reported; NCCL >= 2.30). Shown in
  // stats(); the report bounds which caps stay offered (kMinCapShare), but does not price them
  // (a channel may carry more than its share of the links: the count alone says too little).
  int assumed_channels_ = 0;
  int reported_channels_ = 0;
  struct Trial {
    int challenger = -1;
    uint16_t arm = kDefaultArm;    // the last trial's challenger, for stats()
    RunningStats deltas;           // the paired differences, µs
    RunningStats incumbent_steps;  // the pairs' incumbent step times, µs
    double stderr_us() const {
      return deltas.count() > 1 ? deltas.stddev() / std::sqrt(deltas.count()) : 0.0;
    }
    TrialEvidence evidence() const { return {deltas.count(), deltas.mean(), stderr_us()}; }
    const char* verdict = "";
    TrialKind kind = TrialKind::kFaster;
    bool extended = false;  // a last rung's second run (kLastRungPairsScale)
  } trial_;
  bool footprint_done_ = false;  // a footprint trial did not shorten the step: no more of them
  // The footprint of the last rung trialed and not adopted, that shortened the step only on average
  // or showed nothing (the next holds less); infinite when none since the incumbent came.
  double passed_rung_footprint_ = std::numeric_limits<double>::infinity();
  int awaited_rung_ = -1;  // the descent's next rung, awaiting its first cost; -1 none
  // The rung whose trial ended shorter on average, run on if no rung below it qualifies; -1 none.
  int last_rung_ = -1;
  // A step trial that stopped without a verdict: its challenger, to trial again once it may.
  int retry_challenger_ = -1;
};

}  // namespace dynamiccl

#include "policy/per_call.h"  // the inline definitions of the procedure per call
