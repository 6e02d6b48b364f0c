// What one state's measured channel caps say about the others' prices (the group's states share
// it, like the do-no-harm budget and the step trial board).
//
// The NCCL prior prices an arm that holds fewer channels from the channel count it assumes for the
// communicator. From a described topology that count can be off by a factor: in the simulator's
// LLM step (32 real channels, 4 assumed on the data-parallel group) `ring/Simple/c2`, priced at 2x
// `ring/Simple`, ran 15.5x. Every state of the same op and size bin (the same calls, told apart by
// their exposure or priority) then paid that first probe again, and the footprint descent walked
// on to the next cap, each priced as wrongly. A cap measured at more than kCapEvidenceFactor times
// its prior's ratio to the arm it caps (same algorithm and protocol on every channel) tells how
// far off the prior is for every cap holding no more: those not yet measured, in every such state,
// are priced by that factor.
#pragma once

#include <cstdint>
#include <vector>

#include "core/types.h"

namespace dynamiccl {

// Within this factor of its prior, a cap's cost says nothing the prior's own error does not.
constexpr double kCapEvidenceFactor = 1.5;

class CapEvidenceBoard {
 public:
  // State `state` measured `arm` (holding `footprint` of the default) in calls of (op, size_bin)
  // at `factor` x the price its prior gave it relative to the default. Replaces that state's
  // earlier word on the arm; a factor within kCapEvidenceFactor withdraws it.
  void post(uint32_t state, uint16_t arm, OpKind op, int size_bin, double footprint, double factor);
  // The factor that prices an unmeasured arm holding `footprint` in (op, size_bin): the largest
  // posted for an arm holding at least as much, 1 when there is none.
  double factor(OpKind op, int size_bin, double footprint) const;

 private:
  struct Entry {
    uint32_t state;
    uint16_t arm;
    OpKind op;
    int size_bin;
    double footprint;
    double factor;
  };
  std::vector<Entry> entries_;  // a few per group: one per measured cap beyond its prior
};

}  // namespace dynamiccl
