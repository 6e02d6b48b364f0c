#include "sim/scenario_schema.h"

#include <limits>
#include <map>
#include <type_traits>
#include <utility>

#include "core/types.h"
#include "nccl_model/cost_model.h"
#include "nccl_model/topology.h"
#include "policy/learner.h"
#include "sim/scenario_spec.h"
#include "sim/workload.h"

namespace dynamiccl {
namespace sim {

namespace {

using T = SchemaType;

template <typename S>
S& as(void* target) {
  return *static_cast<S*>(target);
}

SchemaScalar to_scalar(bool v) { return v; }
SchemaScalar to_scalar(int v) { return int64_t{v}; }
SchemaScalar to_scalar(uint64_t v) { return static_cast<int64_t>(v); }
SchemaScalar to_scalar(double v) { return v; }
SchemaScalar to_scalar(const std::string& v) { return v; }

template <typename V>
V from_scalar(const SchemaScalar& v) {
  if constexpr (std::is_same_v<V, bool> || std::is_same_v<V, std::string>) {
    return std::get<V>(v);
  } else if constexpr (std::is_floating_point_v<V>) {
    // JSON writes 2 for 2.0.
    return std::holds_alternative<int64_t>(v) ? static_cast<V>(std::get<int64_t>(v))
                                              : static_cast<V>(std::get<double>(v));
  } else {
    return static_cast<V>(std::get<int64_t>(v));
  }
}

// A key under construction: the table below chains its settings.
class Key {
 public:
  Key(SchemaType type, const char* key, const char* doc) {
    n_.type = type;
    n_.key = key;
    n_.doc = doc;
  }
  Key&& required() && {
    n_.required = true;
    n_.default_value.reset();
    return std::move(*this);
  }
  Key&& absent(const char* meaning) && {
    n_.default_value.reset();
    n_.absent = meaning;
    return std::move(*this);
  }
  Key&& range(SchemaScalar min, SchemaScalar max) && {
    n_.min = std::move(min);
    n_.max = std::move(max);
    return std::move(*this);
  }
  Key&& above_min() && {
    n_.min_open = true;
    return std::move(*this);
  }
  Key&& nonempty() && {
    n_.nonempty = true;
    return std::move(*this);
  }
  Key&& pattern(const char* regex, const char* in_words) && {
    n_.pattern = regex;
    n_.pattern_doc = in_words;
    return std::move(*this);
  }
  Key&& choices(std::vector<std::string> names) && {
    n_.choices = std::move(names);
    return std::move(*this);
  }
  Key&& spelled(const char* separator, const char* wildcard, bool ignore_case) && {
    n_.key_separator = separator;
    n_.key_wildcard = wildcard;
    n_.key_ignore_case = ignore_case;
    return std::move(*this);
  }
  Key&& placed(std::function<void*(void*, const std::string&)> place) && {
    n_.place = std::move(place);
    return std::move(*this);
  }
  SchemaNode& node() { return n_; }
  operator SchemaNode() && { return std::move(n_); }

