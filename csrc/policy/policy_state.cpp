#include "policy/policy_state.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace dynamiccl {

namespace {

uint32_t to_ppm(double fraction) {
  // Floor, so the integer budget never exceeds the configured fraction.
  return static_cast<uint32_t>(std::clamp(fraction, 0.0, 1.0) * kPpmOne);
}

// CUSUM spread: the standard deviation of the incumbent's winsorized costs over the regime
// (stable, unlike a MAD of a short window, and bounded by the winsorizing under heavy tails), but
// never below the switch margin (at least 1%) of its centre. Without the floor a near-noiseless
// cost would alarm on shifts far too small to change which arm is best.
double cusum_sigma(const ArmView& v, double switch_margin) {
  const double floor = std::max(switch_margin, 0.01) * std::fabs(v.center);
  return std::max({v.spread, floor, 1e-9});
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Value of a first probe (learner.h, gate (b)), for a cost ratio R to the default that is
// log-normal around `prior_ratio`: the call count from which the expected saving per call,
// E[(1 - R)+], times the calls seen exceeds the expected extra of one probe, E[(R - 1)+].
uint64_t worth_from_call(double prior_ratio) {
  const double mu = std::log(prior_ratio), s = kPriorSigma;
  const double mean = std::exp(mu + 0.5 * s * s);
  const double extra = mean * normal_cdf(mu / s + s) - normal_cdf(mu / s);
  const double saving = normal_cdf(-mu / s) - mean * normal_cdf(-mu / s - s);
  constexpr double kNever = 1e15;
  if (!(saving > extra / kNever)) return static_cast<uint64_t>(kNever);
  return static_cast<uint64_t>(std::ceil(extra / saving));
}

// A candidate arm, its prior cost (+inf when the catalog has no estimate) and its footprint.
struct Ranked {
  double prior;
  uint16_t arm;
  double footprint = 1.0;
  double analytic = 0;
  double sigma = NAN;   // the prior's stated confidence (ArmPrior::sigma)
  bool pruned = false;  // ArmPrior::pruned
};

// Probe order: arms a prior pruned last, then prior, then arm index.
bool by_prior(const Ranked& a, const Ranked& b) {
  if (a.pruned != b.pruned) return b.pruned;
  return a.prior < b.prior || (a.prior == b.prior && a.arm < b.arm);
}

// The reference the cut is measured from: the best positive prior, the default's included (an
// engine may price its default at 0 = "not estimated"; that says nothing about the other arms).
// +inf when no arm is priced.
double best_positive_prior(const std::vector<Ranked>& challengers, const Ranked& def) {
  double best_prior = INFINITY;
  for (const Ranked& r : challengers) {
    if (r.prior > 0 && !r.pruned) best_prior = std::min(best_prior, r.prior);
  }
  if (def.prior > 0) best_prior = std::min(best_prior, def.prior);
  return best_prior;
}

// The state's candidates in probe order (see PolicyState's constructor): the default plus the
// challengers with the lowest priors, up to max_candidates and the kPriorCutoff cut. An
// overlapped state also keeps, for each footprint below the default's that the list lacks, the
// best arm by prior that holds it (within the cut): the rungs of its footprint descent.
std::vector<Ranked> rank_candidates(const ArmCatalog& catalog, const CollectiveContext& ctx,
                                    size_t n_arms, int max_candidates, bool overlapped,
                                    bool cutoff) {
  const std::vector<ArmPrior> priors = catalog.priors(ctx);
  const std::vector<double> analytic = catalog.analytic_costs_us(ctx);
  if (priors.size() != n_arms || analytic.size() != n_arms) {
    throw std::logic_error("arm catalog priced " + std::to_string(priors.size()) + " arms of op " +
                           op_name(ctx.op) + ", it offers " + std::to_string(n_arms));
  }
  const auto ranked_arm = [&](uint16_t arm) {
    const double p = priors[arm].cost_us;
    // An arm without an estimate is tried last.
    return Ranked{std::isnan(p) ? INFINITY : p,
                  arm,
                  catalog.footprint(ctx.op, arm, ctx.effective_bytes),
                  analytic[arm],
                  priors[arm].sigma,
                  priors[arm].pruned};
  };
  std::vector<Ranked> ranked;
  ranked.reserve(n_arms);
  for (size_t a = 1; a < n_arms; ++a) ranked.push_back(ranked_arm(static_cast<uint16_t>(a)));
  std::sort(ranked.begin(), ranked.end(), by_prior);
  const Ranked def = ranked_arm(kDefaultArm);
  const double best_prior = best_positive_prior(ranked, def);
  const bool priced = std::isfinite(best_prior);
  const size_t others = static_cast<size_t>(std::max(max_candidates - 1, 0));
  size_t keep = 0;
  while (keep < ranked.size() && keep < others &&
         (keep < static_cast<size_t>(kMinChallengers) ||
          (!ranked[keep].pruned &&
           (!priced || !cutoff || ranked[keep].prior <= kPriorCutoff * best_prior)))) {
    ++keep;  // sorted: the first arm pruned or beyond the cut ends the list
  }
  const std::vector<Ranked> rest(ranked.begin() + keep, ranked.end());
  ranked.resize(keep);
  for (const Ranked& r : rest) {  // in prior order: the first of a footprint is its best
    if (!overlapped || r.pruned || r.footprint >= def.footprint ||
        (priced && cutoff && r.prior > kPriorCutoff * best_prior))
      continue;
    const bool held = std::any_of(ranked.begin(), ranked.end(),
                                  [&](const Ranked& k) { return k.footprint == r.footprint; });
    if (!held) ranked.push_back(r);
  }
  ranked.push_back(def);
  std::sort(ranked.begin(), ranked.end(), by_prior);
  return ranked;
}

}  // namespace

PolicyState::PolicyState(uint32_t id, const CollectiveContext& ctx, int size_bin,
                         const HeadConfig& head, const ArmCatalog& catalog,
                         RegretBudget* group_budget, StepTrialBoard* trials,
                         ArmEvidenceBoard* evidence, RuleSet rules)
    : id_(id),
      rules_(rules),
      role_(ctx.role),
      op_(ctx.op),
      size_bin_(size_bin),
      exposure_(ctx.exposure),
      fused_(ctx.fused),
      head_(head),
      warmup_calls_(static_cast<uint64_t>(std::max(head.warmup_calls, 0))),
      probe_ppm_(to_ppm(head.probe_budget)),
      converged_ppm_(std::min(to_ppm(head.converged_budget), to_ppm(head.probe_budget))),
      need_(static_cast<uint32_t>(std::max(head.min_samples, 1))),
      budget_ppm_(probe_ppm_),
      group_(group_budget),
      trials_(trials),
      evidence_(evidence) {
  const std::vector<Arm>& arms = catalog.arms(op_);
  if (arms.empty() || arms.size() > static_cast<size_t>(std::numeric_limits<int16_t>::max())) {
    throw std::logic_error(std::string("arm catalog returned ") + std::to_string(arms.size()) +
                           " arms for op " + op_name(op_) + " (accepted: 1..32767)");
  }
  const std::vector<Ranked> ranked = rank_candidates(
      catalog, ctx, arms.size(), head.max_candidates,
      exposure_ == Exposure::kOverlapped && on(Rule::kFootprintDescent), on(Rule::kPriorCutoff));
  slot_of_arm_.assign(arms.size(), -1);
  slots_.reserve(ranked.size());
  for (const Ranked& r : ranked) {
    ArmSlot s;
    s.arm = r.arm;
    s.action = arms[r.arm].action;
    s.prior_us = r.prior;
    s.analytic_us = r.analytic;
    s.prior_sigma = r.sigma;
    s.footprint = r.footprint;
    has_caps_ = has_caps_ || r.footprint < 1.0;
    s.gated = r.arm != kDefaultArm;
    slot_of_arm_[r.arm] = static_cast<int16_t>(slots_.size());
    if (r.arm == kDefaultArm) default_slot_ = static_cast<int>(slots_.size());
    slots_.push_back(s);
  }
  incumbent_ = default_slot_;
  if (has_caps_) assumed_channels_ = catalog.default_channels(op_, ctx.effective_bytes);
  set_prior_ratios();
  cusum_.configure(head.cusum_threshold, head.cusum_drift);
  if (warmup_calls_ == 0) begin_probing();
}

// What the prior says of each arm relative to the default (1 where it says nothing).
void PolicyState::set_prior_ratios() {
  const double def_prior = slots_[default_slot_].prior_us;
  for (ArmSlot& a : slots_) {
    const double price = priced_us(a);
    const bool known = def_prior > 0 && std::isfinite(def_prior) && price > 0 &&
                       std::isfinite(price);
    const double ratio = known ? price / def_prior : 1.0;
    a.prior_extra_ratio = a.arm == kDefaultArm ? 0.0 : std::max(0.0, ratio - 1.0);
    a.worth_from_call = a.arm == kDefaultArm ? 0 : worth_from_call(ratio);
  }
}

int PolicyState::uncapped_twin(const ArmSlot& cap) const {
  for (int i = 0; i < num_slots(); ++i) {
    const Action& t = slots_[i].action;
    if (t.channels < 0 && t.algo == cap.action.algo && t.proto == cap.action.proto &&
        t.chunk_bytes == cap.action.chunk_bytes) {
      return i;
    }
  }
  return -1;
}

void PolicyState::exchange_evidence() {
  const ArmSlot& def = slots_[default_slot_];
  bool repriced = false;
  for (int i = 0; i < num_slots(); ++i) {
    ArmSlot& a = slots_[i];
    if (a.arm == kDefaultArm) continue;
    if (a.stats.count() > 0) {  // measured in this regime: its word on the others
      // Its cost over the default's, and a cap's over the arm it caps, each against the prior's.
      const auto factor = [&](const ArmSlot& ref) {
        const double f = ref.view.n > 0
                             ? (a.view.center / ref.view.center) / (a.prior_us / ref.prior_us)
                             : 1.0;
        return std::isfinite(f) ? f : 1.0;
      };
      const int t = a.footprint < 1.0 ? uncapped_twin(a) : -1;
      evidence_->post(id_, a.arm, op_, size_bin_, a.footprint, factor(def),
                      t >= 0 ? factor(slots_[t]) : 1.0);
      continue;
    }
    // No costs in this regime (a re-open dropped them). The word of an earlier one stands for an
    // arm that was far beyond the default then (kPriorCutoff): no change of regime makes it a
    // winner, and a re-open parks it without measuring it again, so withdrawn, the word would let
    // every state of the same calls pay that probe again (the emulated GPU proof's 25 MiB buckets:
    // ring/LL at 34x the default, once in each state). Any other word goes with its costs.
    if (!(a.prev_center > kPriorCutoff * def.prev_center)) {
      evidence_->post(id_, a.arm, op_, size_bin_, a.footprint, 1.0, 1.0);
    }
    if (a.issued > 0) continue;  // its first cost is coming
    const double same_arm = on(Rule::kSharedEvidence) ? evidence_->arm_factor(op_, size_bin_, a.arm)
                                                      : 1.0;
    const double caps = a.footprint < 1.0 && on(Rule::kCapPricing)
                            ? evidence_->cap_factor(op_, size_bin_, a.footprint)
                            : 1.0;
    // A dearer word wins over a cheaper one.
    const double f = same_arm > 1.0 ? std::max(same_arm, caps) : caps;
    if (f == a.evidence_factor) continue;
    if (a.evidence_factor == 1.0) {
      note(f < 1.0            ? "priced lower by a measured cap"
           : same_arm >= caps ? "priced by its measured costs"
                              : "priced by a measured cap",
           incumbent_, i);
    }
    a.evidence_factor = f;
    repriced = true;
  }
  if (!repriced) return;
  set_prior_ratios();
  // Gate (b) again for the arms still without a probe: a dearer price may defer them.
  for (ArmSlot& a : slots_) {
    if (on(Rule::kWorthProbing) && a.issued == 0 && a.stats.count() == 0 &&
        calls_ < a.worth_from_call)
      a.deferred = true;
  }
}

// Every live candidate has its need_ calls. Probe the one whose confidence interval will
// still be widest once its costs in flight arrive: variance / issued, compared by
// cross-multiplication (no division on the hot path). Candidates whose costs have not arrived yet
// (fewer than two samples) are waited for, not probed again.
int PolicyState::widest_target() const {
  const uint32_t cap = probe_cap();
  const auto variance = [this](int i) { return slots_[i].view.spread * slots_[i].view.spread; };
  int best = -1;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (i == incumbent_ || !a.probeable() || a.stats.count() < 2 || a.issued >= cap) continue;
    if (best < 0 || variance(i) * slots_[best].issued > variance(best) * a.issued) best = i;
  }
  return best;
}

