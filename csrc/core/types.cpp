#include "core/types.h"

namespace dynamiccl {

namespace {
// Each list is indexed by its enum's values.
constexpr const char* kOps[] = {"allreduce",      "broadcast", "reduce", "allgather",
                                "reduce_scatter", "alltoall",  "gather", "scatter",
                                "send",           "recv",      "barrier"};
constexpr const char* kRoles[] = {"default", "dp", "fsdp_ag", "fsdp_rs", "tp", "pp", "cp", "ep"};
constexpr const char* kModes[] = {"learn", "frozen", "off"};
constexpr const char* kEngines[] = {"cpu", "nccl"};
constexpr const char* kCostReductions[] = {"auto", "min", "max"};
constexpr const char* kExposures[] = {"exposed", "overlapped"};
constexpr const char* kPriorities[] = {"background", "normal", "critical"};
constexpr const char* kDirections[] = {"forward", "backward"};

static_assert(sizeof(kOps) / sizeof(*kOps) == kNumOps, "one name per OpKind");
static_assert(sizeof(kRoles) / sizeof(*kRoles) == kNumRoles, "one name per Role");
static_assert(sizeof(kModes) / sizeof(*kModes) == static_cast<int>(Mode::kCount), "modes");
static_assert(sizeof(kEngines) / sizeof(*kEngines) == kNumEngines, "one name per EngineKind");
static_assert(sizeof(kExposures) / sizeof(*kExposures) == kNumExposures, "one per Exposure");
static_assert(sizeof(kPriorities) / sizeof(*kPriorities) == Hint::kPriorityCritical + 1,
              "Hint::kPriorityCritical is the last priority");
static_assert(sizeof(kCostReductions) / sizeof(*kCostReductions) ==
                  static_cast<int>(CostReduce::kCount),
              "one name per CostReduce");

template <size_t N>
constexpr NameList list(const char* const (&names)[N]) {
  return NameList{names, static_cast<int>(N)};
}
}  // namespace

int NameList::find(const std::string& value) const {
  for (int i = 0; i < count; ++i) {
    if (value == names[i]) return i;
  }
  return -1;
}

std::string NameList::joined() const { return join_names(list()); }

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

NameList op_names() { return list(kOps); }
NameList role_names() { return list(kRoles); }
NameList mode_names() { return list(kModes); }
NameList engine_names() { return list(kEngines); }
NameList cost_reduce_names() { return list(kCostReductions); }
NameList exposure_names() { return list(kExposures); }
NameList priority_names() { return list(kPriorities); }
NameList direction_names() { return list(kDirections); }

}  // namespace dynamiccl
