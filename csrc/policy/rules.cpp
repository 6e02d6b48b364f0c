#include "policy/rules.h"

#include <stdexcept>

namespace dynamiccl {

const std::vector<RuleInfo>& rule_infos() {
  static const std::vector<RuleInfo> infos = {
#define DYNAMICCL_RULE_INFO(id, name, doc) {Rule::id, name, doc},
      DYNAMICCL_LEARNER_RULES(DYNAMICCL_RULE_INFO)
#undef DYNAMICCL_RULE_INFO
  };
  return infos;
}

const char* rule_name(Rule r) {
  const int i = static_cast<int>(r);
  return i >= 0 && i < kNumRules ? rule_infos()[i].name : "?";
}

std::string rule_names_joined() {
  std::string out;
  for (const RuleInfo& r : rule_infos()) {
    if (!out.empty()) out += ", ";
    out += r.name;
  }
  return out;
}

Rule rule_by_name(const std::string& name) {
  for (const RuleInfo& r : rule_infos()) {
    if (name == r.name) return r.rule;
  }
  throw std::invalid_argument("unknown learner rule '" + name +
                              "' (accepted: " + rule_names_joined() + ")");
}

RuleSet RuleSet::without(const std::vector<std::string>& names) {
  RuleSet s;
  for (const std::string& n : names) s.set(rule_by_name(n), false);
  return s;
}

}  // namespace dynamiccl
