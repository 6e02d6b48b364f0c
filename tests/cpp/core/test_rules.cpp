// The learner's rule registry (policy/rules.h): every rule named once, described, and found by
// name; an unknown name is an error that lists the accepted ones.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>

#include "policy/learner.h"
#include "policy/rules.h"

namespace dynamiccl {
namespace {

TEST(Rules, EveryRuleHasAUniqueNameAndADescription) {
  const auto& infos = rule_infos();
  ASSERT_EQ(static_cast<int>(infos.size()), kNumRules);
  std::set<std::string> names;
  for (int i = 0; i < kNumRules; ++i) {
    EXPECT_EQ(static_cast<int>(infos[i].rule), i);
    const std::string name = infos[i].name;
    EXPECT_FALSE(name.empty());
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz_"), std::string::npos) << name;
    EXPECT_TRUE(names.insert(name).second) << "repeated: " << name;
    EXPECT_GT(std::string(infos[i].description).size(), 20u) << name;
  }
}

TEST(Rules, LookupByNameRoundTrips) {
  for (const RuleInfo& r : rule_infos()) {
    EXPECT_EQ(rule_by_name(r.name), r.rule);
    EXPECT_STREQ(rule_name(r.rule), r.name);
  }
}

TEST(Rules, UnknownNameIsAnErrorListingTheAcceptedNames) {
  try {
    rule_by_name("nonsense");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'nonsense'"), std::string::npos) << what;
    for (const RuleInfo& r : rule_infos()) EXPECT_NE(what.find(r.name), std::string::npos) << what;
  }
  EXPECT_THROW(RuleSet::without({rule_infos().front().name, "nonsense"}), std::invalid_argument);
}

TEST(Rules, AllOnByDefaultAndSwitchedOffByName) {
  const LearnerConfig config;
  EXPECT_TRUE(config.rules.all_on());
  const RuleInfo& first = rule_infos().front();
  const RuleInfo& last = rule_infos().back();
  const RuleSet s = RuleSet::without({first.name, last.name});
  EXPECT_FALSE(s.on(first.rule));
  EXPECT_FALSE(s.on(last.rule));
  for (const RuleInfo& r : rule_infos()) {
    if (r.rule != first.rule && r.rule != last.rule) EXPECT_TRUE(s.on(r.rule)) << r.name;
  }
  RuleSet t = s;
  t.set(first.rule, true);
  t.set(last.rule, true);
  EXPECT_TRUE(t.all_on());
}

}  // namespace
}  // namespace dynamiccl
