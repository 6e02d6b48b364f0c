#include "prior/learned_prior_catalog.h"

#include <cmath>

namespace dynamiccl {
namespace prior {

LearnedPriorCatalog::LearnedPriorCatalog(std::shared_ptr<const ArmCatalog> base,
                                         std::shared_ptr<const Model> model, EngineKind engine,
                                         int nodes)
    : base_(std::move(base)), model_(std::move(model)), engine_(engine), nodes_(nodes) {}

std::vector<Estimate> LearnedPriorCatalog::estimates(const CollectiveContext& ctx,
                                                     const std::vector<double>& analytic) const {
  const StateFeatures s{engine_, nodes_, ctx};
  const std::vector<Arm>& list = arms(ctx.op);
  std::vector<double> rows;
  rows.reserve(list.size() * feature_count());
  for (size_t a = 0; a < list.size(); ++a) {
    append_features(s, list[a].action, analytic_log_ratio(analytic, a), &rows);
  }
  return model_->predict(rows, std::vector<int64_t>(list.size(), static_cast<int64_t>(ctx.role)));
}

double LearnedPriorCatalog::analytic_log_ratio(const std::vector<double>& analytic, size_t arm) {
  const double def = analytic.at(kDefaultArm), a = analytic.at(arm);
  return def > 0 && std::isfinite(def) && a > 0 && std::isfinite(a) ? std::log(a / def) : NAN;
}

std::vector<double> LearnedPriorCatalog::prior_costs_us(const CollectiveContext& ctx) const {
  std::vector<double> costs = base_->prior_costs_us(ctx);
  const std::vector<Estimate> est = estimates(ctx, costs);
  // The predicted log ratio of each arm the model is confident about (NaN elsewhere: an arm
  // the analytic prior cannot price is not corrected either).
  std::vector<double> log_ratio(costs.size(), NAN);
  double best = 0;  // the default's
  for (size_t a = 0; a < costs.size(); ++a) {
    const double base = analytic_log_ratio(costs, a);
    if (a == kDefaultArm || std::isnan(base) || !std::isfinite(est[a].log_ratio) ||
        std::exp(est[a].log_sigma) > kConfidentSigma)
      continue;
    log_ratio[a] = base + est[a].log_ratio;
    best = std::min(best, log_ratio[a]);
  }
  const double def = costs[kDefaultArm];
  for (size_t a = 0; a < costs.size(); ++a) {
    if (std::isnan(log_ratio[a])) continue;
    const double optimistic = log_ratio[a] - kHopelessZ * std::exp(est[a].log_sigma);
    costs[a] = optimistic > best + std::log1p(kHopelessMargin) ? INFINITY
                                                               : def * std::exp(log_ratio[a]);
  }
  return costs;
}

}  // namespace prior
}  // namespace dynamiccl
