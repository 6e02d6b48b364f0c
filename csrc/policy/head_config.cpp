// Per-role head budgets and the learner's mode names.
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

// Why these budgets (DESIGN.md §4):
// - Bulk roles (default, dp, fsdp_rs) move large gradient buffers whose collectives mostly
//   overlap with backward compute and repeat every step: a bad probe costs a fraction of one
//   overlapped call, so they spend up to 25% of a state's calls exploring all 16 candidates and
//   switch for a 3% gain.
// - Latency-critical roles sit on the critical path: a tensor-parallel activation all-reduce or a
//   pipeline send stalls compute directly, so a bad probe is paid in full. They explore 5% of
//   calls over 6 candidates (the prior already ranks arms well for small messages) and demand a
//   5% gain before switching, because each switch risks a slower untested regime.
// - FSDP all-gather, context- and expert-parallel traffic is partly hidden by prefetch or
//   overlap: in between (8-10%, 8 candidates).
// Warm-up, sample counts and the CUSUM levels are the same everywhere: they are statistical,
// not a matter of how expensive a probe is.
std::array<HeadConfig, kNumRoles> LearnerConfig::default_heads() {
  HeadConfig bulk;
  bulk.probe_budget = 0.25;
  bulk.converged_budget = 0.01;
  bulk.max_candidates = 16;
  bulk.switch_margin = 0.03;

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
  heads[static_cast<int>(Role::kPipeline)] = critical;
  heads[static_cast<int>(Role::kFsdpAllGather)] = overlapped;
  heads[static_cast<int>(Role::kFsdpAllGather)].probe_budget = 0.10;
  heads[static_cast<int>(Role::kContextParallel)] = overlapped;
  heads[static_cast<int>(Role::kExpertParallel)] = overlapped;
  return heads;
}

}  // namespace dynamiccl
