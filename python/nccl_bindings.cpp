// NCCL's side of dynamiccl_pg._C: the cost model (the NCCL prior) of a described communicator,
// the topology a group describes, and the tuner plugin's counters and profiler records.
#include <dlfcn.h>

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "bindings.h"
#include "engines/nccl/arm_catalog.h"
#include "engines/nccl/publish.h"
#include "nccl_model/cost_model.h"
#include "nccl_plugin/dynamiccl_nccl.h"

namespace dynamiccl {

namespace bindings {
namespace {

nccl::LinkSpec link_from_py(const py::dict& d) {
  return nccl::LinkSpec{d["type"].cast<std::string>(), d["bw_GBps"].cast<double>(),
                        get_or<double>(d, "lat_us", 0.0)};
}

py::dict link_to_py(const nccl::LinkSpec& l) {
  py::dict d;
  d["type"] = l.type;
  d["bw_GBps"] = l.bw_GBps;
  d["lat_us"] = l.lat_us;
  return d;
}

py::dict topology_to_py(const nccl::TopologySpec& t) {
  py::dict d;
  d["nodes"] = t.nodes;
  d["gpus_per_node"] = t.gpus_per_node;
  d["gpu"] = t.gpu;
  d["cpu"] = t.cpu;
  d["intra"] = link_to_py(t.intra);
  d["inter"] = link_to_py(t.inter);
  d["nvswitch"] = t.nvswitch;
  d["sharp"] = t.sharp;
  d["channels"] = t.channels;
  d["min_channels"] = t.min_channels;
  d["max_channels"] = t.max_channels;
  return d;
}

int parse_gpu(const std::string& gpu) {
  int compcap = 0;
  if (!nccl::parse_compcap(gpu, &compcap))
    throw py::value_error("gpu '" + gpu +
                          "' is not accepted; accepted: " + join_names(nccl::compcap_names()));
  return compcap;
}

std::string loaded_plugin_path() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&dynamiccl_nccl_channel_open), &info) && info.dli_fname) {
    return info.dli_fname;
  }
  return "";
}

// NCCL's cost model (the NCCL prior) of the described communicator: per arm, its time.
py::dict nccl_predict(const py::dict& topology, const std::string& op_str, uint64_t bytes,
                      int nccl_version) {
  const nccl::TopologySpec spec = topology_from_py(topology);
  const NcclArmCatalog cat = nccl_catalog_for(nccl::resolve_topology(spec),
                                              nccl::GroupShape{spec.nodes, spec.gpus_per_node}, {},
                                              true, nccl_version);
  const auto op = parse_or_throw<OpKind>(op_names(), op_str, "op");
  py::dict out;
  const auto& arms = cat.arms(op);
  for (size_t a = 0; a < arms.size(); ++a) {
    out[py::str(arms[a].name)] = cat.model().predict_us(op, arms[a].action, bytes);
  }
  int algo = -1, proto = -1;
  if (nccl::func_of(op) >= 0 && cat.model().pick(nccl::func_of(op), bytes, &algo, &proto)) {
    out["default"] = py::str(nccl_arm_name(algo, proto, 0));
  }
  return out;
}

void bind_cost_model(py::module_& m) {
  m.def("nccl_predict", &nccl_predict, py::arg("topology"), py::arg("op"), py::arg("bytes"),
        py::arg("nccl_version") = 0,
        "NCCL's modelled time (us) of every arm of `op` at `bytes` on the described communicator "
        "(a topology dict as dynamiccl_pg.topology describes it); 'default' names NCCL's pick.");
  m.def(
      "described_topology",
      [](int nodes, int gpus_per_node, const std::string& gpu, bool pcie) {
        return topology_to_py(nccl::described_topology(nodes, gpus_per_node, parse_gpu(gpu), pcie));
      },
      py::arg("nodes"), py::arg("gpus_per_node"), py::arg("gpu"), py::arg("pcie"),
      "The topology a group describes from what its ranks see, links at their assumed bandwidths.");
  m.def(
      "assumed_bw_GBps",
      [](const std::string& link, const std::string& gpu) {
        nccl::LinkType type;
        if (!nccl::parse_link_type(link, &type))
          throw py::value_error("link '" + link + "' is not accepted; accepted: " +
                                join_names(nccl::link_type_names(true)) + ", " +
                                join_names(nccl::link_type_names(false)));
        return nccl::assumed_bw_GBps(type, parse_gpu(gpu));
      },
      py::arg("link"), py::arg("gpu"),
      "Per-GPU bandwidth (GB/s) assumed for a link of this type on this GPU generation.");
}

