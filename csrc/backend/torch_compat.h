// What differs in c10d's Backend API between the supported torch releases (the range is stated in
// dynamiccl_pg/torch_support.py), as named compile-time feature checks. Nothing else in the
// backend asks which torch it is built against.
#pragma once

#include <torch/headeronly/version.h>

#define DYNAMICCL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||            \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// torch 2.14 names the flat collectives as torchcomms does (all_gather_single,
// reduce_scatter_single, their _coalesced forms, all_to_all_single) and keeps the older names
// (_allgather_base, ...) as forwarding aliases. The backend implements the older names, which
// every supported torch has, and on a torch with the new names also overrides those, so that a
// call never depends on Backend's forwarding between the two.
#define DYNAMICCL_C10D_HAS_SINGLE_NAMES DYNAMICCL_TORCH_AT_LEAST(2, 14)

// The rest of c10d::Backend's surface, by the release that added it (backend/surface.h says how
// the backend answers each virtual). Reconfigure, windows and abort hooks (2.14) come with
// torch's own feature macros: C10D_BACKEND_HAS_RECONFIGURE, C10D_BACKEND_HAS_WINDOW,
// C10D_BACKEND_HAS_HOOKS.
//   2.12: suspend, resume, getMemoryStats (engine memory offload).
#define DYNAMICCL_C10D_HAS_MEMORY_OFFLOAD DYNAMICCL_TORCH_AT_LEAST(2, 12)
//   2.14: gather_single, gather_into_tensor, addEphemeralTimeout, get/setBoundDeviceId as
//   virtuals, and Backend::Options::clone() (a copy that keeps an engine's own options type).
#define DYNAMICCL_C10D_HAS_2_14_SURFACE DYNAMICCL_TORCH_AT_LEAST(2, 14)
//   2.15: completion hooks, supportsAbortHooks, start/endTimeEstimate, isInitialized.
#define DYNAMICCL_C10D_HAS_2_15_SURFACE DYNAMICCL_TORCH_AT_LEAST(2, 15)

// The overrides of the canonical names, each forwarding to the implementation of the older name.
#if DYNAMICCL_C10D_HAS_SINGLE_NAMES
#define DYNAMICCL_C10D_SINGLE_NAME_OVERRIDES                                                   \
  c10::intrusive_ptr<c10d::Work> all_gather_single(at::Tensor& out, at::Tensor& in,            \
                                                   const c10d::AllgatherOptions& o) override { \
    return _allgather_base(out, in, o);                                                        \
  }                                                                                            \
  c10::intrusive_ptr<c10d::Work> all_gather_single_coalesced(std::vector<at::Tensor>& outs,    \
                                                             std::vector<at::Tensor>& ins,     \
                                                             const c10d::AllgatherOptions& o)  \
      override {                                                                               \
    return allgather_into_tensor_coalesced(outs, ins, o);                                      \
  }                                                                                            \
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single(                                        \
      at::Tensor& out, at::Tensor& in, const c10d::ReduceScatterOptions& o) override {         \
    return _reduce_scatter_base(out, in, o);                                                   \
  }                                                                                            \
  c10::intrusive_ptr<c10d::Work> reduce_scatter_single_coalesced(                              \
      std::vector<at::Tensor>& outs, std::vector<at::Tensor>& ins,                             \
      const c10d::ReduceScatterOptions& o) override {                                          \
    return reduce_scatter_tensor_coalesced(outs, ins, o);                                      \
  }                                                                                            \
  c10::intrusive_ptr<c10d::Work> all_to_all_single(at::Tensor& out, at::Tensor& in,            \
                                                   std::vector<int64_t>& out_splits,           \
                                                   std::vector<int64_t>& in_splits,            \
                                                   const c10d::AllToAllOptions& o) override {  \
    return alltoall_base(out, in, out_splits, in_splits, o);                                   \
  }
#else
#define DYNAMICCL_C10D_SINGLE_NAME_OVERRIDES
#endif
