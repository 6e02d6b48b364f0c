#include "prior/model.h"

#include <cmath>
#include <fstream>

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

namespace dynamiccl {
namespace prior {

namespace {

[[noreturn]] void refuse(const std::string& path, const std::string& problem) {
  TORCH_CHECK_VALUE(false, "dynamiccl: prior model '", path, "': ", problem);
}

std::vector<std::string> string_list(const c10::IValue& v) {
  std::vector<std::string> out;
  for (const c10::IValue& s : v.toListRef()) out.push_back(s.toStringRef());
  return out;
}

// The module's metadata attributes; a missing or mistyped one is a named refusal.
Metadata read_metadata(const std::string& path, const torch::jit::Module& m) {
  const auto attr = [&](const char* name) {
    if (!m.hasattr(name))
      refuse(path, std::string("no '") + name + "' attribute: not a model " +
                       "written by `python -m dynamiccl_pg prior train`");
    return m.attr(name);
  };
  Metadata meta;
  try {
    meta.format = attr("format").toStringRef();
    meta.schema_version = attr("schema_version").toInt();
    meta.catalog = attr("catalog").toStringRef();
    meta.feature_names = string_list(attr("feature_names"));
    meta.roles = string_list(attr("roles"));
    meta.data_fingerprint = attr("data_fingerprint").toStringRef();
  } catch (const c10::Error& e) {
    refuse(path,
           std::string("a metadata attribute has the wrong type: ") + e.what_without_backtrace());
  }
  return meta;
}

void check_metadata(const std::string& path, const Metadata& meta) {
  if (meta.format != kFormat) {
    refuse(path, "format '" + meta.format + "', accepted: '" + kFormat + "'");
  }
  if (meta.schema_version != kSchemaVersion) {
    refuse(path, "feature schema version " + std::to_string(meta.schema_version) +
                     ", this build accepts " + std::to_string(kSchemaVersion) +
                     " (retrain the model with this release)");
  }
  if (meta.catalog != catalog_fingerprint()) {
    refuse(path, "arm catalog " + meta.catalog + ", this build's is " + catalog_fingerprint() +
                     " (its algorithms, protocols or CPU schedules changed: retrain)");
  }
  if (meta.feature_names != feature_names()) {
    refuse(path,
           "its feature names differ from this build's schema " + std::to_string(kSchemaVersion));
  }
  if (meta.roles != role_names().list()) {
    refuse(path, "its roles (" + join_names(meta.roles) + ") are not this build's (" +
                     role_names().joined() + ")");
  }
}

double round_to(double v, double step) {
  return std::isnan(v) ? v : std::nearbyint(v / step) * step;
}

}  // namespace

Model::Model(std::string path, torch::jit::Module module, Metadata meta)
    : path_(std::move(path)), module_(std::move(module)), meta_(std::move(meta)) {}

std::shared_ptr<const Model> Model::load(const std::string& path) {
  if (!std::ifstream(path).good()) refuse(path, "cannot be opened (missing or unreadable)");
  torch::jit::Module module;
  try {
    module = torch::jit::load(path, c10::Device(c10::kCPU));
  } catch (const c10::Error& e) {
    refuse(path, std::string("not a TorchScript archive: ") + e.what_without_backtrace());
  }
  module.eval();
  Metadata meta = read_metadata(path, module);
  check_metadata(path, meta);
  std::shared_ptr<const Model> model(new Model(path, std::move(module), std::move(meta)));
  // One row per op and role (an all-reduce-sized call on 2 ranks, default arm): the outputs
  // must have the documented shape and be finite, or the model is refused here, at group
  // creation, rather than changing decisions later.
  std::vector<double> rows;
  std::vector<int64_t> roles;
  for (int e = 0; e < kNumEngines; ++e) {
    for (int o = 0; o < kNumOps; ++o) {
      for (int r = 0; r < kNumRoles; ++r) {
        StateFeatures s;
        s.engine = static_cast<EngineKind>(e);
        s.call.op = static_cast<OpKind>(o);
        s.call.effective_bytes = 1 << 20;
        s.call.group_size = 2;
        append_features(s, Action{}, 0.0, &rows);
        roles.push_back(r);
      }
    }
  }
  for (const Estimate& est : model->predict(rows, roles)) {
    if (!std::isfinite(est.log_ratio) || !std::isfinite(est.log_sigma)) {
      refuse(path, "its outputs are not finite (NaN or inf) on the check inputs");
    }
  }
  return model;
}

std::vector<Estimate> Model::predict(const std::vector<double>& rows,
                                     const std::vector<int64_t>& roles) const {
  const int64_t n = static_cast<int64_t>(roles.size());
  const int64_t f = static_cast<int64_t>(feature_count());
  TORCH_CHECK(static_cast<int64_t>(rows.size()) == n * f, "dynamiccl: prior: ", rows.size(),
              " feature values for ", n, " rows of ", f);
  c10::InferenceMode guard;
  at::Tensor x = at::from_blob(const_cast<double*>(rows.data()), {n, f}, at::kDouble).clone();
  at::Tensor r = at::from_blob(const_cast<int64_t*>(roles.data()), {n}, at::kLong).clone();
  at::Tensor out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    try {
      out = module_.forward({x, r}).toTensor();
    } catch (const c10::Error& e) {
      refuse(path_, std::string("its forward failed: ") + e.what_without_backtrace());
    }
  }
  if (out.dim() != 2 || out.size(0) != n || out.size(1) != 2) {
    refuse(path_, "forward returned a tensor of shape " + c10::str(out.sizes()) + ", accepted: [" +
                      std::to_string(n) + ", 2] (log ratio, log sigma)");
  }
  out = out.to(at::kDouble).contiguous();
  const double* p = out.data_ptr<double>();
  std::vector<Estimate> est(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    est[i].log_ratio = round_to(p[2 * i], 1.0 / 64);
    est[i].log_sigma = round_to(p[2 * i + 1], 1.0 / 16);
  }
  return est;
}

}  // namespace prior
}  // namespace dynamiccl
