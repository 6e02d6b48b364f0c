// dynamiccl_pg._C.EmulatedNccl: the emulated NCCL engine (csrc/engines/emulated_nccl), created by
// dynamiccl_pg.emulation when DYNAMICCL_EMULATE_NCCL names a scenario.
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <pybind11/stl.h>

#include "engines/emulated_nccl/emulated_nccl.h"
#include "sim/scenario_spec.h"

namespace py = pybind11;

namespace dynamiccl {

namespace {

using emulated_nccl::EmulatedNccl;

// "ring/LL128" -> (algo, proto); a bad name is a ValueError naming it and what is accepted.
std::pair<int, int> parse_pair(const std::string& text) {
  const size_t slash = text.find('/');
  int algo = -1, proto = -1;
  if (slash == std::string::npos || !nccl::parse_algo(text.substr(0, slash), &algo) ||
      !nccl::parse_proto(text.substr(slash + 1), &proto)) {
    throw py::value_error(
        "'" + text + "' is not ALGORITHM/PROTOCOL; algorithms: " + join_names(nccl::algo_names()) +
        "; protocols: " + join_names(nccl::proto_names()));
  }
  return {algo, proto};
}

// The NCCL releases the emulation can behave as, by name (DYNAMICCL_EMULATE_NCCL_VERSION).
const std::vector<std::pair<std::string, emulated_nccl::NcclRelease>> kReleases = {
    {"2.28", emulated_nccl::NcclRelease::k2_28},
    {"2.30", emulated_nccl::NcclRelease::k2_30},
    {"2.32", emulated_nccl::NcclRelease::k2_32}};

emulated_nccl::NcclRelease parse_release(const std::string& name) {
  std::string accepted;
  for (const auto& [n, r] : kReleases) {
    if (n == name) return r;
    accepted += (accepted.empty() ? "" : ", ") + n;
  }
  throw py::value_error("emulated NCCL release '" + name +
                        "' is not accepted; accepted: " + accepted);
}

// The name of the release EmulationConfig defaults to.
std::string default_release() {
  for (const auto& [n, r] : kReleases) {
    if (r == emulated_nccl::EmulationConfig{}.release) return n;
  }
  return "";
}

}  // namespace

void bind_emulated_nccl(py::module_& m) {
  auto backend_base = py::module_::import("torch._C._distributed_c10d").attr("Backend");
  py::class_<EmulatedNccl, c10::intrusive_ptr<EmulatedNccl>>(m, "EmulatedNccl", backend_base)
      .def(py::init([](int rank, int size, const py::object& gloo,
                       const sim::ScenarioSpec& scenario, int nodes, int gpus_per_node,
                       uint64_t comm_id, const std::string& tuner_plugin,
                       const std::string& nccl_algo, const std::string& nccl_proto,
                       bool skip_plugin, const std::vector<std::string>& unavailable,
                       const std::string& release, bool nonblocking) {
             emulated_nccl::EmulationConfig c;
             c.cluster = scenario.cluster();
             c.shape = nccl::GroupShape{nodes, gpus_per_node};
             c.comm_id = comm_id;
             c.tuner_plugin = tuner_plugin;
             c.nccl_algo = nccl_algo;
             c.nccl_proto = nccl_proto;
             c.skip_plugin = skip_plugin;
             c.release = parse_release(release);
             c.nonblocking = nonblocking;
             for (const auto& pair : unavailable) c.unavailable.push_back(parse_pair(pair));
             auto engine = c10::intrusive_ptr<c10d::Backend>::reclaim_copy(
                 gloo.cast<c10d::Backend*>());
             try {
               return c10::make_intrusive<EmulatedNccl>(rank, size, std::move(engine),
                                                        std::move(c));
             } catch (const std::invalid_argument& e) {
               throw py::value_error(e.what());
             }
           }),
           py::arg("rank"), py::arg("size"), py::arg("gloo"), py::arg("scenario"), py::arg("nodes"),
           py::arg("gpus_per_node"), py::arg("comm_id"), py::arg("tuner_plugin"),
           py::arg("nccl_algo"), py::arg("nccl_proto"), py::arg("skip_plugin"),
           py::arg("unavailable"), py::arg("release") = default_release(),
           py::arg("nonblocking") = false)
      .def_property_readonly("plugin_loaded", &EmulatedNccl::plugin_loaded,
                             "whether its communicator exists and loaded the tuner plugin")
      .def_property_readonly("tuner_abi", &EmulatedNccl::tuner_abi,
                             "the tuner ABI its communicator loaded (0: none yet)")
      .def(
          "runs",
          [](const EmulatedNccl& e) {
            py::list out;
            for (const auto& r : e.runs()) {
              py::dict d;
              d["op"] = op_name(r.op);
              d["tuner_saw"] = r.tuner_saw;
              d["bytes"] = r.bytes;
              d["algo"] = r.algo >= 0 ? py::object(py::str(nccl::algo_name(r.algo)))
                                      : py::object(py::none());
              d["proto"] = r.proto >= 0 ? py::object(py::str(nccl::proto_name(r.proto)))
                                        : py::object(py::none());
              d["channels"] = r.channels;
              d["chunk_bytes"] = r.chunk_bytes;
              d["duration_us"] = r.duration_us;
              out.append(d);
            }
            return out;
          },
          "What it ran, oldest first: per call the op, whether NCCL's tuner saw it, bytes, "
          "algorithm, protocol, channel cap (-1: all), chunk size and the modelled duration.");
  std::vector<std::string> releases;
  for (const auto& [name, r] : kReleases) releases.push_back(name);
  m.attr("EMULATED_NCCL_RELEASES") = releases;
  m.attr("EMULATED_NCCL_DEFAULT_RELEASE") = default_release();
}

}  // namespace dynamiccl
