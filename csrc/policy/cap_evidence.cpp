#include "policy/cap_evidence.h"

#include <algorithm>

namespace dynamiccl {

void CapEvidenceBoard::post(uint32_t state, uint16_t arm, OpKind op, int size_bin, double footprint,
                            double factor) {
  const auto same = [&](const Entry& e) { return e.state == state && e.arm == arm; };
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), same), entries_.end());
  if (factor > kCapEvidenceFactor)
    entries_.push_back({state, arm, op, size_bin, footprint, factor});
}

double CapEvidenceBoard::factor(OpKind op, int size_bin, double footprint) const {
  double f = 1.0;
  for (const Entry& e : entries_) {
    if (e.op == op && e.size_bin == size_bin && e.footprint >= footprint) f = std::max(f, e.factor);
  }
  return f;
}

}  // namespace dynamiccl
