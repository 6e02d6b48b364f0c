// One learner state, a (role, op, size bin) of a process group, and its life cycle: warm-up on
// the engine default, budgeted deterministic probing with early elimination, exploitation with
// hysteresis, focused re-opening on a CUSUM alarm (see learner.h for the contract). The Learner
// owns the table of states, the guards and the snapshots; everything that concerns a single
// state lives here (defined in policy_state.cpp, with its re-open in policy_recovery.cpp and its
// step trials in policy_trials.cpp).
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
#include "policy/cusum.h"
#include "policy/learner.h"
#include "policy/rules.h"
#include "policy/step_trial_board.h"
#include "policy/tuning.h"

namespace dynamiccl {

// "Resolved" (this challenger cannot beat the incumbent by the switch margin) is a one-sided
// question: its lower bound at ~95% one-sided. It only stops probing; it eliminates nothing.
// An undecided candidate is probed until it has this many times min_samples calls; after that
// the incumbent keeps its place (the tie cannot pay for more probing).
// After convergence the probing budget decays towards converged_budget by 1/2^shift per call:
// about (probe_budget - converged_budget) x 2^shift extra runner-up probes, ~8 at the bulk heads'
// 50%, i.e. two runner-up re-checks of min_samples. A slower decay (1/64: ~31 probes) cost a
// few % of step time in training where the runner-up is a near-tie in isolation but slower in
// the job, and made no better decisions in the simulator's library.
// CUSUM watches the incumbent once its centre rests on this many costs.
// Budgets are kept in parts per million so the credit counters are exact integer arithmetic.
constexpr uint32_t kPpmOne = 1000000;

// Paces a fraction of calls: each call earns `rate_ppm`, and a whole call's worth (kPpmOne) buys
// one. Integer, and counted in calls only, so every rank takes the same calls.
struct CallCredit {
  uint32_t ppm = 0;
  // Earns one call's share; true when a whole call's worth is held (not yet spent).
  bool earn(uint32_t rate_ppm) {
    ppm += rate_ppm;
    return ppm >= kPpmOne;
  }
  void spend() { ppm -= kPpmOne; }
  // Earns and, when a whole call's worth is held, spends it.
  bool take(uint32_t rate_ppm) {
    if (!earn(rate_ppm)) return false;
    spend();
    return true;
  }
  // The earned call waits for a later one without being banked twice.
  void hold() { ppm = kPpmOne; }
  void clear() { ppm = 0; }
};

// --- Candidates -------------------------------------------------------------------------------
// An arm whose prior cost is more than kPriorCutoff times the best prior of the state is not a
// candidate (at 100,000 ranks a ring arm is priced 1,500x NCCL's pick and really costs seconds
// per call), except that the kMinChallengers best arms by prior always are. The cut is wide
// because priors are models: the winners the simulator's library plants sit at up to 4x.
// Do no harm: a challenger gets a single probe until its first cost is back. Probes are committed
// on the prior's expectation, and a prior can be wrong (on a 2-core CPU host halving-doubling is
// priced cheapest and costs twice the default); the first cost lets the hopeless rule drop the arm
// before more probes are spent on it, so a wrong prior costs at most one probe per arm.
// A gated candidate waiting for a cost that does not come stops waiting after this many rounds.

// --- Early elimination ------------------------------------------------------------------------
// Hopeless: a challenger whose cheapest cost so far exceeds the incumbent's worst recent cost
// short of an outlier (so that normal spread is not mistaken for a slow arm) and either
// kHopelessRatio times the incumbent's centre or, by the state's noise level, confidently its
// upper bound, is eliminated after as few costs as make "all of them outliers" less likely than
// kHopelessFalseRate (one while the state has shown no outlier; at most min_samples).

// --- Change detection and recovery ------------------------------------------------------------
// Re-opening after an alarm (or a runner-up that became confidently cheaper) re-probes only the
// kRecoveryArms best arms by their last known centre, the incumbent included, at the exploring
// budget; the others are parked.
// A measured arm beyond kPriorCutoff x the default keeps its word on the group's evidence board
// through a re-open (arm_evidence.h): no change of regime makes it a winner.
static_assert(kRecoveryArms >= 2, "the incumbent and a challenger are always re-probed");
// After an alarm on a rise of the incumbent's cost by more than this fraction, the best re-probed
// arm by its last known centre takes over at once (provisionally) if it was cheaper than the
// incumbent is now: e.g. congestion tripled the incumbent's cost. Smaller shifts, and false
// alarms, leave the incumbent in place until a challenger confidently beats it.
// sqrt(pi/2), rounded: a normal sample's median has this many times its mean's standard error.
// The runner-up re-check and the rollback check bound a median of recent costs with it.
constexpr double kMedianSeRatio = 1.2533;

// --- Do no harm -------------------------------------------------------------------------------
// The prior's ratio of an arm's cost to the default's is treated as the median of a log-normal
// with this spread: an arm priced at 4x the default has ~8% chance of being cheaper.
// Measuring costs the job consensus rounds (MeasureCost): a state that measures sparsely pays a
// round per measured call, one that measures densely a K-th of one. Outside warm-up, a state
// measures its incumbent's every call only while probes flow, and where rounds cost something only
// in the round windows that carry a probe (the probes of a round pay its price between them, and
// a round without probes is paid by the calls it measured); otherwise only as often as keeps that
// cost within kLearningOverhead of its time (kWatchOverhead once settled), and at least
// kMinWatchFraction of them (so that the CUSUM still sees a change); calls that cost far more than
// a round are all measured. Of the measured calls of a settled non-default incumbent, the head's
// converged_budget fraction run the default instead (the rollback check), a fraction that halves
// every time the check confirms the incumbent.
// Events kept per state for stats() (the most recent).
constexpr size_t kMaxEvents = 12;

enum class LearnPhase : uint8_t { kWarmup, kProbing, kExploit };

// What measuring costs the job, as the last consensus round reported it (RoundResult).
struct MeasureCost {
  double round_us = 0;  // one round; 0 = unknown (measuring is free)
  int round_calls = 1;  // measured calls one round can carry
};

// The do-no-harm budget of a group's learner, pooled over its states (learner.h): what learning
// cost over the default (savings count as credit), what probes in flight are expected to cost,
// and what it may cost: every call adds regret_budget x its state's default cost.
struct RegretBudget {
  double spent_us = 0;
  double inflight_us = 0;
  double budget_us = 0;
  // The current round window (RoundScheduler: K learned calls) carries a probe: its round will
  // run, so the incumbent's calls measured beside the probes bring no round of their own. Set by
  // Learner::decide on a probe, cleared at every boundary (Learner::close_window).
  bool window_probed = false;
  bool allows(double more_us) const { return spent_us + inflight_us + more_us <= budget_us; }
};

// --- Footprint trials (overlapped states) ------------------------------------------------------
// A converged overlapped state trials an arm that holds at most kFootprintStep of the incumbent's
// footprint (ArmCatalog::footprint): per call it may be slower, yet free what the compute beside
// it needs. Arms measured beyond kFootprintMaxSlowdown x the incumbent per call are not tried:
// that much longer a call would surface in the step whatever it frees.
// A step trial adopts a challenger that shortens the step by more than kStepTrialMargin of it (with
// about 3 standard errors to spare): a smaller gain is not worth a switch from an arm chosen per
// call. A footprint rung is adopted when it shortens the step at all, as confidently: what it frees
// for the compute is what it is for, and a gain too small for the margin is still the step's. The
// simulated LLM step spreads 0.91% of headroom over two bucket states, and with the margin the
// 16 MiB one kept the default under every rung (benchmarks/sim/step_time.py --steps 1200: 80% of
// the headroom settled, 99% without the margin; --seeds 10: 36% over the run, 47% without).
// A cap holding less than this share of the channels NCCL reports running the state's default on
// is dropped. The catalog derives its caps (a half and a quarter) from the channel count its
// topology gives; when NCCL runs on many more (a described topology: 4 assumed, 32 real), those
// caps hold a sliver of the machine: per call up to 1/share slower, priced by the prior as if
// they held a half, and a first probe cannot be undone (simulator, LLM step: `ring/Simple/c2` of
// 32 channels at 15.5x, 0.44% of the run).
// Why a step trial's challenger was proposed: faster per call, holding less (footprint descent),
// or holding less (a footprint rung of the descent).
enum class TrialKind : uint8_t { kFaster, kFootprint };

class PolicyState {
 public:
  // Candidates: the engine default plus at most (max_candidates - 1) arms with the lowest prior
  // cost for this call's size and group, without those a prior pruned or priced beyond
  // kPriorCutoff x the best prior (the kMinChallengers best always stay, pruned ones last), all
  // kept in probe order (pruned last, then prior, then arm index).
  PolicyState(uint32_t id, const CollectiveContext& ctx, int size_bin, const HeadConfig& head,
              const ArmCatalog& catalog, RegretBudget* group_budget, StepTrialBoard* trials,
              ArmEvidenceBoard* evidence, RuleSet rules = {});

