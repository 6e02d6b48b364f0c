// What one state's measured arms say about the others' prices (the group's states share it, like
// the do-no-harm budget and the step trial board). An arm's word only ever raises a price: it
// delays or drops a first probe. A cap's word may lower one, and a dearer word wins over any
// cheaper one.
//
// Two words, about the calls of one op and size bin (the same calls, told apart by their
// exposure or priority), and a cap's cheaper word about the next size bin too:
// - An arm's own costs. The calls are the same whatever their exposure, so an arm one state
//   measured far beyond its price is as far beyond it for the others. Over NCCL's socket
//   transport (benchmarks/gpu/results.md, (f)) `ring/LL`, priced at 1.9x the default, ran 17x,
//   and each state of the 25 MiB buckets would pay that first probe.
// - A channel cap's costs. The NCCL prior prices an arm that holds fewer channels from the
//   channel count it assumes for the communicator, and from a described topology that count can
//   be off by a factor: in the simulator's LLM step (32 real channels, 4 assumed on the
//   data-parallel group) `ring/Simple/c2`, priced at 2x `ring/Simple`, ran 15.5x, and the
//   footprint descent walked on to the next cap, priced as wrongly. Measured against the arm it
//   caps (same algorithm and protocol on every channel), so that what the prior misjudges of
//   those is not taken for the channel count, it prices every cap holding no more. The same holds
//   the other way: a bandwidth-bound call loses little to a cap that the prior prices by the
//   bandwidth it gives up. In the simulated LLM step the half-channel cap ran at 1.0-1.08x the
//   default against a price of 1.87x, and the quarter, priced at 3.5x and running at 1.05x, waited
//   for the do-no-harm budget of a 3.5x first probe before the footprint descent could try it.
//   A cap far cheaper than its price says so of the calls twice as large as well: a channel's
//   throughput grows with the message, so the channels that saturate the links for a call
//   saturate them for one twice its size (not for one half its size, nor across the latency-bound
//   sizes far below, where every cap is cheap). A dearer word stays with its own bin. In the
//   simulated LLM step (a trace of its rounds) the 32 MiB buckets' first cap probe waited for the
//   do-no-harm budget until step 42, eleven steps after the 16 MiB buckets' caps had run far
//   below their price.
// A word counts beyond kEvidenceFactor times the prior's ratio, or below its inverse for a cap:
// within it, costs say nothing the prior's own error does not. A re-open of the state that said
// it drops its costs, and the word with them, except for an arm that was far beyond the default
// (kPriorCutoff): the re-open parks it without measuring it again, and a word withdrawn with
// its costs let every state of the calls pay that probe again, the one that said it too.
#pragma once

#include <cstdint>
#include <vector>

#include "core/types.h"
#include "policy/tuning.h"

namespace dynamiccl {

class ArmEvidenceBoard {
 public:
  // State `state` measured `arm` (holding `footprint` of the default) in calls of (op, size_bin):
  // at `arm_factor` x the price its prior gave it relative to the default and, for a cap, at
  // `cap_factor` x relative to the arm it caps. Replaces that state's earlier word on the arm;
  // factors within kEvidenceFactor of 1 (either way) withdraw it.
  void post(uint32_t state, uint16_t arm, OpKind op, int size_bin, double footprint,
            double arm_factor, double cap_factor);
  // What measured costs of `arm` in (op, size_bin) say of its price (another state's, or, for an
  // arm far beyond, the asking state's before a re-open): the largest factor posted for it, 1 when
  // there is none.
  double arm_factor(OpKind op, int size_bin, uint16_t arm) const;
  // What measured caps say of an arm holding `footprint` (< 1) in (op, size_bin): among the factors
  // posted for caps holding at least as much, the largest if one is above 1, else the smallest
  // (of those, also the factors below 1 posted in size_bin - 1); 1 when there is none.
  double cap_factor(OpKind op, int size_bin, double footprint) const;

 private:
  struct Entry {
    uint32_t state;
    uint16_t arm;
    OpKind op;
    int size_bin;
    double footprint;
    double arm_factor;  // 1: no word on the arm itself
    double cap_factor;  // 1: no word on the caps
  };
  std::vector<Entry> entries_;  // a few per group: one per arm measured beyond its prior
};

}  // namespace dynamiccl