void PolicyState::release_probe(uint16_t arm) {
  const int i = slot_of(arm);
  if (i < 0) return;
  ArmSlot& a = slots_[i];
  if (a.inflight_probes == 0) return;
  const double committed = a.inflight_extra_us / a.inflight_probes;
  a.inflight_extra_us -= committed;
  --a.inflight_probes;
  group_->inflight_us = std::max(0.0, group_->inflight_us - committed);
}

bool PolicyState::fold(uint16_t arm, float cost_us, bool probe, bool learning) {
  const int i = slot_of(arm);
  if (i < 0) return false;
  if (probe) release_probe(arm);  // its expected extra becomes the realized one below
  ArmSlot& a = slots_[i];
  if (a.unavailable) return false;  // whatever ran in its place says nothing about the arm
  // Extra over the default: the cost winsorized as the arm's centre sees it, against the default's
  // centre (a slow outlier, which hits whatever arm runs, is not charged to the arm).
  // A trial's challenger is charged by the step time it costs (add_trial_pair), not per call.
  // An arm adopted by a step trial shortens the step: its per-call excess is not a cost.
  if (i != default_slot_ && ref_us_ > 0 && i != trial_.challenger) {
    double extra = a.view.winsorized(cost_us) - ref_us_;
    if (a.step_adopted && on(Rule::kStepAdoptedFree)) extra = std::min(extra, 0.0);
    extra_us_ += extra;
    group_->spent_us += extra;  // savings (negative) count as credit
  }
  // The CUSUM residual is predictive: the cost against the incumbent's view as of the last round,
  // so a shift within this round's costs cannot pull its own reference along.
  const bool watch = learning && !frozen_ && phase_ == LearnPhase::kExploit && i == incumbent_ &&
                     a.view.n >= kCusumMinReference;
  a.add(cost_us);
  ++a.samples;
  ++a.fresh;
  if (!watch) return false;
  const Cusum::Alarm alarm = cusum_.add(cost_us, a.view.center,
                                        cusum_sigma(a.view, head_.switch_margin), 1.0);
  if (alarm == Cusum::Alarm::kNone) return false;
  ++alarms_;
  // The costs since the CUSUM sum last left zero, and the two its filter held back: the new
  // regime's costs of the incumbent, which judge a provisional switch after a rise.
  const int keep = static_cast<int>(
      std::min<uint32_t>(cusum_.run() + 2, static_cast<uint32_t>(SampleWindow::kCapacity)));
  reopen_focused(-1, keep, alarm == Cusum::Alarm::kUp);
  return true;
}

