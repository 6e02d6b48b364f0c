#include "sim/scenario_spec.h"

#include <cmath>
#include <stdexcept>

namespace dynamiccl {
namespace sim {

namespace {
[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }
bool finite_pos(double v) { return std::isfinite(v) && v > 0; }
}  // namespace

void validate_spec(const ScenarioSpec& s) {
  if (s.steps < 1 || s.steps > 10000000) bad("steps must be in [1, 10000000]");
  if (s.microbatches < 1 || s.microbatches > 1024) bad("microbatches must be in [1, 1024]");
  if (!(s.noise_sigma >= 0 && s.noise_sigma <= 2)) bad("noise_sigma must be in [0, 2]");
  if (!(s.outlier_rate >= 0 && s.outlier_rate <= 0.5)) bad("outlier_rate must be in [0, 0.5]");
  if (!(s.outlier_factor >= 1 && s.outlier_factor <= 1000))
    bad("outlier_factor must be in [1, 1000]");
  if (!(s.arrival_skew_us >= 0 && s.arrival_skew_us <= 1e9))
    bad("arrival_skew_us must be in [0, 1e9]");
  if (!(s.overlap >= 0 && s.overlap <= 1)) bad("overlap must be in [0, 1]");
  if (s.round_calls < 1 || s.round_calls > 65536)
    bad("consensus.round_calls must be in [1, 65536]");
  if (s.ranks_sampled < 1 || s.ranks_sampled > 64)
    bad("consensus.ranks_sampled must be in [1, 64]");
  if (!(s.round_cost_us >= 0 && s.round_cost_us <= 1e9))
    bad("consensus.round_cost_us must be in [0, 1e9]");
  for (size_t i = 0; i < s.congestion.size(); ++i) {
    const CongestionSpec& c = s.congestion[i];
    const std::string at = "congestion[" + std::to_string(i) + "]: ";
    if (c.from_step < 0 || c.to_step <= c.from_step) bad(at + "needs 0 <= from_step < to_step");
    if (c.link != "intra" && c.link != "inter")
      bad(at + "link '" + c.link + "' (accepted: intra, inter)");
    if (!finite_pos(c.bw_factor)) bad(at + "bw_factor must be finite and > 0");
    if (!finite_pos(c.lat_factor)) bad(at + "lat_factor must be finite and > 0");
  }
  for (int c : s.channel_caps)
    if (c < 1 || c > 64) bad("channel_caps entries must be in [1, 64]");
}

}  // namespace sim
}  // namespace dynamiccl
