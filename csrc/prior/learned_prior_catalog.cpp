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

std::vector<ArmPrior> LearnedPriorCatalog::priors(const CollectiveContext& ctx) const {
  std::vector<ArmPrior> out = base_->priors(ctx);
  std::vector<double> analytic(out.size());
  for (size_t a = 0; a < out.size(); ++a) analytic[a] = out[a].cost_us;
  const std::vector<Estimate> est = estimates(ctx, analytic);
  // The predicted log ratio of each arm the model is confident about (NaN elsewhere: an arm
  // the analytic prior cannot price is not corrected either).
  std::vector<double> log_ratio(out.size(), NAN);
  double best = 0;  // the default's
  for (size_t a = 0; a < out.size(); ++a) {
    const double base = analytic_log_ratio(analytic, a);
    if (a == kDefaultArm || std::isnan(base) || !std::isfinite(est[a].log_ratio) ||
        std::exp(est[a].log_sigma) > kConfidentSigma)
      continue;
    log_ratio[a] = base + est[a].log_ratio;
    best = std::min(best, log_ratio[a]);
  }
  const double def = analytic[kDefaultArm];
  out[kDefaultArm].sigma = 0;  // the reference every ratio is predicted against
  // The analytic log ratio of the cheapest arm (by the analytic prior) found hopeless.
  double hopeless_from = INFINITY;
  for (size_t a = 0; a < out.size(); ++a) {
    if (std::isnan(log_ratio[a])) continue;
    const double sigma = std::exp(est[a].log_sigma);
    const bool hopeless = log_ratio[a] - kHopelessZ * sigma > best + std::log1p(kHopelessMargin);
    out[a].cost_us = def * std::exp(log_ratio[a]);
    out[a].sigma = sigma;
    out[a].pruned = hopeless;
    if (hopeless) hopeless_from = std::min(hopeless_from, analytic_log_ratio(analytic, a));
  }
  // Pruning must not promote what nobody vouches for: an arm the model is unsure of, which the
  // analytic prior prices beyond one the model found hopeless, would only take that arm's place
  // among the candidates (measured: channel-capped arms at 3-5x the default filled the slots
  // that pruning freed, and were probed late at that price). It is left out too.
  for (size_t a = 0; a < out.size(); ++a) {
    if (a == kDefaultArm || !std::isnan(log_ratio[a])) continue;
    if (analytic_log_ratio(analytic, a) >= hopeless_from) out[a].pruned = true;
  }
  return out;
}

}  // namespace prior
}  // namespace dynamiccl