// The state's outlier rate, pooled over its arms (slow calls hit whatever arm runs), and what it
// implies: the costs an early elimination rests on, so that all of them being outliers is less
// likely than kHopelessFalseRate (one cost while no outlier has been seen, three at 10%).
void PolicyState::update_tail() {
  uint64_t outliers = 0, n_all = 0;
  for (const ArmSlot& a : slots_) {
    if (a.unavailable) continue;
    outliers += a.outliers;
    n_all += a.view.n;
  }
  const double q = n_all > 0 ? static_cast<double>(outliers) / static_cast<double>(n_all) : 0.0;
  tail_ = q;
  hopeless_need_ = 1;
  for (double p = q; p > kHopelessFalseRate && hopeless_need_ < need_; p *= q) {
    ++hopeless_need_;
  }
}

// Early elimination, from a challenger's cheapest cost so far (a pessimistic view of it: its
// centre can only be higher). It must lie above every recent regular (non-outlier) cost of the
// incumbent, and rest on enough costs that all of them being outliers is unlikely (update_tail):
// the tail of the noise, which hits every arm, must not eliminate a good arm, and must not keep a
// bad one alive either (the incumbent's own outliers are left out of the bound for that). Then the
// challenger is hopeless when that cost exceeds kHopelessRatio x the incumbent's centre, or when,
// with the state's own noise level (the incumbent's relative robust spread) as its uncertainty, it
// is confidently above the incumbent's upper bound: successive elimination without waiting for
// min_samples costs.
bool PolicyState::hopeless(const ArmSlot& c, const ArmSlot& inc) const {
  // Costs seen, not counts restored from a snapshot: `lowest` knows only the former.
  if (!on(Rule::kHopeless) || static_cast<uint32_t>(c.window.size()) < hopeless_need_ ||
      inc.view.n < kMinRobustWindow) {
    return false;
  }
  const double center = inc.view.center;
  if (!(center > 0) || c.lowest <= inc.view.highest_regular) return false;
  if (c.lowest > kHopelessRatio * center) return true;
  const double rel = inc.view.robust_sigma / center;
  return c.lowest * (1.0 - kConfidenceZ * rel) > center + inc.view.half_width;
}

