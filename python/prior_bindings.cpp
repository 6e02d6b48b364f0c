// The learned prior (csrc/prior/): its feature schema for the trainer (dynamiccl_pg/prior/),
// and the C++ loader, so that Python checks and evaluates a model exactly as the backend does.
#include <pybind11/stl.h>

#include <cmath>

#include "bindings.h"
#include "engines/cpu/arm_catalog.h"
#include "engines/nccl/arm_catalog.h"
#include "prior/features.h"
#include "prior/learned_prior_catalog.h"
#include "prior/model.h"

namespace dynamiccl {
namespace {

// An arm's action from its name: a CPU arm of the op, or an NCCL arm's form.
Action action_of(EngineKind engine, OpKind op, const std::string& arm) {
  Action a;
  if (arm == "default") return a;
  if (engine == EngineKind::kNccl) {
    TORCH_CHECK_VALUE(parse_nccl_arm_name(arm, &a), "dynamiccl: prior: '", arm,
                      "' is not an NCCL arm name (default, ALGO/PROTO[/cN][/kCK])");
    return a;
  }
  static const CpuArmCatalog cpu;
  for (const Arm& c : cpu.arms(op)) {
    if (c.name == arm) return c.action;
  }
  TORCH_CHECK_VALUE(false, "dynamiccl: prior: '", arm, "' is not a CPU arm of ", op_name(op),
                    "; accepted: ", join_names(bindings::arm_names(cpu, op_name(op))));
}

prior::StateFeatures state_of(const std::string& engine, const std::string& op,
                              uint64_t effective_bytes, int group_size, int nodes,
                              const std::string& exposure, bool fused) {
  TORCH_CHECK_VALUE(group_size >= 1 && nodes >= 1 && nodes <= group_size,
                    "dynamiccl: prior: group_size=", group_size, " nodes=", nodes,
                    " (accepted: 1 <= nodes <= group_size)");
  prior::StateFeatures s;
  s.engine = bindings::parse_or_throw<EngineKind>(engine_names(), engine, "engine");
  s.nodes = nodes;
  s.call.op = bindings::parse_or_throw<OpKind>(op_names(), op, "op");
  s.call.exposure = bindings::parse_or_throw<Exposure>(exposure_names(), exposure, "exposure");
  s.call.fused = fused;
  s.call.effective_bytes = effective_bytes;
  s.call.group_size = group_size;
  return s;
}

}  // namespace

void bind_prior(py::module_& m) {
  m.def(
      "prior_schema",
      [] {
        py::dict d;
        d["format"] = prior::kFormat;
        d["schema_version"] = prior::kSchemaVersion;
        d["catalog"] = prior::catalog_fingerprint();
        d["feature_names"] = prior::feature_names();
        d["roles"] = role_names().list();
        d["metadata_file"] = prior::kMetadataFile;
        d["confident_sigma"] = prior::kConfidentSigma;
        return d;
      },
      "The learned prior's schema: format, versions, feature names and roles (head order).");
  m.def(
      "prior_features",
      [](const std::string& engine, const std::string& op, const std::string& arm,
         uint64_t effective_bytes, int group_size, int nodes, const std::string& exposure,
         bool fused, double analytic_ratio) {
        const prior::StateFeatures s = state_of(engine, op, effective_bytes, group_size, nodes,
                                                exposure, fused);
        TORCH_CHECK_VALUE(analytic_ratio > 0 && std::isfinite(analytic_ratio),
                          "dynamiccl: prior: analytic_ratio=", analytic_ratio,
                          " (accepted: a finite number > 0)");
        std::vector<double> row;
        prior::append_features(s, action_of(s.engine, s.call.op, arm), std::log(analytic_ratio),
                               &row);
        return row;
      },
      py::arg("engine"), py::arg("op"), py::arg("arm"), py::arg("effective_bytes"),
      py::arg("group_size"), py::arg("nodes") = 1, py::arg("exposure") = "exposed",
      py::arg("fused") = false, py::arg("analytic_ratio") = 1.0,
      "The model's input row for one (state, arm), in prior_schema()['feature_names'] order; "
      "analytic_ratio: the engine's analytic prior of the arm over the default's. The model "
      "predicts log(measured ratio / analytic_ratio).");

  py::class_<prior::Model, std::shared_ptr<prior::Model>>(
      m, "PriorModel", "A learned prior loaded and checked by the C++ loader the backend uses.")
      .def(py::init([](const std::string& path) {
             return std::const_pointer_cast<prior::Model>(prior::Model::load(path));
           }),
           py::arg("path"))
      .def_property_readonly("path", &prior::Model::path)
      .def_property_readonly("metadata",
                             [](const prior::Model& model) {
                               const prior::Metadata& md = model.metadata();
                               py::dict d;
                               d["format"] = md.format;
                               d["schema_version"] = md.schema_version;
                               d["catalog"] = md.catalog;
                               d["feature_names"] = md.feature_names;
                               d["roles"] = md.roles;
                               d["data_fingerprint"] = md.data_fingerprint;
                               return d;
                             })
      .def(
          "predict",
          [](const prior::Model& model, const std::vector<std::vector<double>>& rows,
             const std::vector<int64_t>& roles) {
            TORCH_CHECK_VALUE(rows.size() == roles.size(), "dynamiccl: prior: ", rows.size(),
                              " rows and ", roles.size(), " roles");
            std::vector<double> flat;
            for (const auto& r : rows) {
              TORCH_CHECK_VALUE(r.size() == prior::feature_count(), "dynamiccl: prior: a row of ",
                                r.size(), " features, the schema has ", prior::feature_count());
              flat.insert(flat.end(), r.begin(), r.end());
            }
            for (int64_t role : roles) {
              TORCH_CHECK_VALUE(role >= 0 && role < kNumRoles, "dynamiccl: prior: role index ",
                                role, " (accepted: 0..", kNumRoles - 1, ")");
            }
            std::vector<std::pair<double, double>> out;
            for (const prior::Estimate& e : model.predict(flat, roles)) {
              out.emplace_back(e.log_ratio, e.log_sigma);
            }
            return out;
          },
          py::arg("rows"), py::arg("roles"),
          "(log ratio, log sigma) per row, as the backend computes them (float64, rounded).");
}

}  // namespace dynamiccl
