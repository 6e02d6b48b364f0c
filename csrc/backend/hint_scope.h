// The hint in scope on this thread (set by dynamiccl_pg.hint(...) and framework integration).
// Thread-local because a hint describes the call the *calling thread* is about to issue: DDP's
// comm hook runs on the autograd thread, the training loop on the main thread.
#pragma once

#include "core/types.h"

namespace dynamiccl {

Hint& current_hint();  // this thread's hint (all fields unset by default)
void set_current_hint(const Hint& h);

// The C++ form of `with dynamiccl_pg.hint(...)`: `h` for this scope, the outer hint after it.
class ScopedHint {
 public:
  explicit ScopedHint(const Hint& h) : outer_(current_hint()) { set_current_hint(h); }
  ~ScopedHint() { set_current_hint(outer_); }
  ScopedHint(const ScopedHint&) = delete;
  ScopedHint& operator=(const ScopedHint&) = delete;

 private:
  Hint outer_;
};

}  // namespace dynamiccl
