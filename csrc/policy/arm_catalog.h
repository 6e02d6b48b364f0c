// What an engine offers the learner: the candidate actions ("arms") per collective type and a
// prior cost for each, used only to order probing. Implemented by the CPU engine, the NCCL
// engine and the simulator. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/types.h"

namespace dynamiccl {

struct Arm {
  std::string
      name;  // short, stable, unique within the op: "default", "ring", "rd_s4", "ring/LL128/c8"
  Action action;
};

class ArmCatalog {
 public:
  virtual ~ArmCatalog() = default;
  // The arms for `op`. Element kDefaultArm (0) is always the engine default. Must return the
  // same list on every rank (it may depend only on rank-independent facts: op, group size,
  // engine version).
  virtual const std::vector<Arm>& arms(OpKind op) const = 0;
  // Estimated cost in microseconds of `arm` for a call of `effective_bytes` on `group_size`
  // ranks. Deterministic. Lower is tried first when probing.
  virtual double prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                               int group_size) const = 0;
  // What `arm` holds of the machine while it runs, relative to the engine default (1.0): what
  // it takes from compute running beside it (NCCL: the channels, hence SMs, it uses for a call
  // of `effective_bytes`). Overlapped states trial arms that hold less (docs/architecture.md,
  // "Footprint trials"). Deterministic. By default every arm holds what the default holds.
  virtual double footprint(OpKind /*op*/, uint16_t /*arm*/, uint64_t /*effective_bytes*/) const {
    return 1.0;
  }
  // The prior cost of every arm of `ctx.op` for this call, indexed by arm: what probing orders
  // and prunes by. Evaluated once per new learner state. By default prior_cost_us per arm; a
  // learned prior (prior/learned_prior_catalog.h) also reads the call's role and exposure.
  virtual std::vector<double> prior_costs_us(const CollectiveContext& ctx) const {
    const size_t n = arms(ctx.op).size();
    std::vector<double> costs(n);
    for (size_t a = 0; a < n; ++a) {
      costs[a] = prior_cost_us(ctx.op, static_cast<uint16_t>(a), ctx.effective_bytes,
                               ctx.group_size);
    }
    return costs;
  }
  // The engine's own (analytic) prior of every arm, whatever prior_costs_us orders by: what a
  // learned prior is trained to correct (snapshots keep it). By default prior_costs_us.
  virtual std::vector<double> analytic_costs_us(const CollectiveContext& ctx) const {
    return ArmCatalog::prior_costs_us(ctx);
  }
};

}  // namespace dynamiccl
