// The alpha-beta-gamma model the CPU schedules price themselves with. It only orders probing
// (the learner measures the real costs), so round numbers for Gloo over TCP on loopback or a LAN
// are enough. Torch-free.
#pragma once

namespace dynamiccl {

constexpr double kAlphaUs = 30.0;                 // one message: syscalls, wake-ups, matching
constexpr double kPieceAlphaUs = 5.0;             // each extra piece of a segmented step
constexpr double kBetaUsPerByte = 1.0 / 1500.0;   // ~1.5 GB/s per link
constexpr double kGammaUsPerByte = 1.0 / 5000.0;  // ~5 GB/s ATen reduction

// The group as the recursive schedules see it: the largest power of two p2 <= p takes part in
// the butterfly, the others fold in and out.
struct CostShape {
  explicit CostShape(int size) : p(size) {
    while (p2 * 2 <= p) {
      p2 *= 2;
      ++log2p;
    }
    ceil_log2p = log2p + (p2 < p ? 1 : 0);
  }
  int p;
  int p2 = 1;
  int log2p = 0;
  int ceil_log2p = 0;
  bool folded() const { return p2 < p; }
};

// Latency of one step made of `s` pieces: the first costs a full message, the rest mostly overlap.
inline double step_latency_us(int s) { return kAlphaUs + (s - 1) * kPieceAlphaUs; }

// Folding the ranks beyond the power of two in and out of a butterfly.
inline double fold_cost_us(const CostShape& g, double bytes_in, double bytes_out, int s,
                           bool reduce) {
  if (!g.folded()) return 0.0;
  return 2 * step_latency_us(s) + (bytes_in + bytes_out) * kBetaUsPerByte +
         (reduce ? bytes_in * kGammaUsPerByte / s : 0);
}

}  // namespace dynamiccl
