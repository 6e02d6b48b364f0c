// dynamiccl_pg._C: binds the C++ core into Python, one concern per file (python/bindings.h lists
// them). Registration of the backend happens in dynamiccl_pg/__init__.py at import (never at
// library load).
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "nccl_model/cost_model.h"
#include "nccl_plugin/dynamiccl_nccl.h"
#include "policy/rules.h"

namespace dynamiccl {
namespace {

std::vector<std::string> to_vector(NameList names) {
  return std::vector<std::string>(names.names, names.names + names.count);
}

py::dict vocabulary() {
  py::dict v;
  v["ops"] = to_vector(op_names());
  v["roles"] = to_vector(role_names());
  v["modes"] = to_vector(mode_names());
  v["engines"] = to_vector(engine_names());
  v["cost_reductions"] = to_vector(cost_reduce_names());
  v["exposures"] = to_vector(exposure_names());
  v["hint_priorities"] = to_vector(priority_names());
  v["hint_directions"] = to_vector(direction_names());
  std::vector<std::string> algos, protos;
  for (int a = 0; a < nccl::kNumAlgos; ++a) algos.push_back(nccl::algo_name(a));
  for (int p = 0; p < nccl::kNumProtos; ++p) protos.push_back(nccl::proto_name(p));
  v["nccl_algos"] = algos;
  v["nccl_protos"] = protos;
  v["nccl_max_channels"] = DYNAMICCL_NCCL_MAX_CHANNELS;
  v["size_bins"] = kNumSizeBins;
  v["gpus"] = nccl::compcap_names();
  v["cpus"] = nccl::cpu_names();
  v["intra_links"] = nccl::link_type_names(true);
  v["inter_links"] = nccl::link_type_names(false);
  return v;
}

// The core's vocabulary. First: the other files' signatures name Engine.
void bind_vocabulary(py::module_& m) {
  py::enum_<EngineKind>(m, "Engine", "The engines a group runs calls on.")
      .value("cpu", EngineKind::kCpu)
      .value("nccl", EngineKind::kNccl);
  m.def("vocabulary", &vocabulary,
        "Every name list the core defines (ops, roles, modes, engines, ...), indexed by value.");
  m.def("size_bin", &size_bin, "The learner's size bin of a byte count.");
  m.def(
      "learner_rules",
      [] {
        std::vector<std::pair<std::string, std::string>> out;
        for (const RuleInfo& r : rule_infos()) out.emplace_back(r.name, r.description);
        return out;
      },
      "The learner's named rules, (name, description) in declaration order: what the "
      "simulator's --ablate switches off.");
}

}  // namespace
}  // namespace dynamiccl

PYBIND11_MODULE(_C, m) {
  using namespace dynamiccl;
  m.doc() = "DynamICCL core: the c10d backend, the learner and the simulator";
  m.attr("built_for_torch") = DYNAMICCL_BUILT_FOR_TORCH;  // checked against torch at import
  bind_vocabulary(m);
  bind_backend(m);
  bind_policy(m);
  bind_nccl(m);
  bind_prior(m);  // before bind_sim: sim.run takes a PriorModel
  bind_sim(m);
  bind_emulated_nccl(m);
}
