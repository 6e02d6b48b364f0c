// The scenario schema table: every key is documented, says what leaving it out means, and knows
// where its value goes, with defaults its own rule accepts.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "sim/scenario_schema.h"

namespace dynamiccl {
namespace sim {
namespace {

bool is_scalar(SchemaType t) {
  return t != SchemaType::kObject && t != SchemaType::kVariants && t != SchemaType::kList &&
         t != SchemaType::kMap;
}

double as_double(const SchemaScalar& v) {
  return std::holds_alternative<int64_t>(v) ? static_cast<double>(std::get<int64_t>(v))
                                            : std::get<double>(v);
}

// A default outside its own rule would fill valid files with invalid values.
void expect_default_accepted(const SchemaNode& n, const std::string& path) {
  const SchemaScalar& v = *n.default_value;
  if (n.type == SchemaType::kChoice) {
    EXPECT_NE(std::find(n.choices.begin(), n.choices.end(), std::get<std::string>(v)),
              n.choices.end())
        << path;
  }
  if (n.min) {
    const double x = as_double(v), lo = as_double(*n.min);
    EXPECT_TRUE(n.min_open ? x > lo : x >= lo) << path;
    EXPECT_LE(x, as_double(*n.max)) << path;
  }
}

int check(const SchemaNode& n, const std::string& path) {
  int keys = 0;
  if (!n.key.empty()) {
    ++keys;
    EXPECT_FALSE(n.doc.empty()) << path << ": no doc";
  }
  if (is_scalar(n.type)) {
    EXPECT_TRUE(n.write) << path << ": written nowhere";
    if (!n.key.empty() && !n.required)
      EXPECT_TRUE(n.default_value || !n.absent.empty()) << path << ": no default, no meaning";
    if (n.default_value) expect_default_accepted(n, path);
    if (n.type == SchemaType::kChoice) EXPECT_FALSE(n.choices.empty()) << path;
  }
  if (n.type == SchemaType::kList || n.type == SchemaType::kMap) {
    EXPECT_TRUE(n.place) << path;
    EXPECT_TRUE(n.item) << path;
    if (n.item) keys += check(*n.item, path + "[]");
  }
  if (n.type == SchemaType::kMap) EXPECT_FALSE(n.key_parts.empty()) << path;
  if (n.type == SchemaType::kVariants) {
    EXPECT_EQ(n.fields.size(), 1u) << path << ": the tag";
    EXPECT_FALSE(n.variants.empty()) << path;
  }
  for (const SchemaNode& f : n.fields) keys += check(f, path.empty() ? f.key : path + "." + f.key);
  for (const SchemaNode& v : n.variants) keys += check(v, path + "[kind=" + v.key + "]");
  return keys;
}

TEST(ScenarioSchema, EveryKeyIsDocumentedAndWrittenSomewhere) {
  EXPECT_GT(check(scenario_schema(), ""), 60);
}

}  // namespace
}  // namespace sim
}  // namespace dynamiccl
