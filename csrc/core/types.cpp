#include "core/types.h"

namespace dynamiccl {

namespace {
constexpr const char* kOpNames[kNumOps] = {
    "allreduce", "broadcast", "reduce", "allgather", "reduce_scatter", "alltoall",
    "gather",    "scatter",   "send",   "recv",      "barrier"};
constexpr const char* kRoleNames[kNumRoles] = {"default", "dp", "fsdp_ag", "fsdp_rs",
                                               "tp",      "pp", "cp",      "ep"};
}  // namespace

const char* op_name(OpKind op) {
  const int i = static_cast<int>(op);
  return i >= 0 && i < kNumOps ? kOpNames[i] : "unknown";
}

bool parse_op(const std::string& name, OpKind* out) {
  for (int i = 0; i < kNumOps; ++i) {
    if (name == kOpNames[i]) {
      *out = static_cast<OpKind>(i);
      return true;
    }
  }
  return false;
}

const char* role_name(Role role) {
  const int i = static_cast<int>(role);
  return i >= 0 && i < kNumRoles ? kRoleNames[i] : "unknown";
}

bool parse_role(const std::string& name, Role* out) {
  for (int i = 0; i < kNumRoles; ++i) {
    if (name == kRoleNames[i]) {
      *out = static_cast<Role>(i);
      return true;
    }
  }
  return false;
}

std::vector<std::string> op_names() {
  return names_of(kNumOps, [](int i) { return op_name(static_cast<OpKind>(i)); });
}

std::vector<std::string> role_names() {
  return names_of(kNumRoles, [](int i) { return role_name(static_cast<Role>(i)); });
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace dynamiccl