 private:
  SchemaNode n_;
};

// A scalar kept in member `m` of struct S; its default is S's initializer.
template <typename S, typename V>
Key field(SchemaType type, const char* key, V S::*m, const char* doc) {
  Key k(type, key, doc);
  k.node().default_value = to_scalar(S{}.*m);
  k.node().write = [m](void* t, const std::string&, const SchemaScalar& v) {
    as<S>(t).*m = from_scalar<V>(v);
  };
  return k;
}

template <typename S, typename V>
Key integer(const char* key, V S::*m, int64_t min, int64_t max, const char* doc) {
  return field(T::kInteger, key, m, doc).range(min, max);
}
template <typename S>
Key number(const char* key, double S::*m, double min, double max, const char* doc) {
  return field(T::kNumber, key, m, doc).range(min, max);
}
template <typename S>
Key boolean(const char* key, bool S::*m, const char* doc) {
  return field(T::kBoolean, key, m, doc);
}
template <typename S>
Key text(const char* key, std::string S::*m, const char* doc) {
  return field(T::kString, key, m, doc);
}
template <typename S>
Key choice(const char* key, std::string S::*m, std::vector<std::string> names, const char* doc) {
  return field(T::kChoice, key, m, doc).choices(std::move(names));
}
constexpr int64_t kMaxBytes = int64_t{1} << 50;  // 1 PiB
template <typename S>
Key byte_count(const char* key, uint64_t S::*m, const char* doc) {
  return field(T::kSize, key, m, doc).range(int64_t{1}, kMaxBytes);
}

// An object kept in member `m` of S.
template <typename S, typename V>
Key object(const char* key, V S::*m, const char* doc, std::vector<SchemaNode> fields) {
  Key k(T::kObject, key, doc);
  k.node().fields = std::move(fields);
  k.node().place = [m](void* t, const std::string&) -> void* { return &(as<S>(t).*m); };
  return k;
}
// An object whose keys are fields of the enclosing struct; also a list entry or map value.
Key inline_object(const char* key, const char* doc, std::vector<SchemaNode> fields) {
  Key k(T::kObject, key, doc);
  k.node().fields = std::move(fields);
  return k;
}
// A scalar list entry: only its type and range.
Key scalar_entry(SchemaType type, SchemaScalar min, SchemaScalar max) {
  return Key(type, "", "").range(std::move(min), std::move(max));
}

// A list kept in vector member `m` of S. An object entry is appended, then filled; a scalar
// entry is appended as written.
template <typename S, typename V>
Key list(const char* key, std::vector<V> S::*m, SchemaNode item, const char* doc) {
  if constexpr (std::is_class_v<V> && !std::is_same_v<V, std::string>) {
    item.place = [](void* vec, const std::string&) -> void* {
      return &as<std::vector<V>>(vec).emplace_back();
    };
  } else {
    item.write = [](void* vec, const std::string&, const SchemaScalar& v) {
      as<std::vector<V>>(vec).push_back(from_scalar<V>(v));
    };
  }
  Key k(T::kList, key, doc);
  k.node().item = std::make_shared<const SchemaNode>(std::move(item));
  k.node().place = [m](void* t, const std::string&) -> void* { return &(as<S>(t).*m); };
  return k;
}

// A map kept in vector member `m` of S: new_entry(vector, canonical key) appends an element
// for a key and returns where its value goes.
template <typename S, typename V, typename NewEntry>
Key map_of(const char* key, std::vector<V> S::*m, std::vector<KeyPart> parts, SchemaNode value,
           NewEntry new_entry, const char* doc) {
  value.place = [new_entry](void* vec, const std::string& k) -> void* {
    return new_entry(as<std::vector<V>>(vec), k);
  };
  Key k(T::kMap, key, doc);
  k.node().key_parts = std::move(parts);
  k.node().item = std::make_shared<const SchemaNode>(std::move(value));
  k.node().place = [m](void* t, const std::string&) -> void* { return &(as<S>(t).*m); };
  return k;
}

// An entry whose keys depend on its tag (member `m` of S), one variant per tag value.
template <typename S>
Key variants(const char* tag, std::string S::*m, const char* doc, std::vector<SchemaNode> kinds) {
  std::vector<std::string> names;
  for (const SchemaNode& v : kinds) names.push_back(v.key);
  Key k(T::kVariants, "", "");
  k.node().fields.push_back(choice(tag, m, std::move(names), doc));
  k.node().variants = std::move(kinds);
  return k;
}

std::vector<std::string> learner_roles() {
  std::vector<std::string> out = role_names().list();
  out.insert(out.begin(), kEveryRole);
  return out;
}

// ---- the table ---------------------------------------------------------------------------

constexpr int64_t kMaxSteps = 10000000;
constexpr int64_t kMaxCount = 1000000;  // layers, calls, head settings that count
constexpr double kMaxFactor = 1000;     // truth and congestion multipliers
constexpr double kMaxValue = 1e6;       // bandwidths, latencies, bucket caps, head settings
constexpr char kTruthKeySeparator[] = "/";

Key link(const char* key, bool intra, const char* doc, const char* bw_doc, const char* lat_doc) {
  return object(
      key, intra ? &TopologySpec::intra : &TopologySpec::inter, doc,
      {
          choice("type", &LinkSpec::type, link_type_names(intra), "the link type").required(),
          number("bw_GBps", &LinkSpec::bw_GBps, 0, kMaxValue, bw_doc).above_min().required(),
          number("lat_us", &LinkSpec::lat_us, 0, kMaxValue, lat_doc),
      });
}

Key topology() {
  using S = TopologySpec;
  return object(
      "topology", &ScenarioSpec::topology, "the cluster",
      {
          integer("nodes", &S::nodes, 1, 100000, "number of nodes").required(),
          integer("gpus_per_node", &S::gpus_per_node, 1, 72, "GPUs per node").required(),
          link("intra", true, "the links inside a node", "per-GPU bandwidth, GB/s",
               "added to NCCL's per-hop latency, us")
              .required(),
          link("inter", false, "the network between nodes", "network bandwidth per GPU, GB/s",
               "the network's latency, us")
              .absent("required when nodes > 1"),
          choice("gpu", &S::gpu, compcap_names(), "NCCL's compute-capability class"),
          choice("cpu", &S::cpu, cpu_names(), "NCCL's network overhead and LL bandwidth row"),
          boolean("nvswitch", &S::nvswitch,
                  "NVLink through NVSwitch (NVLS needs it, with Hopper or newer)"),
          boolean("sharp", &S::sharp,
                  "in-network reduction (CollNet, multi-node NVLS); needs inter.type `ib`"),
          integer("channels", &S::channels, 0, 64,
                  "the communicator's channel count; 0 = derived from the links"),
      });
}

Key workload_entry() {
  using S = WorkloadSpec;
  const SchemaNode group =
      object(
          "group", &S::group,
          "the process group; entries naming the same group share its learner and shape",
          {
              text("name", &GroupSpec::name, "the group's name")
                  .absent("from the role: `tp`, `pp`, `dp` (dp and FSDP) or `world`"),
              integer("nodes", &GroupSpec::nodes, 1, 100000, "nodes it spans")
                  .absent("an earlier entry's of this name, else the role's: tp 1, pp 2 (1 on a "
                          "single node), others all"),
              integer("gpus_per_node", &GroupSpec::gpus_per_node, 1, 72, "GPUs per node it spans")
                  .absent("an earlier entry's of this name, else the role's: pp 1 (2 on a single "
                          "node), others all"),
          })
          .absent("the role's usual group");
  const SchemaNode layers = integer("layers", &S::layers, 1, kMaxCount, "equal layers").required();
  const SchemaNode activation_bytes =
      byte_count("activation_bytes", &S::activation_bytes, "activation size per call").required();
  return variants(
      "kind", &S::kind, "what the entry emits; the keys below depend on it",
      {
          inline_object(
              "call", "`per_step` calls of one collective",
              {
                  choice("role", &S::role, role_names().list(),
                         "the traffic's role (its learner head)")
                      .required(),
                  choice("op", &S::op, simulated_op_names(), "the collective").required(),
                  byte_count(
                      "bytes", &S::bytes,
                      "the size NCCL sees (the full buffer for all-gather and reduce-scatter)")
                      .required(),
                  integer("per_step", &S::per_step, 1, kMaxCount, "consecutive calls per step"),
                  choice("phase", &S::phase, phase_names(),
                         "where in the step: forward, backward, or after both"),
                  choice("exposure", &S::exposure, exposure_names().list(),
                         "with `compute`: whether the step waits for the call (`exposed`) or "
                         "the phase's compute runs beside it (`overlapped`, waited for at the "
                         "phase's end); ignored without `compute`"),
                  group,
              }),
          inline_object("ddp",
                        "DDP gradient buckets (parameters in reverse order; a bucket closes "
                        "once it reaches its cap), all-reduced during backward as they fill "
                        "(role dp, hints bucket and is_last)",
                        {
                            list("param_bytes", &S::param_bytes,
                                 scalar_entry(T::kSize, int64_t{1}, kMaxBytes),
                                 "parameter sizes, in model order")
                                .nonempty()
                                .absent("give layers and layer_bytes instead"),
                            integer("layers", &S::layers, 1, kMaxCount, "equal layers")
                                .absent("with layer_bytes, instead of param_bytes"),
                            byte_count("layer_bytes", &S::layer_bytes, "bytes per layer")
                                .absent("with layers, instead of param_bytes"),
                            number("bucket_cap_mb", &S::bucket_cap_mb, 0, kMaxValue,
                                   "a bucket closes once it reaches this size, MiB")
                                .above_min(),
                            number("first_bucket_mb", &S::first_bucket_mb, 0, kMaxValue,
                                   "the first bucket's cap, MiB")
                                .above_min(),
                            group,
                        }),
          inline_object(
              "fsdp",
              "FSDP2, per microbatch: an all-gather per layer in forward; in "
              "backward the all-gather again (if resharded) and a reduce-scatter "
              "per layer, in reverse (roles fsdp_ag, fsdp_rs)",
              {
                  layers,
                  byte_count("layer_bytes", &S::layer_bytes, "bytes per layer (unsharded)")
                      .required(),
                  boolean("reshard_after_forward", &S::reshard_after_forward,
                          "free the parameters after forward, so backward gathers them again"),
                  group,
              }),
          inline_object("tp",
                        "per microbatch and direction, `calls_per_layer` activation "
                        "all-reduces per layer (role tp)",
                        {
                            layers,
                            activation_bytes,
                            integer("calls_per_layer", &S::calls_per_layer, 1, 64,
                                    "all-reduces per layer and direction (attention + MLP)"),
                            group,
                        }),
          inline_object("pp",
                        "per microbatch a forward and a backward send between two stages "
                        "(role pp)",
                        {
                            activation_bytes,
                            group,
                        }),
      });
}

Key truth() {
  using S = TruthEntry;
  return map_of(
             "truth", &ScenarioSpec::truth,
             {{"algo", "algorithm", algo_names()}, {"proto", "protocol", proto_names()}},
             inline_object(
                 "", "",
                 {
                     number("bw", &S::bw, 0, kMaxFactor, "multiplies the modelled bandwidth")
                         .above_min(),
                     number("lat", &S::lat, 0, kMaxFactor, "multiplies the modelled latency")
                         .above_min(),
                 })
                 .nonempty(),
             [](std::vector<TruthEntry>& entries, const std::string& key) -> void* {
               const size_t cut = key.find(kTruthKeySeparator);
               TruthEntry& e = entries.emplace_back();
               e.algo = key.substr(0, cut);
               e.proto = key.substr(cut + 1);
               return &e;
             },
             "how the real cost departs from NCCL's model, per algorithm and protocol; every "
             "matching entry multiplies in")
      .spelled(kTruthKeySeparator, kTruthWildcard, true)
      .absent("NCCL's model is the truth");
}

Key learner() {
  Key settings = inline_object("", "", {});
  for (const HeadSetting& f : head_settings()) {
    Key k = f.integer ? Key(T::kInteger, f.name, f.doc)
                            .range(static_cast<int64_t>(f.min),
                                   static_cast<int64_t>(std::min<double>(f.max, kMaxCount)))
                      : Key(T::kNumber, f.name, f.doc).range(f.min, f.max);
    k.node().min_open = f.min_open;
    k.node().write = [](void* t, const std::string& name, const SchemaScalar& v) {
      as<std::map<std::string, double>>(t)[name] = from_scalar<double>(v);
    };
    settings.node().fields.push_back(std::move(k).absent("the role's default"));
  }
  return map_of(
             "learner", &ScenarioSpec::heads, {{"role", "role", learner_roles()}},
             std::move(settings),
             [](std::vector<HeadOverrides>& heads, const std::string& role) -> void* {
               return &heads.emplace_back(HeadOverrides{role, {}}).values;
             },
             "learner head settings per role (`all`: every role), applied in file order")
      .absent("each role's defaults");
}

Key congestion() {
  using S = CongestionSpec;
  const SchemaNode episode = inline_object(
      "", "",
      {
          integer("from_step", &S::from_step, 0, kMaxSteps, "the episode's first step").required(),
          integer("to_step", &S::to_step, 1, kMaxSteps, "the step after its last").required(),
          choice("link", &S::link, {kIntraLinks, kInterLinks},
                 "the link class hit: inside nodes or between them")
              .required(),
          number("bw_factor", &S::bw_factor, 0, kMaxFactor, "multiplies the class's bandwidth")
              .above_min()
              .required(),
          number("lat_factor", &S::lat_factor, 0, kMaxFactor, "multiplies its per-hop latency")
              .above_min(),
      });
  return list("congestion", &ScenarioSpec::congestion, episode,
              "episodes that cut a link class's bandwidth for a range of steps; overlaps multiply")
      .absent("none");
}

Key channel_model() {
  using S = ChannelModelSpec;
  return object("channel_model", &ScenarioSpec::channel_model,
                "how the real cost depends on "
                "the channel count (the defaults are NCCL's assumption: linear, no per-channel "
                "cost)",
                {
                    number("saturation", &S::saturation, 0, 1,
                           "bandwidth stops growing past this fraction of the channels")
                        .above_min(),
                    number("contention", &S::contention, 0, 0.99,
                           "bandwidth lost when every channel past that knee runs, as a fraction"),
                    number("lat_per_channel_us", &S::lat_per_channel_us, 0, kMaxValue,
                           "fixed cost of each channel used, us"),
                });
}

// Giving the list, even empty, turns the derived caps off.
Key channel_caps() {
  using S = ScenarioSpec;
  return list("channel_caps", &S::channel_caps, scalar_entry(T::kInteger, int64_t{1}, int64_t{64}),
              "channel caps offered as arms, for Simple and LL128; [] = none")
      .absent("a quarter and a half of the group's channel count")
      .placed([](void* t, const std::string&) -> void* {
        as<S>(t).derive_channel_caps = false;
        return &as<S>(t).channel_caps;
      });
}

Key compute() {
  using S = ComputeSpec;
  return object("compute", &ScenarioSpec::compute,
                "the step's compute, which overlapped collectives run beside and slow down (the "
                "step model: csrc/sim/step_model.h; calibration: "
                "benchmarks/sim/interference_calibration.md)",
                {
                    number("fwd_us", &S::fwd_us, 0, 1e9, "forward compute per microbatch, us"),
                    number("bwd_us", &S::bwd_us, 0, 1e9, "backward compute per microbatch, us"),
                    number("post_us", &S::post_us, 0, 1e9,
                           "compute once per step after the last backward (optimizer), us"),
                    integer("sms", &S::sms, 1, 1024, "SMs per GPU (H100 SXM: 132)"),
                    number("sm_weight", &S::sm_weight, 0, 10,
                           "compute slowdown per unit of SM share a collective's channels hold"),
                    number("mem_weight", &S::mem_weight, 0, 10,
                           "compute slowdown per unit of HBM bandwidth share a collective uses"),
                    number("hbm_GBps", &S::hbm_GBps, 0, 1e6, "HBM bandwidth per GPU, GB/s")
                        .above_min(),
                    boolean("mark_steps", &S::mark_steps,
                            "the learner is told where steps end, so that step trials judge "
                            "overlapped calls (false: every call by its duration)"),
                })
      .absent("no compute model: a step is the sum of its collectives' times");
}

Key consensus() {
  using S = ScenarioSpec;
  return inline_object(
      "consensus", "how costs reach the learner (the product's round scheduler)",
      {
          integer("round_calls", &S::round_calls, 1, 65536,
                  "learned calls of a group per consensus round (applied one round later)"),
          integer("ranks_sampled", &S::ranks_sampled, 1, 64,
                  "the learner is told the minimum cost over this many ranks"),
          number("hop_us", &S::hop_us, 0, 1e6,
                 "one exchange of a round's all-reduce on the hosts' network, us: a round takes "
                 "this times its exchanges (log2 of the group's ranks, +2 where not a power of "
                 "two) and costs the job what of that its K calls do not cover"),
          number("round_cost_us", &S::round_cost_us, -1, 1e9,
                 "a fixed price for every round, us (-1: priced by hop_us as the group's size "
                 "gives)"),
      });
}

SchemaNode build() {
  using S = ScenarioSpec;
  return inline_object(
      "", "a scenario",
      {
          text("name", &S::name, "unique id; by convention the file name")
              .pattern("[A-Za-z0-9][A-Za-z0-9_.-]{0,63}",
                       "1-64 characters of letters, digits, '_', '.', '-'")
              .required(),
          integer("seed", &S::seed, 0, std::numeric_limits<int64_t>::max(),
                  "seed of the noise and of the learner")
              .required(),
          integer("steps", &S::steps, 1, kMaxSteps,
                  "training steps to simulate (the workload is one step)")
              .required(),
          topology().required(),
          list("workload", &S::workload, workload_entry(), "the collectives of one training step")
              .nonempty()
              .required(),
          text("description", &S::description,
               "what the scenario shows and where its numbers come from"),
          integer("microbatches", &S::microbatches, 1, 1024,
                  "how often tp and pp traffic repeats within a step"),
          choice(
              "prior", &S::prior, {"exact", "described"},
              "what the learner's NCCL prior is built on: `exact` = the topology above, "
              "`described` = what the product assumes by itself (shape, GPU generation, NVLink or "
              "PCIe, links at their assumed bandwidths, IB between nodes)"),
          truth(),
          number("noise_sigma", &S::noise_sigma, 0, 2,
                 "std-dev of the log of each rank's per-call noise (log-normal)"),
          number("outlier_rate", &S::outlier_rate, 0, 0.5,
                 "probability that a rank's call is an outlier (a heavy tail)"),
          number("outlier_factor", &S::outlier_factor, 1, 1000, "how much slower an outlier is"),
          number("arrival_skew_us", &S::arrival_skew_us, 0, 1e9,
                 "ranks reach each call up to this far apart (uniform), us"),
          number("overlap", &S::overlap, 0, 1,
                 "share of the group's previous call a call's measured time includes (it queued "
                 "behind it: asynchronous calls in flight together)"),
          congestion(),
          channel_model(),
          channel_caps(),
          compute(),
          consensus(),
          learner(),
          choice("expect", &S::expect, {"gain", "no_gain"}, "which targets apply")
              .absent("judged from the run: gain when the oracle is below 99% of NCCL's default"),
      });
}

}  // namespace

const char* schema_type_name(SchemaType type) {
  switch (type) {
    case T::kObject: return "object";
    case T::kVariants: return "variants";
    case T::kList: return "list";
    case T::kMap: return "map";
    case T::kInteger: return "integer";
    case T::kNumber: return "number";
    case T::kBoolean: return "boolean";
    case T::kString: return "string";
    case T::kChoice: return "choice";
    case T::kSize: return "size";
  }
  return "unknown";
}

const SchemaNode& scenario_schema() {
  static const SchemaNode schema = build();
  return schema;
}

}  // namespace sim
}  // namespace dynamiccl
