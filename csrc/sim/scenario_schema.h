// The scenario file format (benchmarks/scenarios/*.json), declared once: every key with its
// type, accepted values, default and one-line doc, and where its value goes in ScenarioSpec.
// Python walks this table to validate a decoded file (dynamiccl_pg/sim/scenario.py), fills a
// ScenarioSpec through it (_C.sim.spec_from_dict), and prints the README's schema section from
// it. Rules that relate several keys are validate_spec's (scenario_spec.h).
//
// Adding a key: a field in the struct (scenario_spec.h) and one line in scenario_schema.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace dynamiccl {
namespace sim {

// What a key holds.
enum class SchemaType {
  kObject,    // the keys in `fields`
  kVariants,  // an object whose keys depend on its tag, `fields[0]`: one of `variants`
  kList,      // entries of `item`
  kMap,       // keys spelled as `key_parts`, each with a value of `item`
  kInteger,
  kNumber,
  kBoolean,
  kString,
  kChoice,
  kSize,  // a byte count: an integer or a string with a unit ("64KiB")
};
const char* schema_type_name(SchemaType type);  // "object", "variants", "list", ...

// A checked scalar as it is written into the struct (sizes already in bytes).
using SchemaScalar = std::variant<bool, int64_t, double, std::string>;

// One part of a map key: "algo" in "algo/proto".
struct KeyPart {
  std::string name;  // in the key's pattern: "algo"
  std::string noun;  // in messages: "algorithm"
  std::vector<std::string> choices;
};

struct SchemaNode {
  std::string key;
  SchemaType type = SchemaType::kObject;
  bool required = false;
  std::string doc;
  // An optional key left out takes `default_value` (the struct's initializer) or, when there is
  // none, means what `absent` says.
  std::optional<SchemaScalar> default_value;
  std::string absent;

  // kInteger, kNumber, kSize: accepted range; `min_open` excludes `min` itself.
  std::optional<SchemaScalar> min, max;
  bool min_open = false;
  std::vector<std::string> choices;  // kChoice
  std::string pattern;               // kString: ECMAScript regex the whole value must match
  std::string pattern_doc;           // ... in words
  bool nonempty = false;             // kList: at least one entry; kObject: at least one key

  std::vector<SchemaNode> fields;          // kObject, kVariants (the tag)
  std::vector<SchemaNode> variants;        // kVariants: one kObject per tag value (its key)
  std::shared_ptr<const SchemaNode> item;  // kList, kMap
  std::vector<KeyPart> key_parts;          // kMap
  std::string key_separator;               // kMap with several parts
  std::string key_wildcard;                // kMap: a part matching every choice ("*")
  bool key_ignore_case = false;            // kMap

  // Where a checked value goes; `target` is what the enclosing node placed (the ScenarioSpec
  // for top-level keys) and `key` this key, or for a map's value the entry's canonical key.
  // Containers place their own target (a list's item appends an entry); scalars write.
  std::function<void*(void* target, const std::string& key)> place;
  std::function<void(void* target, const std::string& key, const SchemaScalar& value)> write;
};

// The whole file: a kObject whose place() is the ScenarioSpec itself.
const SchemaNode& scenario_schema();

}  // namespace sim
}  // namespace dynamiccl
