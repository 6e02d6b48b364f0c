// The learner's named rules: the special cases layered on its general mechanism (warm-up on the
// default, budgeted probing, confident switches with a margin, CUSUM re-opens, settling, step
// trials judged by paired step times). Each can be switched off by name, so that what it buys can
// be measured (the simulator's `--ablate`, benchmarks/sim/ablation.md); switched off, its code
// path falls back to the general mechanism it special-cases.
//
// A test and benchmark setting only: LearnerConfig::rules is all on by default; a job switches
// rules off only through DYNAMICCL_TEST_ABLATE (documented as tests and benchmarks only, checked
// alike on every rank), never through a policy file or an Options field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dynamiccl {

// X(enumerator, "name", "what it does, and what switching it off falls back to")
#define DYNAMICCL_LEARNER_RULES(X)                                                                \
  X(kPriorCutoff, "prior_cutoff",                                                                 \
    "Arms priced beyond 8x the best prior are not candidates (the 2 best always are); off: the "  \
    "max_candidates best by prior")                                                               \
  X(kFirstProbes, "first_probes",                                                                 \
    "First probes go one at a time per arm and in the prior's order: a challenger gets a single " \
    "probe until its first cost is back (waited for at most 2 rounds), and only arms at the "     \
    "best price of those never probed may take one; off: round robin over every arm short of "    \
    "its costs, at the budget's pace from the start")                                             \
  X(kWorthProbing, "worth_probing",                                                               \
    "Do-no-harm gate (b): an arm never measured waits until the state has seen the calls that "   \
    "make a first probe worth it (log-normal prior ratio); off: every arm is probed at once")     \
  X(kRepays, "repays",                                                                            \
    "A probe of an arm confidently cheaper than the default may run on a spent do-no-harm "       \
    "budget; off: every probe waits for the budget")                                              \
  X(kHopeless, "hopeless",                                                                        \
    "Early elimination: a challenger whose cheapest cost is beyond every regular cost of the "    \
    "incumbent and 1.5x its centre (or confidently beyond its bound) is eliminated after as few " \
    "as one cost; off: eliminated only once confidently worse on min_samples costs")              \
  X(kPriorResolves, "prior_resolves",                                                             \
    "A prior that states its confidence, or measured costs beyond 1.5x, resolve an arm that "     \
    "cannot win by the margin without more probes; off: resolved by costs alone")                 \
  X(kFocusedReopen, "focused_reopen",                                                             \
    "A re-open re-probes only the 3 best arms by their last centre and parks the others; off: "   \
    "every arm is re-probed")                                                                     \
  X(kProvisionalSwitch, "provisional_switch",                                                     \
    "After an alarm on a rise beyond 20% the best re-probed arm takes over at once if it was "    \
    "cheaper than the incumbent is now; off: the incumbent stays until beaten confidently")       \
  X(kSharedEvidence, "shared_evidence",                                                           \
    "An arm measured beyond 1.5x its price by one state is priced so for the group's other "      \
    "states of the same calls; off: each state trusts the prior until its own first cost")        \
  X(kCapPricing, "cap_pricing",                                                                   \
    "Channel caps are priced by a measured cap against the arm it caps (cheaper or dearer, the "  \
    "next size bin too); off: caps keep the prior's price")                                       \
  X(kMinCapShare, "min_cap_share",                                                                \
    "Caps holding under a quarter of the channels NCCL reports running the default on are "       \
    "dropped; off: they stay candidates")                                                         \
  X(kStepTrials, "step_trials",                                                                   \
    "A state judged by step time adopts a challenger faster per call only after a step trial "    \
    "(paired step times); off: it switches per call like an exposed state")                       \
  X(kTrialPaysBack, "trial_pays_back",                                                            \
    "A step trial of an arm faster per call holding no more may run on a spent do-no-harm "       \
    "budget (not where rounds are the steps); off: it waits for the budget like the other "       \
    "trials")                                                                                     \
  X(kTrialResume, "trial_resume",                                                                 \
    "A step trial stopped without a verdict and opened again for the same arms resumes its "      \
    "pairs; off: it starts afresh")                                                               \
  X(kFootprintDescent, "footprint_descent",                                                       \
    "An overlapped state keeps the best arm of each smaller footprint as a candidate and trials " \
    "rungs holding less than the incumbent's footprint (per call at most 1.5x), adopted "         \
    "if they shorten the step at all; the next rung awaiting its first cost is the state's next " \
    "probe; a rung shorter only on average is passed and the descent goes on below it (the last " \
    "such runs on once to 2x the pairs); off: no footprint rungs")                                \
  X(kTwoLanes, "two_lanes",                                                                       \
    "Two step trials run at once on orthogonal step patterns (lags 1 and 2); off: one at a time") \
  X(kProbeStepKinds, "probe_step_kinds",                                                          \
    "Probes taken during other states' trials go to the trials' kinds of step in turn; off: "     \
    "probes run whenever their credit allows")                                                    \
  X(kProbedPairs, "probed_pairs",                                                                 \
    "Steps in which other states probed: what an exposed probe's call added is taken off the "    \
    "step's time, and a trial pair with such a step counts when its steps are within 10% of "     \
    "each other, or (from 3 pairs) within 3 standard deviations of the pairs' mean; off: probed " \
    "pairs are left out")                                                                         \
  X(kPairClip, "pair_clip",                                                                       \
    "A trial pair's longer step is held within the shorter step, or 6 spreads of successive "     \
    "steps' differences; off: pairs as measured")                                                 \
  X(kFutility, "futility",                                                                        \
    "From a third of max_trial_pairs a trial whose pairs' mean does not show the step shorter "   \
    "by the margin ends without effect; off: it runs to max_trial_pairs")                         \
  X(kStepAdoptedFree, "step_adopted_free",                                                        \
    "An arm a step trial adopted is charged nothing per call above the default (the step "        \
    "weighed it); off: its per-call excess counts against the budget")

enum class Rule : uint8_t {
#define DYNAMICCL_RULE_ENUM(id, name, doc) id,
  DYNAMICCL_LEARNER_RULES(DYNAMICCL_RULE_ENUM)
#undef DYNAMICCL_RULE_ENUM
      kCount
};
constexpr int kNumRules = static_cast<int>(Rule::kCount);
static_assert(kNumRules <= 64, "RuleSet is one 64-bit mask");

struct RuleInfo {
  Rule rule;
  const char* name;
  const char* description;
};
// Every rule, in declaration order.
const std::vector<RuleInfo>& rule_infos();
const char* rule_name(Rule r);
// The rule named `name`; throws std::invalid_argument naming it and listing the accepted names.
Rule rule_by_name(const std::string& name);
// "a, b, c": every rule's name.
std::string rule_names_joined();

// Which rules are on (all by default).
class RuleSet {
 public:
  bool on(Rule r) const { return (off_ & bit(r)) == 0; }
  void set(Rule r, bool enabled) { off_ = enabled ? (off_ & ~bit(r)) : (off_ | bit(r)); }
  // The set with the named rules off; throws std::invalid_argument on an unknown name.
  static RuleSet without(const std::vector<std::string>& names);
  bool all_on() const { return off_ == 0; }
  uint64_t off_mask() const { return off_; }

 private:
  static uint64_t bit(Rule r) { return uint64_t{1} << static_cast<int>(r); }
  uint64_t off_ = 0;
};

}  // namespace dynamiccl
