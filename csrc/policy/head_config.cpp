// Per-role head budgets, their names, and the learner's mode names.
#include <string>

#include "policy/learner.h"

namespace dynamiccl {

namespace {
constexpr const char* kModeNames[] = {"learn", "frozen", "off"};
constexpr int kNumModes = 3;
}  // namespace

const char* mode_name(Mode m) {
  const int i = static_cast<int>(m);
  return i >= 0 && i < kNumModes ? kModeNames[i] : "unknown";
}

bool parse_mode(const std::string& name, Mode* out) {
  for (int i = 0; i < kNumModes; ++i) {
    if (name == kModeNames[i]) {
      *out = static_cast<Mode>(i);
      return true;
    }
  }
  return false;
}

const std::vector<HeadField>& head_fields() {
  static const std::vector<HeadField> fields = {
      {"probe_budget", "max fraction of a state's calls spent probing while exploring", false,
       [](HeadConfig& h, double v) { h.probe_budget = v; }},
      {"converged_budget", "probing fraction once converged (the budget decays to it)", false,
       [](HeadConfig& h, double v) { h.converged_budget = v; }},
      {"warmup_calls", "default-arm calls before probing starts", true,
       [](HeadConfig& h, double v) { h.warmup_calls = static_cast<int>(v); }},
      {"min_samples", "samples per arm before it can be compared or eliminated", true,
       [](HeadConfig& h, double v) { h.min_samples = static_cast<int>(v); }},
      {"switch_margin", "how much cheaper (relative) a challenger must be to take over", false,
       [](HeadConfig& h, double v) { h.switch_margin = v; }},
      {"max_candidates", "at most this many arms (best by prior; the default is always kept)", true,
       [](HeadConfig& h, double v) { h.max_candidates = static_cast<int>(v); }},
      {"cusum_threshold", "CUSUM alarm level, in units of the incumbent's cost std-dev", false,
       [](HeadConfig& h, double v) { h.cusum_threshold = v; }},
      {"cusum_drift", "CUSUM slack, in the same unit", false,
       [](HeadConfig& h, double v) { h.cusum_drift = v; }},
  };
  return fields;
}

const HeadField* find_head_field(const std::string& name) {
  for (const HeadField& f : head_fields())
    if (name == f.name) return &f;
  return nullptr;
}

std::vector<std::string> head_field_names() {
  std::vector<std::string> out;
  for (const HeadField& f : head_fields()) out.push_back(f.name);
  return out;
}

// Why these budgets (DESIGN.md §4):
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