// Comparisons use the winsorized centre of the current regime with a normal confidence interval:
// it tracks what a call costs on average, without letting a few outliers (a preempted rank, which
// hits any arm) decide between arms. The raw mean and the median serve reporting.
//
// Reward view: reward = -cost. The two penalties, for switching and for probing
// (docs/architecture.md, "A state's life cycle"), enter as constraints rather than as terms
// added to the cost:
//   - switching: a challenger takes over only if its expected reward beats the incumbent's by
//     switch_margin * incumbent cost, confidently (its upper bound below the incumbent's lower
//     bound). The margin is the price a switch has to pay back (hysteresis);
//   - probing: probe calls are capped by the head's budget (a credit counter), an arm that cannot
//     win (hopeless after as little as one cost, or confidently worse) is not probed again, and an
//     undecided near-tie stops being probed after kProbeCapFactor * min_samples calls, because
//     the reward it could still win is below the margin while each probe may cost.
void PolicyState::refresh_views() {
  for (ArmSlot& a : slots_) {
    if (a.dirty) a.refresh();
  }
}

void PolicyState::evaluate(const MeasureCost& measure) {
  refresh_views();  // also in warm-up and frozen: the views are what stats() reports
  exchange_evidence();
  update_measure_rates(measure);
  update_budget_view();
  if (frozen_ || phase_ == LearnPhase::kWarmup) return;
  evaluate_trial();
  update_tail();
  const double keep = 1.0 - head_.switch_margin;  // a challenger wins below keep x the incumbent
  if (phase_ == LearnPhase::kProbing) {
    evaluate_probing(keep);
  } else {
    evaluate_exploit(keep);
  }
  retry_stopped_trial();
  // Once converged, the descent also runs while arms woken later are probed per call: it need
  // not wait for all of them (40 steps of the DDP interference scenario's 400 did).
  if (converged_at_call_ > 0 && judged_by_step() && on(Rule::kFootprintDescent)) {
    propose_footprint_trial();
  }
  runner_up_ = phase_ == LearnPhase::kExploit ? pick_runner_up() : -1;
}

// What measuring costs, from the last round: the fraction of calls whose measuring costs
// `overhead` of the state's time (a round each while sparse; all of them once a round per K
// calls fits), before and after settling, and a probe's share of a round.
void PolicyState::update_measure_rates(const MeasureCost& measure) {
  const double center = slots_[incumbent_].view.center;
  auto fraction = [&](double overhead) -> uint32_t {
    if (!(measure.round_us > 0) || !(center > 0)) return kPpmOne;
    const double f = overhead * center / measure.round_us;
    return f * measure.round_calls >= 1.0 ? kPpmOne : to_ppm(std::max(f, kMinWatchFraction));
  };
  watch_ppm_ = fraction(kWatchOverhead);
  learning_ppm_ = fraction(kLearningOverhead);
  measure_ = measure;
}

