// Shared by the files that bind the core into dynamiccl_pg._C: each file's entry point, which
// PYBIND11_MODULE (module.cpp) calls, and the helpers more than one file uses.
#pragma once

#include <torch/csrc/utils/pybind.h>

#include <string>
#include <vector>

#include "core/types.h"
#include "nccl_model/topology.h"
#include "policy/arm_catalog.h"
#include "policy/learner.h"

namespace dynamiccl {

namespace py = pybind11;

void bind_backend(py::module_& m);        // python/backend_bindings.cpp
void bind_policy(py::module_& m);         // python/policy_bindings.cpp
void bind_nccl(py::module_& m);           // python/nccl_bindings.cpp
void bind_sim(py::module_& m);            // python/sim_bindings.cpp
void bind_emulated_nccl(py::module_& m);  // python/emulated_nccl_bindings.cpp
void bind_prior(py::module_& m);          // python/prior_bindings.cpp

namespace bindings {

template <typename T>
T get_or(const py::dict& d, const char* key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

template <typename E>
E parse_or_throw(NameList names, const std::string& value, const char* what) {
  E out;
  TORCH_CHECK_VALUE(parse_name(names, value, &out), "dynamiccl: unknown ", what, " '", value,
                    "'; accepted: ", names.joined());
  return out;
}

// python/nccl_bindings.cpp: a TopologySpec from its dict form (dynamiccl_pg/topology.py);
// resolve_topology checks it.
nccl::TopologySpec topology_from_py(const py::dict& d);

// python/policy_bindings.cpp: what a learner knows, to and from Python.
std::vector<std::string> arm_names(const ArmCatalog& cat, const std::string& op_str);
py::list stats_to_py(const Learner& learner);
py::dict snapshot_to_py(const PolicySnapshot& snap);
PolicySnapshot snapshot_from_py(const py::dict& d, const ArmCatalog& catalog);

}  // namespace bindings
}  // namespace dynamiccl
