// How the dynamiccl backend answers every virtual of c10d::Backend, across the supported torch
// releases: the one table a reader (and the test) checks the class against.
//   ours       implemented here: the collectives we tune, the group's life cycle (split, merge,
//              reconfigure, abort, shutdown, timeouts), which must reach every engine and our own
//              state alike;
//   forwarded  handed unchanged to the engine of the call's device (the CUDA engine where a call
//              has no tensor and the group has one, else Gloo);
//   inherited  torch's own implementation is right as it is (it keeps the Backend object's state);
//   not offered  neither, with the reason: torch's default answer ("does not support") stands.
// tests/python/test_backend_surface.py reads the installed torch's Backend.hpp and fails on a
// virtual this table does not name, and on one it says we answer that the class does not
// override: a new torch release shows up as a failing test, not as a user's bug report.
#pragma once

#include <vector>

namespace dynamiccl {

enum class Answer { kOurs, kForwarded, kInherited, kNotOffered };
const char* answer_name(Answer a);  // "ours", "forwarded", "inherited", "not offered"

struct SurfaceEntry {
  const char* method;  // the virtual's name in c10d::Backend
  Answer answer;
  const char* how;  // what we do, or why it is not offered
};

const std::vector<SurfaceEntry>& backend_surface();

}  // namespace dynamiccl