// A probing round: switch to a confidently cheaper challenger, eliminate and resolve the others,
// and converge once all are resolved.
void PolicyState::evaluate_probing(double keep) {
  const bool inc_ready = slots_[incumbent_].stats.count() >= need_;
  if (inc_ready) switch_to_cheapest(keep);
  const bool all_resolved = resolve_challengers(inc_ready, keep);
  if (all_resolved && inc_ready) {
    converge();
  }
}

// The cheapest challenger that confidently beats the incumbent by the margin (its upper bound
// below the incumbent's lower bound) takes over, if there is one.
void PolicyState::switch_to_cheapest(double keep) {
  const ArmSlot& inc = slots_[incumbent_];
  const double inc_lcb = inc.view.center - inc.view.half_width;
  int best = -1;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& c = slots_[i];
    if (i == incumbent_ || c.unavailable || c.step_rejected || c.stats.count() < need_) {
      continue;
    }
    const double m = c.view.center;
    if (m < inc.view.center * keep_for(i, keep) && m + c.view.half_width < inc_lcb &&
        (best < 0 || m < slots_[best].view.center)) {
      best = i;
    }
  }
  const bool by_step = judged_by_step() && on(Rule::kStepTrials);
  if (best < 0) return;
  if (by_step) {
    // Faster on its own is not enough when compute runs beside the call: the step decides.
    if (trial_.challenger < 0 && free_lane() >= 0 && may_open_trial(best, TrialKind::kFaster)) {
      open_trial(best, TrialKind::kFaster);
    }
    return;
  }
  adopt_per_call(best);
}

void PolicyState::adopt_per_call(int challenger) {
  incumbent_ = challenger;
  slots_[challenger].eliminated = false;
}

// Where the step judges, per-call confidence is not the verdict, only the reason to ask the step.
// Eliminates the challengers that are hopeless or confidently worse, and marks which are
// resolved; true when all are.
bool PolicyState::resolve_challengers(bool inc_ready, double keep) {
  const ArmSlot& inc = slots_[incumbent_];
  const double inc_center = inc.view.center;
  const double inc_ucb = inc_center + inc.view.half_width;
  const uint32_t cap = probe_cap();
  bool all_resolved = true;
  for (int i = 0; i < num_slots(); ++i) {
    ArmSlot& c = slots_[i];
    c.resolved = false;
    if (i == incumbent_ || c.unavailable) continue;
    if (hopeless(c, inc)) c.eliminated = true;
    const bool ready = inc_ready && c.stats.count() >= need_;
    const double c_lcb = c.view.center - c.view.half_width;
    if (ready && c_lcb > inc_ucb) c.eliminated = true;
    // A gated probe whose cost never comes (an engine that could not time it) is not waited
    // for forever.
    if (awaiting(c) && ++c.waited > kMaxWaitRounds) c.gated = false;
    // Resolved: confidently worse, or confidently unable to beat the incumbent by the margin,
    // or probed up to the cap without a verdict, or parked by a focused re-open, or not worth a
    // first probe yet (deferred: woken once the state has lived long enough).
    const double c_lower = c.view.center - c.view.half_width * (kResolveZ / kConfidenceZ);
    c.resolved = c.eliminated || c.parked || c.deferred || c.issued >= cap ||
                 (ready && c_lower >= inc_center * keep_for(i, keep)) || cannot_win_by_prior(c);
    all_resolved = all_resolved && c.resolved;
  }
  return all_resolved;
}

// A prior that states its confidence (a learned one) stands in for repeat probes: the arm's log
// cost ratio to the incumbent is estimated from the prior (its ratio to the default's, the two
// sigmas combined) and, once the incumbent has its costs, from the arm's costs so far (the
// incumbent's relative spread per cost until the arm has two of its own), each weighted by its
// precision. The arm cannot win once even the optimistic end of that estimate (kResolveZ) does
// not beat the incumbent by the margin: a twin of the default that the model has seen tie in
// every past job needs no probe, or a few instead of kProbeCapFactor x min_samples. This only
// stops probing: eliminations and switches rest on costs alone, so a wrong prior can miss a gain,
// never put a slower arm in place.
bool PolicyState::cannot_win_by_prior(const ArmSlot& c) const {
  if (!on(Rule::kPriorResolves)) return false;
  const ArmSlot& inc = slots_[incumbent_];
  const double prior_var = c.prior_sigma * c.prior_sigma + inc.prior_sigma * inc.prior_sigma;
  const double prior_ratio = priced_us(c) / inc.prior_us;
  // Priced by measured costs (arm_evidence.h) at kHopelessRatio x the incumbent or more:
  // resolved, as one cost that far above would eliminate it.
  if (c.evidence_factor > 1.0 && prior_ratio >= kHopelessRatio) return true;
  if (!(prior_var > 0) || !std::isfinite(prior_var) || !(prior_ratio > 0) ||
      !std::isfinite(prior_ratio)) {
    return false;
  }
  double precision = 1.0 / prior_var;
  double weighted = std::log(prior_ratio) * precision;
  if (inc.stats.count() >= need_ && c.view.n > 0 && c.view.center > 0 && inc.view.center > 0) {
    const double rel_inc = inc.view.spread / inc.view.center;
    const double rel_c = c.view.n >= 2 ? c.view.spread / c.view.center : rel_inc;
    const double var = rel_c * rel_c / static_cast<double>(c.view.n) +
                       rel_inc * rel_inc / static_cast<double>(inc.view.n);
    precision += 1.0 / var;
    weighted += std::log(c.view.center / inc.view.center) / var;
  }
  return weighted / precision - kResolveZ / std::sqrt(precision) >=
         std::log(1.0 - head_.switch_margin);
}