py::dict nccl_counters() {
  dynamiccl_nccl_counters c{};
  dynamiccl_nccl_get_counters(&c);
  py::dict d;
  d["applied"] = c.applied;
  d["abstained"] = c.abstained;
  d["unavailable"] = c.unavailable;
  d["mismatched"] = c.mismatched;
  d["init_calls"] = c.init_calls;
  d["abi_version"] = c.abi_version;
  d["chunk_size_calls"] = c.chunk_size_calls;
  d["chunk_size_applied"] = c.chunk_size_applied;
  d["chunk_size_rejected"] = c.chunk_size_rejected;
  d["unbound_comms"] = c.unbound_comms;
  d["active_comms"] = c.active_comms;
  d["loaded_by_nccl"] = dynamiccl_nccl_loaded_by_nccl() != 0;
  d["profiler_loaded_by_nccl"] = dynamiccl_nccl_profiler_loaded_by_nccl() != 0;
  return d;
}

py::list nccl_profiler_records(uint64_t after_id) {
  std::vector<dynamiccl_nccl_coll_record> recs(DYNAMICCL_NCCL_PROFILER_RING_SIZE);
  recs.resize(dynamiccl_nccl_profiler_read(after_id, recs.data(), recs.size()));
  py::list out;
  for (const auto& r : recs) {
    py::dict d;
    d["id"] = r.id;
    d["comm_id"] = r.comm_id;
    d["seq"] = r.seq_number;
    d["coll"] = r.coll_type;
    d["algo"] = r.algo;
    d["proto"] = r.proto;
    d["nchannels"] = r.nchannels;
    d["kernel_us"] = r.kernel_stop_ns > r.kernel_start_ns
                         ? (r.kernel_stop_ns - r.kernel_start_ns) / 1e3
                         : -1.0;
    out.append(d);
  }
  return out;
}

void bind_plugin(py::module_& m) {
  m.def("nccl_plugin_path", &loaded_plugin_path,
        "Path of the tuner plugin library this module is linked with (give NCCL this one).");
  m.def("nccl_counters", &nccl_counters);
  // A group's decision channel (engines/nccl/publish.h): the creator opens it before making the
  // NCCL engine, expects the group's communicator while the engine may create it, and hands it
  // to the backend, which closes it.
  m.def("nccl_channel_open", &NcclChannel::open_new,
        "A new decision channel's id (0: none left, the group is not tuned).");
  m.def("nccl_channel_close", &NcclChannel::close, py::arg("channel"));
  m.def(
      "nccl_expect_comm",
      [](int channel, int64_t n_ranks) {
        const NcclChannel ch(channel);
        if (n_ranks < 0) {
          ch.expect_done();
        } else {
          ch.expect_comm(static_cast<size_t>(n_ranks));
        }
      },
      py::arg("channel"), py::arg("n_ranks"),
      "Communicators of n_ranks ranks NCCL creates from now on bind to the channel; -1: no more.");
  m.def(
      "nccl_comms_bound", [](int channel) { return NcclChannel(channel).comms_bound(); },
      py::arg("channel"));
  m.def("nccl_profiler_records", &nccl_profiler_records);
}

}  // namespace

nccl::TopologySpec topology_from_py(const py::dict& d) {
  nccl::TopologySpec t;
  t.nodes = d["nodes"].cast<int>();
  t.gpus_per_node = d["gpus_per_node"].cast<int>();
  t.gpu = d["gpu"].cast<std::string>();
  t.cpu = get_or<std::string>(d, "cpu", t.cpu);
  t.intra = link_from_py(d["intra"].cast<py::dict>());
  t.inter = link_from_py(d["inter"].cast<py::dict>());
  t.nvswitch = get_or<bool>(d, "nvswitch", t.nvswitch);
  t.sharp = get_or<bool>(d, "sharp", t.sharp);
  t.channels = get_or<int>(d, "channels", t.channels);
  t.min_channels = get_or<int>(d, "min_channels", t.min_channels);
  t.max_channels = get_or<int>(d, "max_channels", t.max_channels);
  return t;
}

}  // namespace bindings

void bind_nccl(py::module_& m) {
  bindings::bind_cost_model(m);
  bindings::bind_plugin(m);
}

}  // namespace dynamiccl
