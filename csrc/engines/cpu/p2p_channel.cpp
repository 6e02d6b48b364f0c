#include <c10/util/Exception.h>

#include "engines/cpu/schedule.h"

namespace dynamiccl {

namespace {
// The inner engine takes a non-negative int tag (ProcessGroupGloo rejects negative ones).
int wire_tag(uint32_t tag) { return static_cast<int>(tag & 0x7fffffffu); }
}  // namespace

c10::intrusive_ptr<c10d::Work> P2PChannel::isend(at::Tensor& t, int dst, uint32_t tag) {
  std::vector<at::Tensor> v{t};
  return pg_->send(v, dst, wire_tag(tag));
}

c10::intrusive_ptr<c10d::Work> P2PChannel::irecv(at::Tensor& t, int src, uint32_t tag) {
  std::vector<at::Tensor> v{t};
  return pg_->recv(v, src, wire_tag(tag));
}

void P2PChannel::wait(const c10::intrusive_ptr<c10d::Work>& w) {
  if (!w) return;
  // Work::wait rethrows the inner engine's error, including its timeout.
  TORCH_CHECK(w->wait(timeout_), "dynamiccl P2P: transfer was aborted");
}

}  // namespace dynamiccl