// An exploiting round: re-check the runner-up and the default, wake deferred arms, and settle
// once the state has been quiet for settle_calls.
void PolicyState::evaluate_exploit(double keep) {
  recheck_runner_up(keep);
  if (phase_ == LearnPhase::kExploit) rollback_if_default_cheaper();
  if (phase_ == LearnPhase::kExploit) wake_deferred();
  if (phase_ == LearnPhase::kExploit && !settled_ &&
      calls_ >= quiet_since_ + static_cast<uint64_t>(head_.settle_calls)) {
    settle();
  }
}

// Runner-up re-check: its recent costs (received since convergence) against the incumbent.
// Only a confident gain beyond the margin re-opens probing, so a near-equal runner-up does not
// make the state flap.
void PolicyState::recheck_runner_up(double keep) {
  if (runner_up_ < 0) return;
  ArmSlot& r = slots_[runner_up_];
  const ArmSlot& inc = slots_[incumbent_];
  // Re-probe afresh: the runner-up's costs since convergence may straddle the change.
  if (fresh_enough(r, inc) &&
      fresh_median_ucb(r, inc) < inc.view.center * keep_for(runner_up_, keep)) {
    reopen_focused(runner_up_, 0, false);
  }
}

// `a` has costs enough since convergence (need_, at most a window) to be re-checked against
// the incumbent, which has need_ of its own.
bool PolicyState::fresh_enough(const ArmSlot& a, const ArmSlot& inc) const {
  const uint32_t need = std::min<uint32_t>(need_, static_cast<uint32_t>(SampleWindow::kCapacity));
  return a.fresh >= need && inc.stats.count() >= need_;
}

// Upper confidence bound of the median of `a`'s costs since convergence (at most a window), with
// a spread no smaller than the incumbent's robust one.
double PolicyState::fresh_median_ucb(const ArmSlot& a, const ArmSlot& inc) const {
  const int k = static_cast<int>(std::min<uint32_t>(a.fresh, SampleWindow::kCapacity));
  const RobustSummary rs = a.window.summary_recent(k);
  const double sd = std::max(kMadToSigma * rs.mad, inc.view.robust_sigma);
  return rs.median + kConfidenceZ * kMedianSeRatio * sd / std::sqrt(k);
}

void PolicyState::converge() {
  note("converged", focus_from_ >= 0 ? focus_from_ : incumbent_, incumbent_);
  phase_ = LearnPhase::kExploit;
  converged_at_call_ = calls_;
  if (!probes_to_converge_) probes_to_converge_ = probes_;
  quiet_since_ = calls_;
  for (ArmSlot& a : slots_) a.fresh = 0;
  cusum_.reset();
  focus_from_ = -1;
}

void PolicyState::update_budget_view() {
  const ArmSlot& def = slots_[default_slot_];
  if (def.view.n > 0) ref_us_ = def.view.center;  // else the last known one
  for (ArmSlot& a : slots_) {
    const double expected = a.view.n > 0 ? a.view.center : (1.0 + a.prior_extra_ratio) * ref_us_;
    a.expected_extra_us = a.arm == kDefaultArm ? 0.0 : std::max(0.0, expected - ref_us_);
  }
}

// The incumbent is not the default, and the default's costs since convergence (watch windows
// measure it again) say it is now confidently cheaper: back to the default (no margin: see
// keep_for()).
void PolicyState::rollback_if_default_cheaper() {
  // Per call the default may be cheaper: a step trial weighed that already (watch()).
  if (incumbent_ == default_slot_ || slots_[incumbent_].step_adopted) return;
  const ArmSlot& def = slots_[default_slot_];
  const ArmSlot& inc = slots_[incumbent_];
  if (!fresh_enough(def, inc)) return;
  const double ucb = fresh_median_ucb(def, inc);
  if (!(ucb < inc.view.center)) {
    // The incumbent holds: check less often (a fresh set of the default's costs next time).
    slots_[default_slot_].fresh = 0;
    check_ppm_ = std::max(to_ppm(kMinWatchFraction), check_ppm_ / 2);
    return;
  }
  note("rollback: the default is now cheaper", incumbent_, default_slot_);
  incumbent_ = default_slot_;
  cusum_.reset();
  for (ArmSlot& a : slots_) a.fresh = 0;
  unsettle();
}

// An arm left out because a first probe was not worth it (gate (b)) becomes worth it once the
// state has seen enough calls: probing re-opens for it, within the budget. Not one that a
// confident prior says cannot win.
void PolicyState::wake_deferred() {
  bool woke = false;
  for (ArmSlot& a : slots_) {
    if (!a.deferred || a.unavailable || calls_ < a.worth_from_call || cannot_win_by_prior(a)) {
      continue;
    }
    a.deferred = false;
    a.resolved = false;
    woke = true;
  }
  if (!woke) return;
  note("probing arms now worth a first probe", incumbent_, incumbent_);
  phase_ = LearnPhase::kProbing;
  budget_ppm_ = probe_ppm_;
  rr_cursor_ = 0;
  unsettle();
}

