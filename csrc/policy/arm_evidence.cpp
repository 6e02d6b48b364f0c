#include "policy/arm_evidence.h"

#include <algorithm>

namespace dynamiccl {

void ArmEvidenceBoard::post(uint32_t state, uint16_t arm, OpKind op, int size_bin, double footprint,
                            double arm_factor, double cap_factor) {
  const auto same = [&](const Entry& e) { return e.state == state && e.arm == arm; };
  entries_.erase(std::remove_if(entries_.begin(), entries_.end(), same), entries_.end());
  const double on_arm = arm_factor > kEvidenceFactor ? arm_factor : 1.0;
  const bool caps_say = cap_factor > kEvidenceFactor || cap_factor * kEvidenceFactor < 1.0;
  const double on_caps = footprint < 1.0 && caps_say ? cap_factor : 1.0;
  if (on_arm > 1.0 || on_caps != 1.0) {
    entries_.push_back({state, arm, op, size_bin, footprint, on_arm, on_caps});
  }
}

double ArmEvidenceBoard::arm_factor(OpKind op, int size_bin, uint16_t arm) const {
  double f = 1.0;
  for (const Entry& e : entries_) {
    if (e.op == op && e.size_bin == size_bin && e.arm == arm) f = std::max(f, e.arm_factor);
  }
  return f;
}

double ArmEvidenceBoard::cap_factor(OpKind op, int size_bin, double footprint) const {
  double dearer = 1.0, cheaper = 1.0;
  for (const Entry& e : entries_) {
    if (e.op != op || e.footprint < footprint) continue;
    if (e.size_bin == size_bin) {
      dearer = std::max(dearer, e.cap_factor);
      cheaper = std::min(cheaper, e.cap_factor);
    } else if (e.size_bin + 1 == size_bin) {
      cheaper = std::min(cheaper, e.cap_factor);  // the bin below: its cheaper word only
    }
  }
  return dearer > 1.0 ? dearer : cheaper;
}

}  // namespace dynamiccl
