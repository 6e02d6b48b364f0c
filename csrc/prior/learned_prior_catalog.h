// An engine's arm catalog with a learned prior (docs/learner.md, "Learned prior"): the same
// arms, actions and footprints; each arm's prior cost is the analytic prior corrected by what the
// model predicts for the call's role, exposure and size (the analytic log ratio to the default
// plus the predicted residual), where the model is confident (sigma <= kConfidentSigma), and the
// analytic prior elsewhere. A confident arm that is hopeless (even kHopelessZ sigmas better than
// predicted, it would still be kHopelessMargin slower than the best confident prediction, the
// default's 1 included) is pruned, which leaves it out of the state's candidates. A confident
// arm's prior carries its sigma, which lets the learner stop probing an arm the model is sure
// cannot win (PolicyState::cannot_win_by_prior). It orders, prunes and stops
// probes: the default is always measured, switches rest on costs, the do-no-harm budget is the
// learner's as ever. The analytic prior stays what analytic_costs_us gives (the base's), which
// snapshots keep for training.
#pragma once

#include <memory>

#include "policy/arm_catalog.h"
#include "prior/model.h"

namespace dynamiccl {
namespace prior {

constexpr double kConfidentSigma = 0.35;
constexpr double kHopelessZ = 2.0;
constexpr double kHopelessMargin = 0.05;

class LearnedPriorCatalog : public ArmCatalog {
 public:
  // `nodes`: the nodes the group spans (a model feature).
  LearnedPriorCatalog(std::shared_ptr<const ArmCatalog> base, std::shared_ptr<const Model> model,
                      EngineKind engine, int nodes);

  const std::vector<Arm>& arms(OpKind op) const override { return base_->arms(op); }
  double prior_cost_us(OpKind op, uint16_t arm, uint64_t effective_bytes,
                       int group_size) const override {
    return base_->prior_cost_us(op, arm, effective_bytes, group_size);
  }
  double footprint(OpKind op, uint16_t arm, uint64_t effective_bytes) const override {
    return base_->footprint(op, arm, effective_bytes);
  }
  int default_channels(OpKind op, uint64_t effective_bytes) const override {
    return base_->default_channels(op, effective_bytes);
  }
  std::vector<ArmPrior> priors(const CollectiveContext& ctx) const override;
  std::vector<double> analytic_costs_us(const CollectiveContext& ctx) const override {
    return base_->analytic_costs_us(ctx);
  }

 private:
  // The model's estimate (the residual over the analytic log ratio) for each arm of `ctx.op`,
  // given the analytic prior of each.
  std::vector<Estimate> estimates(const CollectiveContext& ctx,
                                  const std::vector<double>& analytic) const;
  // log(analytic[arm] / analytic[default]); NaN where either has no positive finite price.
  static double analytic_log_ratio(const std::vector<double>& analytic, size_t arm);

  std::shared_ptr<const ArmCatalog> base_;
  std::shared_ptr<const Model> model_;
  EngineKind engine_;
  int nodes_;
};

}  // namespace prior
}  // namespace dynamiccl
