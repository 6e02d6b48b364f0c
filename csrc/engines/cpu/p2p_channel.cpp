#include <c10/util/Exception.h>

#include <stdexcept>
#include <string>

#include "engines/cpu/schedule.h"

namespace dynamiccl {

namespace {
// The tag on the wire also carries the message's size: a receive that expects another size than
// was sent (ranks that disagree on a call's size) never matches it, so it times out with an error
// instead of leaving a partial result. (The call's tag carries the schedule: cpu_engine.cpp.)
// The inner engine takes a non-negative int tag (ProcessGroupGloo rejects negative ones); ours
// are in [kFirstReservedTag, 2^31).
int wire_tag(uint32_t tag, const at::Tensor& t) {
  uint64_t h = (static_cast<uint64_t>(tag) << 32) ^ static_cast<uint64_t>(t.nbytes());
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  constexpr uint64_t kFirst = P2PChannel::kFirstReservedTag;
  return static_cast<int>(kFirst | (h & (kFirst - 1)));
}
}  // namespace

c10::intrusive_ptr<c10d::Work> P2PChannel::isend(at::Tensor& t, int dst, uint32_t tag) {
  std::vector<at::Tensor> v{t};
  return pg_->send(v, dst, wire_tag(tag, t));
}

c10::intrusive_ptr<c10d::Work> P2PChannel::irecv(at::Tensor& t, int src, uint32_t tag) {
  std::vector<at::Tensor> v{t};
  return pg_->recv(v, src, wire_tag(tag, t));
}

void P2PChannel::wait(const c10::intrusive_ptr<c10d::Work>& w) {
  if (!w) return;
  // Work::wait rethrows the inner engine's error, including its timeout.
  TORCH_CHECK(w->wait(timeout_), "dynamiccl P2P: transfer was aborted");
}

void rethrow_naming(const std::string& what) {
  try {
    throw;
  } catch (c10::Error& e) {
    e.add_context(what);
    throw;
  } catch (const std::exception& e) {
    // Gloo's own errors (a closed connection: gloo::IoException) reach Python as RuntimeError,
    // and so must they through us: same base class, context added.
    throw std::runtime_error(what + " failed: " + e.what());
  }
}

}  // namespace dynamiccl
