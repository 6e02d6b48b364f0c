// The learned prior's input, defined once: what a model sees of a learner state and of one arm.
// The trainer (dynamiccl_pg/prior/) builds its rows through _C.prior_features, and the backend
// and the simulator build theirs here, so a model is evaluated on exactly what it was trained on.
// Changing a feature changes kPriorSchemaVersion; changing the arm vocabulary (NCCL algorithms
// and protocols, CPU schedules) changes prior_catalog_fingerprint(). A model trained on another
// schema or catalog is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/types.h"

namespace dynamiccl {
namespace prior {

constexpr int kSchemaVersion = 2;
// |analytic log ratio| below which an arm counts as priced exactly as the default.
constexpr double kTieLogRatio = 1e-9;
constexpr const char* kFormat = "dynamiccl-prior/1";
// The archive entry holding the model's metadata as JSON, for people and Python tools; the
// backend reads the same facts from the module's attributes.
constexpr const char* kMetadataFile = "dynamiccl_prior.json";

// A learner state, as the prior sees it: the call's context as the learner has it, and what the
// group adds. The role is not a feature: it selects the model's head.
struct StateFeatures {
  EngineKind engine = EngineKind::kCpu;
  int nodes = 1;  // nodes the group spans
  CollectiveContext call;
};

const std::vector<std::string>& feature_names();
inline size_t feature_count() { return feature_names().size(); }
// Appends the features of (`state`, `action`) to `out`, in feature_names() order.
// `analytic_log_ratio`: log of the engine's analytic prior of the arm over the default's. The
// model predicts how far the real ratio departs from it (a residual), so that where a cluster
// has taught it nothing it stays with the analytic model.
void append_features(const StateFeatures& state, const Action& action, double analytic_log_ratio,
                     std::vector<double>* out);
// A fingerprint of the arm vocabulary the features describe (hex).
const std::string& catalog_fingerprint();

}  // namespace prior
}  // namespace dynamiccl
