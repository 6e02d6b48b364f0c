#include "backend/hint_scope.h"

namespace dynamiccl {

namespace {
thread_local Hint tls_hint;
}

Hint& current_hint() { return tls_hint; }
void set_current_hint(const Hint& h) { tls_hint = h; }

}  // namespace dynamiccl