void PolicyState::settle() {
  settled_ = true;
  watch_credit_.clear();
  check_ppm_ = converged_ppm_;
  note("settled", incumbent_, incumbent_);
}

void PolicyState::unsettle() {
  settled_ = false;
  quiet_since_ = calls_;
}

void PolicyState::note(const char* what, int from_slot, int to_slot) {
  if (events_.size() == kMaxEvents) events_.erase(events_.begin());
  events_.push_back(
      StateEvent{calls_, trials_->step, what, slots_[from_slot].arm, slots_[to_slot].arm, {}});
}

// The best available non-incumbent arm by centre (eliminated ones included: the re-check is how an
// arm that became cheaper gets a second chance); before any costs, the next one by prior.
int PolicyState::pick_runner_up() const {
  int best = -1;
  int first = -1;
  // An arm a step trial rejected is not re-checked per call: it was weighed.
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (i == incumbent_ || a.unavailable || a.parked || a.step_rejected) {
      continue;
    }
    if (a.stats.count() == 0) {
      // Not one that cannot win by its price (the prior's, or measured costs' through
      // arm_evidence.h): re-checked, it would pay the first probe probing declined.
      if (first < 0 && !cannot_win_by_prior(a)) first = i;
      continue;
    }
    if (first < 0) first = i;
    if (best < 0 || a.view.center < slots_[best].view.center) best = i;
  }
  return best >= 0 ? best : first;
}

// Lowest centre among available arms with enough costs; the default when none has them.
int PolicyState::best_known() const {
  // An arm beats the engine default only on evidence from the same regime: when the default has
  // no costs since the last re-open, it is the safe answer.
  const ArmSlot& def = slots_[default_slot_];
  if (def.stats.count() < need_) return default_slot_;
  int best = default_slot_;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (a.unavailable || a.stats.count() < need_) continue;
    if (a.view.center < slots_[best].view.center) best = i;
  }
  return best;
}

void PolicyState::drop_arm(uint16_t arm) { drop_slot(slot_of(arm), "unavailable on some rank"); }

void PolicyState::note_default_channels(int channels) {
  if (channels <= reported_channels_) return;
  reported_channels_ = channels;
  if (!on(Rule::kMinCapShare)) return;
  bool dropped = false;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (a.unavailable || a.action.channels <= 0 || a.action.channels >= kMinCapShare * channels)
      continue;
    drop_slot(i, "holds under a quarter of NCCL's channels");
    dropped = true;
  }
  if (dropped) note("caps under a quarter of NCCL's channels dropped", incumbent_, incumbent_);
}

void PolicyState::drop_slot(int i, const char* why) {
  // The engine default is "let the engine choose": it cannot be unavailable.
  if (i < 0 || i == default_slot_) return;
  ArmSlot& a = slots_[i];
  a.unavailable = true;
  a.resolved = false;
  a.parked = false;
  if (runner_up_ == i) runner_up_ = -1;
  if (focus_from_ == i) focus_from_ = -1;
  if (trial_.challenger == i)
    end_trial((std::string("rejected: ") + why).c_str(), TrialEnd::kRejected);
  release_all(a);
  if (incumbent_ != i) return;
  // The best arm known in the current regime takes over (the default when none is known: a
  // focused re-open may have left it unmeasured).
  const int best = best_known();
  note((std::string("incumbent ") + why).c_str(), i, best);
  incumbent_ = best;
  slots_[incumbent_].eliminated = false;
  cusum_.reset();
  // A converged state lost its choice: probe again, keeping the statistics, so an arm already
  // known to be confidently cheaper takes over at the next round.
  if (!frozen_ && phase_ == LearnPhase::kExploit) {
    phase_ = LearnPhase::kProbing;
    budget_ppm_ = probe_ppm_;
    rr_cursor_ = 0;
    unsettle();
  }
}

void PolicyState::release_all(ArmSlot& a) {
  group_->inflight_us = std::max(0.0, group_->inflight_us - a.inflight_extra_us);
  a.inflight_extra_us = 0;
  a.inflight_probes = 0;
}

void PolicyState::freeze() {
  refresh_views();
  if (trial_.challenger >= 0) end_trial("stopped: frozen by a guard", TrialEnd::kRejected);
  frozen_ = true;
  // A guard fires when the job's own step time or loss says learning hurts: keep an arm other
  // than the default only if it beats the default by the margin a switch needs. In a state
  // judged by step time, per call is not enough: only an arm a step trial adopted.
  int best = default_slot_;
  if (judged_by_step()) {
    if (slots_[incumbent_].step_adopted) best = incumbent_;
  } else {
    const int known = best_known();
    const double bar = slots_[default_slot_].view.center * (1.0 - head_.switch_margin);
    if (slots_[known].view.center < bar) best = known;
  }
  note("frozen by a guard", incumbent_, best);
  incumbent_ = best;
  runner_up_ = -1;
  focus_from_ = -1;
  cusum_.reset();
}

