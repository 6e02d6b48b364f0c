// A state's candidates and their prices (docs/learner.md, "The rules": prior_cutoff,
// worth_probing, shared_evidence, cap_pricing, min_cap_share): which arms a state may probe, in
// which order, what the prior says each costs against the default, and how the group's measured
// costs correct those prices every round.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "policy/policy_state.h"

namespace dynamiccl {

namespace {

// The prior's ratio of an arm's cost to the default's is treated as the median of a log-normal
// with spread kPriorSigma: an arm priced at 4x the default has ~8% chance of being cheaper.
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
         (keep < static_cast<size_t>(kChallengers) ||
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

// A cap holding less than kMinCapShare of the channels NCCL reports running the state's default on
// is dropped. The catalog derives its caps (a half and a quarter) from the channel count its
// topology gives; when NCCL runs on many more (a described topology: 4 assumed, 32 real), those
// caps hold a sliver of the machine: per call up to 1/share slower, priced by the prior as if
// they held a half, and a first probe cannot be undone (simulator, LLM step: `ring/Simple/c2` of
// 32 channels at 15.5x, 0.44% of the run).
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

}  // namespace dynamiccl