  // Hot path: picks the slot for the next call and counts it; `measure` tells whether its cost
  // is wanted. No allocation.
  int choose(Mode mode, bool* probe, bool* measure) {
    *probe = false;
    *measure = false;
    ++calls_;
    if (mode == Mode::kOff) return default_slot_;
    if (mode == Mode::kFrozen || frozen_) return incumbent_;
    group_->budget_us += head_.regret_budget * ref_us_;
    if (trial_.challenger >= 0) return trial_call(measure);
    if (settled_) return watch(probe, measure);
    if (phase_ == LearnPhase::kWarmup) {
      if (calls_ <= warmup_calls_) {
        *measure = true;  // the default's cost: the baseline everything is judged against
        ++measured_calls_;
        return default_slot_;
      }
      begin_probing();  // depends on the call count only: the same call on every rank
    }
    if (phase_ == LearnPhase::kExploit && budget_ppm_ > converged_ppm_) {
      // Geometric decay of the exploration budget after convergence (see kConvergedDecayShift).
      const uint32_t step = (budget_ppm_ - converged_ppm_) >> kConvergedDecayShift;
      budget_ppm_ -= step > 0 ? step : 1;
    }
    if (!probe_credit_.earn(budget_ppm_)) return incumbent_call(measure);
    const int target = phase_ == LearnPhase::kProbing ? probe_target() : runner_up_;
    probes_flow_ = target >= 0 && affordable(slots_[target]);
    if (probes_flow_ && !claim_probe_step()) {
      probe_credit_.hold();  // the probe waits for a step of the other kind
      return incumbent_call(measure);
    }
    if (!probes_flow_) {
      // Nothing to probe now (costs in flight, no challenger, or not affordable yet): the credit
      // is not banked, so the search runs at most once per 1/budget calls and probes never come
      // back to back.
      probe_credit_.clear();
      return incumbent_call(measure);
    }
    probe_credit_.spend();
    ++probes_;
    *probe = true;
    *measure = true;
    ++measured_calls_;
    ArmSlot& t = slots_[target];
    const double commit_us = t.expected_extra_us;
    t.inflight_extra_us += commit_us;
    ++t.inflight_probes;
    group_->inflight_us += commit_us;
    return target;
  }

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
  int probe_target() {
    if (awaited_rung_ >= 0 && wants_first_probes(awaited_rung_)) return awaited_rung_;
    const int n = num_slots();
    const double first_price = next_first_probe_price();
    for (int k = 0; k < n; ++k) {
      int i = rr_cursor_ + k;
      if (i >= n) i -= n;
      if (!wants_first_probes(i) ||
          (on(Rule::kFirstProbes) && slots_[i].issued == 0 && priced_us(slots_[i]) > first_price))
        continue;
      rr_cursor_ = i + 1 == n ? 0 : i + 1;
      return i;
    }
    // Sharpening a challenger's interval is pointless until the incumbent has a reference
    // (after a re-open it may have none): its own calls come first.
    if (slots_[incumbent_].stats.count() < need_) return -1;
    return widest_target();
  }
  // First probes go in the prior's order: of the candidates never probed, only those at the best
  // price may be (+inf: none wants one). The budget decides when, not which: when each had its
  // turn, a refund arriving between two turns let a worse arm in first (simulated socket
  // transport: ring/LL, priced 1.9x and 20x in truth, before tree at 0.65x; its probe spent the
  // group's budget and tree waited 70 calls).
  double next_first_probe_price() const {
    double best = INFINITY;
    for (int i = 0; i < num_slots(); ++i) {
      if (slots_[i].issued == 0 && wants_first_probes(i))
        best = std::min(best, priced_us(slots_[i]));
    }
    return best;
  }
  // A candidate short of need_ calls that may be probed now.
  bool wants_first_probes(int i) const {
    const ArmSlot& a = slots_[i];
    return i != incumbent_ && a.probeable() && a.issued < need_ && !awaiting(a) && worth_probing(a);
  }
  // A gated candidate whose first cost is still in flight.
  bool awaiting(const ArmSlot& a) const {
    return on(Rule::kFirstProbes) && a.gated && a.stats.count() == 0 && a.issued > 0;
  }
  // Do-no-harm gate (a) of learner.h: the probe's expected extra fits in the group's regret
  // budget, or the probe repays it. Not before the state's default has a cost: there is nothing
  // to measure the extra against yet.
  bool affordable(const ArmSlot& a) const {
    return ref_us_ > 0 && (group_->allows(a.expected_extra_us) || repays(a));
  }
  // Confidently cheaper than the default (the upper bound of its centre; for a lone cost, with the
  // default's spread, only while the state has shown no slow outlier: one could hit the next
  // probe, and before three costs the ledger charges it in full), and, where the step judges, not
  // found to lengthen it: a probe gives budget back (the ledger charges probes per call). Without
  // this, one disastrous probe elsewhere (ring/LL over NCCL's socket transport: 18-51x the
  // default) stops every state's probes for thousands of calls, a winning arm's too.
  bool repays(const ArmSlot& a) const {
    if (!on(Rule::kRepays) || a.view.n == 0 || a.step_rejected || (a.view.n == 1 && tail_ > 0) ||
        (per_call_misleads() && judged_by_step())) {
      return false;
    }
    const double half_width = a.view.n == 1 ? kConfidenceZ * slots_[default_slot_].view.spread
                                            : a.view.half_width;
    return a.view.center + half_width < ref_us_;
  }
  // Gate (b): an arm never measured waits (deferred) until the state has seen the calls that
  // make a first probe worth it (kPriorSigma); decided when a probing episode begins.
  bool worth_probing(const ArmSlot& a) const { return !a.deferred; }
  void begin_probing() {
    phase_ = LearnPhase::kProbing;
    for (ArmSlot& a : slots_) {
      a.deferred = on(Rule::kWorthProbing) && a.issued == 0 && a.stats.count() == 0 &&
                   calls_ < a.worth_from_call;
    }
  }
  // The incumbent's call outside a settled state: measured while probes flow (comparisons need its
  // costs beside theirs, in the same rounds) in the windows that carry a probe (elsewhere its costs
  // would each bring a round about), or while its costs are too few to compare; otherwise for the
  // fraction that keeps measuring within kLearningOverhead of the state's time: every call where
  // rounds cost nothing (update_measure_rates).
  int incumbent_call(bool* measure) {
    const bool compared = phase_ == LearnPhase::kProbing && probes_flow_ && group_->window_probed;
    if (!compared && slots_[incumbent_].view.n >= need_) {
      if (!learning_credit_.take(learning_ppm_)) return incumbent_;
    }
    *measure = true;
    ++measured_calls_;
    return incumbent_;
  }
  // A settled state's call: the incumbent, measured only for a fraction of calls (kWatchOverhead),
  // some of which check the default again when the incumbent is not the default.
  int watch(bool* probe, bool* measure) {
    if (!watch_credit_.take(watch_ppm_)) return incumbent_;
    *measure = true;
    ++measured_calls_;
    // An arm a step trial adopted was weighed against the default by the step, not per call.
    if (incumbent_ == default_slot_ || slots_[incumbent_].step_adopted) return incumbent_;
    if (!check_credit_.earn(check_ppm_)) return incumbent_;
    if (!claim_probe_step()) {
      check_credit_.hold();
      return incumbent_;
    }
    check_credit_.spend();
    *probe = true;  // the default's cost is the baseline itself: no extra to commit
    ++probes_;
    return default_slot_;
  }
  // A trial's call: the incumbent until the trial's first step, then the step's arm. Measured,
  // so that rounds keep running (they carry the step times) and the arms keep their costs.
  int trial_call(bool* measure) {
    *measure = true;
    ++measured_calls_;
    TrialLane& lane = trials_->lanes[lane_];
    if (trials_->step < lane.start) return incumbent_;
    lane.used = true;
    return lane.challenger_at(trials_->step) ? trial_.challenger : incumbent_;
  }
  // While another state's step trial runs, the group's steps alternate between its incumbent and
  // its challenger, and a call's cost depends on which ran beside it (on a CPU the default runs on
  // Gloo's threads, our schedules queue on ours). A state probing every other call would take all
  // its probes in steps of one kind and all its incumbent's costs in both: a WAN run adopted tree,
  // measured 3x faster than rd that way, for a 1.4x longer step. So probes taken during a trial
  // go to the kinds of step in turn (with two trials, four kinds: each lane's arm). True when a
  // probe may run in this step, which it then claims: the next probe goes to the next kind.
  bool claim_probe_step() {
    uint32_t kinds = 1, kind = 0;
    for (const TrialLane& l : trials_->lanes) {
      if (!l.running_at(trials_->step)) continue;
      kind += kinds * l.challenger_at(trials_->step);
      kinds *= 2;
    }
    if (kinds == 1 || !on(Rule::kProbeStepKinds)) return true;
    if (kind != trial_time_probes_ % kinds) return false;
    ++trial_time_probes_;
    return true;
  }
  // Whether a challenger is judged by step time (StepSource): overlapped states of a group that
  // marks steps, every state of a CPU learner whose steps are rounds.
  bool judged_by_step() const {
    if (trials_->step == 0) return false;
    switch (trials_->source) {
      case StepSource::kMarked: return exposure_ == Exposure::kOverlapped;
      case StepSource::kRoundsJudged: return true;
      case StepSource::kRoundsIgnored: return false;
    }
    return false;
  }
  // Per-call costs are no promise of step time where the group's rounds are its steps, judged
  // because per call does not follow the wall clock there (a loop of tiny calls on shared cores:
  // benchmarks/results/cost_statistics.md).
  bool per_call_misleads() const { return trials_->source == StepSource::kRoundsJudged; }
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
