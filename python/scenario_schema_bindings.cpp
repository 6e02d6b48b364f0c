// Python access to the scenario schema (csrc/sim/scenario_schema.h): the table as nested dicts,
// which dynamiccl_pg/sim/scenario.py walks to validate a file, and the walk that fills a
// ScenarioSpec from the validated dict through the table's setters.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "sim/scenario_schema.h"
#include "sim/scenario_spec.h"

namespace py = pybind11;

namespace dynamiccl {

namespace {

using sim::SchemaNode;
using sim::SchemaScalar;
using sim::SchemaType;

py::object to_py(const SchemaScalar& v) {
  return std::visit([](const auto& x) -> py::object { return py::cast(x); }, v);
}

SchemaScalar from_py(py::handle v, const std::string& key) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>();
  if (py::isinstance<py::int_>(v)) return v.cast<int64_t>();
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  throw py::value_error("spec_from_dict: '" + key + "' is not a scalar (validate it first)");
}

py::dict schema_dict(const SchemaNode& n) {
  py::dict d;
  d["key"] = n.key;
  d["type"] = sim::schema_type_name(n.type);
  d["required"] = n.required;
  d["doc"] = n.doc;
  if (n.default_value) d["default"] = to_py(*n.default_value);
  if (!n.absent.empty()) d["absent"] = n.absent;
  if (n.min) d["min"] = to_py(*n.min);
  if (n.max) d["max"] = to_py(*n.max);
  d["min_open"] = n.min_open;
  if (!n.choices.empty()) d["choices"] = n.choices;
  if (!n.pattern.empty()) {
    d["pattern"] = n.pattern;
    d["pattern_doc"] = n.pattern_doc;
  }
  d["nonempty"] = n.nonempty;
  py::list fields, variants;
  for (const SchemaNode& f : n.fields) fields.append(schema_dict(f));
  for (const SchemaNode& v : n.variants) variants.append(schema_dict(v));
  d["fields"] = fields;
  d["variants"] = variants;
  if (n.item) d["item"] = schema_dict(*n.item);
  if (n.type == SchemaType::kMap) {
    py::list parts;
    for (const sim::KeyPart& p : n.key_parts)
      parts.append(py::dict(py::arg("name") = p.name, py::arg("noun") = p.noun,
                            py::arg("choices") = p.choices));
    d["key_parts"] = parts;
    d["key_separator"] = n.key_separator;
    d["key_wildcard"] = n.key_wildcard;
    d["key_ignore_case"] = n.key_ignore_case;
  }
  return d;
}

py::dict as_dict(py::handle value, const std::string& key) {
  if (!py::isinstance<py::dict>(value))
    throw py::value_error("spec_from_dict: '" + key + "' is not an object (validate it first)");
  return py::reinterpret_borrow<py::dict>(value);
}

void fill(const SchemaNode& node, py::handle value, void* target, const std::string& key);

void fill_fields(const std::vector<SchemaNode>& fields, const py::dict& d, void* target) {
  for (const SchemaNode& f : fields)
    if (d.contains(f.key)) fill(f, d[py::str(f.key)], target, f.key);
}

// Writes `value` (validated against `node`) where the table says; a container first places
// its own target inside `target`.
void fill(const SchemaNode& node, py::handle value, void* target, const std::string& key) {
  void* own = node.place ? node.place(target, key) : target;
  switch (node.type) {
    case SchemaType::kObject: fill_fields(node.fields, as_dict(value, key), own); return;
    case SchemaType::kVariants: {
      const py::dict d = as_dict(value, key);
      const SchemaNode& tag = node.fields[0];
      const std::string kind = d.contains(tag.key) ? d[py::str(tag.key)].cast<std::string>()
                                                   : std::get<std::string>(*tag.default_value);
      fill_fields(node.fields, d, own);
      for (const SchemaNode& v : node.variants)
        if (v.key == kind) fill_fields(v.fields, d, own);
      return;
    }
    case SchemaType::kList:
      for (py::handle entry : value) fill(*node.item, entry, own, "");
      return;
    case SchemaType::kMap:
      for (auto [k, v] : as_dict(value, key)) fill(*node.item, v, own, k.cast<std::string>());
      return;
    default: node.write(target, key, from_py(value, key));
  }
}

}  // namespace

void bind_scenario_schema(py::module_& m) {
  // Opaque: filled by spec_from_dict, read by run() and friends.
  py::class_<sim::ScenarioSpec>(m, "ScenarioSpec");
  m.def(
      "scenario_schema", [] { return schema_dict(sim::scenario_schema()); },
      "The scenario file format as nested dicts (csrc/sim/scenario_schema.cpp).");
  m.def(
      "spec_from_dict",
      [](const py::dict& validated) {
        sim::ScenarioSpec spec;
        fill(sim::scenario_schema(), validated, &spec, "");
        return spec;
      },
      py::arg("validated"),
      "A ScenarioSpec from a scenario dict that passed dynamiccl_pg.sim.scenario's checks.");
  m.def(
      "spec_problems",
      [](const sim::ScenarioSpec& spec) {
        std::vector<std::pair<std::string, std::string>> out;
        for (const sim::SpecProblem& p : sim::spec_problems(spec))
          out.emplace_back(p.path, p.message);
        return out;
      },
      py::arg("spec"), "Broken rules that relate several keys: [(key path, what is wrong)].");
}

}  // namespace dynamiccl
