#include "prior/learned_prior_catalog.h"

#include <cmath>

namespace dynamiccl {
namespace prior {

LearnedPriorCatalog::LearnedPriorCatalog(std::shared_ptr<const ArmCatalog> base,
                                         std::shared_ptr<const Model> model, EngineKind engine,
                                         int nodes)
    : base_(std::move(base)), model_(std::move(model)), engine_(engine), nodes_(nodes) {}

std::vector<Estimate> LearnedPriorCatalog::estimates(const CollectiveContext& ctx) const {
  StateFeatures s;
  s.engine = engine_;
  s.op = ctx.op;
  s.exposure = ctx.exposure;
  s.fused = ctx.fused;
  s.effective_bytes = ctx.effective_bytes;
  s.group_size = ctx.group_size;
  s.nodes = nodes_;
  const std::vector<Arm>& list = arms(ctx.op);
  std::vector<double> rows;
  rows.reserve(list.size() * feature_count());
  for (const Arm& a : list) append_features(s, a.action, &rows);
  return model_->predict(rows, std::vector<int64_t>(list.size(), static_cast<int64_t>(ctx.role)));
}

std::vector<double> LearnedPriorCatalog::prior_costs_us(const CollectiveContext& ctx) const {
  std::vector<double> costs = base_->prior_costs_us(ctx);
  const double def = costs.at(kDefaultArm);
  if (!(def > 0) || !std::isfinite(def)) return costs;  // nothing to scale a ratio by
  const std::vector<Estimate> est = estimates(ctx);
  const auto confident = [&](size_t a) {
    return a != kDefaultArm && std::isfinite(est[a].log_ratio) &&
           std::exp(est[a].log_sigma) <= kConfidentSigma;
  };
  double best = 0;  // the default's log ratio
  for (size_t a = 0; a < costs.size(); ++a) {
    if (confident(a)) best = std::min(best, est[a].log_ratio);
  }
  for (size_t a = 0; a < costs.size(); ++a) {
    if (!confident(a)) continue;
    const double optimistic = est[a].log_ratio - kHopelessZ * std::exp(est[a].log_sigma);
    costs[a] = optimistic > best + std::log1p(kHopelessMargin) ? INFINITY
                                                               : def * std::exp(est[a].log_ratio);
  }
  return costs;
}

}  // namespace prior
}  // namespace dynamiccl
