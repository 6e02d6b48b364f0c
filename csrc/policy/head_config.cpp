// Per-role head budgets, and the table of head settings.
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>

#include "policy/learner.h"

namespace dynamiccl {

namespace {
constexpr double kBig = std::numeric_limits<int>::max();
}  // namespace

const std::vector<HeadSetting>& head_settings() {
  using H = HeadConfig;
  static const std::vector<HeadSetting> all = {
      {"probe_budget", &H::probe_budget, nullptr, 0, 1, false,
       "max fraction of a state's calls spent probing while exploring"},
      {"converged_budget", &H::converged_budget, nullptr, 0, 1, false,
       "probing fraction once converged (<= probe_budget)"},
      {"warmup_calls", nullptr, &H::warmup_calls, 0, kBig, false,
       "calls on the engine default before probing"},
      {"min_samples", nullptr, &H::min_samples, 2, 1000000, false,
       "costs an arm needs before it is compared"},
      {"switch_margin", &H::switch_margin, nullptr, 0, 0.99, false,
       "relative gain a challenger must show to take over"},
      {"max_candidates", nullptr, &H::max_candidates, 1, kBig, false,
       "arms considered per state (the default included)"},
      {"cusum_threshold", &H::cusum_threshold, nullptr, 0, 1e6, true,
       "CUSUM alarm level, in spreads of the incumbent's cost"},
      {"cusum_drift", &H::cusum_drift, nullptr, 0, 1e6, false, "CUSUM slack, same unit"},
      {"regret_budget", &H::regret_budget, nullptr, 0, 1, true,
       "what learning may cost over the default, as a fraction of its time"},
      {"settle_calls", nullptr, &H::settle_calls, 1, kBig, false,
       "calls without an event after which a converged state settles"},
      {"trial_pairs", nullptr, &H::trial_pairs, 2, kBig, false,
       "overlapped states: step pairs before a step trial decides (from 4, on clearer evidence)"},
      {"max_trial_pairs", nullptr, &H::max_trial_pairs, 2, kBig, false,
       "overlapped states: step pairs after which an undecided trial keeps the incumbent"},
  };
  return all;
}

std::string HeadSetting::range() const {
  std::ostringstream os;
  const char* what = integer ? "an integer" : "a number";
  os << what << " in " << (min_open ? "(" : "[") << min << ", ";
  if (max >= kBig) {
    os << "inf)";
  } else {
    os << max << "]";
  }
  return os.str();
}

void set_head_setting(HeadConfig& head, const std::string& key, double value) {
  for (const HeadSetting& s : head_settings()) {
    if (key != s.name) continue;
    const bool whole = !s.integer || value == std::floor(value);
    if (!std::isfinite(value) || !whole || !s.accepts(value)) {
      std::ostringstream os;
      os << "head setting " << key << "=" << value << " is not accepted (accepted: " << s.range()
         << ")";
      throw std::invalid_argument(os.str());
    }
    if (s.real) {
      head.*s.real = value;
    } else {
      head.*s.integer = static_cast<int>(value);
    }
    return;
  }
  std::string names;
  for (const HeadSetting& s : head_settings())
    names += std::string(names.empty() ? "" : ", ") + s.name;
  throw std::invalid_argument("unknown head setting '" + key + "' (accepted: " + names + ")");
}

// Why these budgets (docs/learner.md, "States and heads"):
// - A state spends about (candidates - 1) x min_samples probes whatever its budget (fewer when
//   the hopeless rule and the confidence intervals drop arms early); the budget only sets how
//   fast they are spent. A higher budget costs no more probes in all and reaches the best arm
//   sooner; what it limits is how much one stretch of calls may slow down.
// - Bulk roles (default, dp, fsdp_rs) move large gradient buffers whose collectives mostly
//   overlap with backward compute and repeat every step: they probe up to every other call while
//   exploring, over 8 candidates (the prior cut-off already drops arms priced far beyond the
//   best), and switch for a 3% gain.
// - Latency-critical roles sit on the critical path: a tensor-parallel activation all-reduce or a
//   pipeline send stalls compute directly, so a bad probe is paid in full. They explore over 6
//   candidates (the prior ranks arms well for small messages) and demand a 5% gain before
//   switching, because each switch risks a slower untested regime. Tensor-parallel calls are
//   many per step, so a fifth of them finds the best arm within ~100 calls; pipeline sends,
//   context- and expert-parallel traffic are few per step and keep 5-8%.
// - FSDP all-gather is partly hidden by prefetch: in between (30%, 8 candidates).
// Warm-up, sample counts and CUSUM levels are the same everywhere: they are statistical, not a
// matter of how expensive a probe is. Four costs per arm suffice with the winsorized centre and
// the early (hopeless) elimination (more are asked for when the costs turn out heavy-tailed).
std::array<HeadConfig, kNumRoles> LearnerConfig::default_heads() {
  HeadConfig bulk;
  bulk.probe_budget = 0.5;
  bulk.converged_budget = 0.01;
  bulk.min_samples = 4;
  bulk.max_candidates = 8;
  bulk.switch_margin = 0.03;
  bulk.cusum_threshold = 8.0;
  bulk.cusum_drift = 0.5;

  HeadConfig critical = bulk;
  critical.probe_budget = 0.05;
  critical.converged_budget = 0.002;
  critical.max_candidates = 6;
  critical.switch_margin = 0.05;

  HeadConfig overlapped = critical;
  overlapped.probe_budget = 0.08;
  overlapped.converged_budget = 0.005;
  overlapped.max_candidates = 8;

  std::array<HeadConfig, kNumRoles> heads;
  heads[static_cast<int>(Role::kDefault)] = bulk;
  heads[static_cast<int>(Role::kDataParallel)] = bulk;
  heads[static_cast<int>(Role::kFsdpReduceScatter)] = bulk;
  heads[static_cast<int>(Role::kTensorParallel)] = critical;
  heads[static_cast<int>(Role::kTensorParallel)].probe_budget = 0.2;
  heads[static_cast<int>(Role::kPipeline)] = critical;
  heads[static_cast<int>(Role::kFsdpAllGather)] = overlapped;
  heads[static_cast<int>(Role::kFsdpAllGather)].probe_budget = 0.3;
  heads[static_cast<int>(Role::kContextParallel)] = overlapped;
  heads[static_cast<int>(Role::kExpertParallel)] = overlapped;
  return heads;
}

}  // namespace dynamiccl