void PolicyState::restore(const StateSnapshot& snap, const std::vector<Arm>& arms) {
  for (ArmSlot& a : slots_) {
    const ArmSnapshot* found = nullptr;
    for (const ArmSnapshot& s : snap.arms) {
      if (s.name == arms[a.arm].name) {
        found = &s;
        break;
      }
    }
    a.clear_regime();
    a.parked = false;
    a.gated = a.arm != kDefaultArm;
    if (found != nullptr) {
      // No costs in the window: the restored mean stands for the centre until new costs arrive.
      a.stats.assign(found->samples, found->mean_us, found->m2);
      a.trimmed.assign(found->samples, found->mean_us, found->m2);
      a.eliminated = found->eliminated;
      a.step_adopted = found->step_adopted;
      a.step_rejected = found->step_rejected;
    }
    a.issued = static_cast<uint32_t>(std::min<uint64_t>(a.stats.count(), UINT32_MAX));
    a.refresh();
  }
  incumbent_ = default_slot_;
  for (int i = 0; i < num_slots(); ++i) {
    if (!slots_[i].unavailable && arms[slots_[i].arm].name == snap.incumbent) incumbent_ = i;
  }
  slots_[incumbent_].eliminated = false;
  // A warm start exploits at once: no warm-up, the converged budget, CUSUM against the restored
  // incumbent cost (a changed cluster then shows up as an alarm and re-opens probing).
  phase_ = LearnPhase::kExploit;
  converged_at_call_ = calls_;
  probes_to_converge_ = 0;
  unsettle();
  budget_ppm_ = converged_ppm_;
  rr_cursor_ = 0;
  focus_from_ = -1;
  cusum_.reset();
  runner_up_ = frozen_ ? -1 : pick_runner_up();  // frozen: the restored incumbent, nothing else
}

// Unavailable and parked arms are reported as eliminated: they are out of the competition (for
// good, or until the state re-opens).
StateStats PolicyState::stats(const std::vector<Arm>& arms) const {
  StateStats st;
  st.state_id = id_;
  st.role = role_;
  st.op = op_;
  st.size_bin = size_bin_;
  st.exposure = exposure_;
  st.fused = fused_;
  st.incumbent = slots_[incumbent_].arm;
  st.phase = frozen_                          ? "frozen"
             : phase_ == LearnPhase::kWarmup  ? "warmup"
             : phase_ == LearnPhase::kProbing ? "probing"
             : settled_                       ? "settled"
                                              : "exploit";
  st.calls = calls_;
  st.measured_calls = measured_calls_;
  st.extra_us = extra_us_;
  st.reference_us = ref_us_;
  st.budget_us = head_.regret_budget * ref_us_ * static_cast<double>(calls_);  // its share
  st.assumed_channels = assumed_channels_;
  st.nccl_channels = reported_channels_;
  st.events = events_;
  st.probes = probes_;
  st.probes_to_converge = probes_to_converge_.value_or(probes_);
  st.alarms = alarms_;
  st.frozen = frozen_;
  st.converged_at_call = converged_at_call_;
  for (size_t arm = 0; arm < slot_of_arm_.size(); ++arm) {  // arm index order
    if (slot_of_arm_[arm] < 0) continue;
    const ArmSlot& a = slots_[slot_of_arm_[arm]];
    ArmStats as;
    as.arm = static_cast<uint16_t>(arm);
    as.name = arms[arm].name;
    as.calls = a.calls;
    as.samples = a.samples;
    as.regime_samples = a.stats.count();
    as.mean_us = a.stats.mean();
    as.median_us = a.window.median_recent(a.window.size());
    as.center_us = a.view.center;
    as.prior_us = a.prior_us;
    as.prior_sigma = a.prior_sigma;
    as.eliminated = a.eliminated || a.unavailable || a.parked;
    st.arms.push_back(std::move(as));
  }
  if (*trial_.verdict) {
    static_cast<TrialEvidence&>(st.trial) = trial_.evidence();
    st.trial.challenger = arms[trial_.arm].name;
    st.trial.verdict = trial_.verdict;
  }
  return st;
}

StateSnapshot PolicyState::snapshot(const std::vector<Arm>& arms) const {
  StateSnapshot snap;
  snap.role = role_;
  snap.op = op_;
  snap.size_bin = size_bin_;
  snap.exposure = exposure_;
  snap.fused = fused_;
  snap.incumbent = arms[slots_[incumbent_].arm].name;
  snap.converged = frozen_ || phase_ == LearnPhase::kExploit;
  for (size_t arm = 0; arm < slot_of_arm_.size(); ++arm) {
    if (slot_of_arm_[arm] < 0) continue;
    const ArmSlot& a = slots_[slot_of_arm_[arm]];
    ArmSnapshot as;
    as.name = arms[arm].name;
    as.samples = a.stats.count();
    as.mean_us = a.stats.mean();
    as.m2 = a.stats.m2();
    as.analytic_us = std::isfinite(a.analytic_us) && a.analytic_us > 0 ? a.analytic_us : 0;
    as.eliminated = a.eliminated || a.unavailable || a.parked;
    as.step_adopted = a.step_adopted;
    as.step_rejected = a.step_rejected;
    snap.arms.push_back(std::move(as));
  }
  return snap;
}

}  // namespace dynamiccl
