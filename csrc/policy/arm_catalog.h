// What an engine offers the learner: the candidate actions ("arms") per collective type and a
// prior cost for each, used only to order probing. Implemented by the CPU engine, the NCCL
// engine and the simulator. Torch-free.
#pragma once

#include <cmath>
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

// One arm's prior for a call.
struct ArmPrior {
  double cost_us = NAN;  // estimated cost; NaN: no estimate (tried last)
  // How sure the prior is: the standard deviation of log(cost_us / the default's cost_us), 0 for
  // the default itself; NaN where the prior does not say (the analytic ones).
  double sigma = NAN;
  // The prior is sure the arm cannot compete: a candidate only where the state would otherwise
  // have fewer than two challengers to measure (policy_state.h, kChallengers), then the
  // cheapest of them by cost_us.
  bool pruned = false;
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
  // of `effective_bytes`). Overlapped states trial arms that hold less (docs/learner.md,
  // "Footprint trials"). Deterministic. By default every arm holds what the default holds.
  virtual double footprint(OpKind /*op*/, uint16_t /*arm*/, uint64_t /*effective_bytes*/) const {
    return 1.0;
  }
  // The channels the engine's own choice uses for a call of `effective_bytes` by the model the
  // priors come from (NCCL: the communicator's count as the model derives it, shrunk for small
  // calls); 0 where arms do not hold channels. Shown beside what NCCL reports it ran the default
  // on (CallOutcome::channels): the prior's channel caps are priced from this count.
  virtual int default_channels(OpKind /*op*/, uint64_t /*effective_bytes*/) const { return 0; }
  // The prior of every arm of `ctx.op` for this call, indexed by arm: what probing orders and
  // prunes by, and, where the prior states it, how sure it is. Evaluated once per new learner
  // state. By default prior_cost_us per arm, with no stated confidence; a learned prior
  // (prior/learned_prior_catalog.h) also reads the call's role and exposure, and says how sure.
  virtual std::vector<ArmPrior> priors(const CollectiveContext& ctx) const {
    const std::vector<double> costs = analytic_costs_us(ctx);
    std::vector<ArmPrior> out(costs.size());
    for (size_t a = 0; a < costs.size(); ++a) out[a].cost_us = costs[a];
    return out;
  }
  // The engine's own (analytic) prior cost of every arm, whatever priors() orders by: what a
  // learned prior is trained to correct (snapshots keep it). By default prior_cost_us per arm.
  virtual std::vector<double> analytic_costs_us(const CollectiveContext& ctx) const {
    const size_t n = arms(ctx.op).size();
    std::vector<double> costs(n);
    for (size_t a = 0; a < n; ++a) {
      costs[a] = prior_cost_us(ctx.op, static_cast<uint16_t>(a), ctx.effective_bytes,
                               ctx.group_size);
    }
    return costs;
  }
};

}  // namespace dynamiccl
