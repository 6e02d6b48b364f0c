#include "backend/surface.h"

namespace dynamiccl {

const char* answer_name(Answer a) {
  switch (a) {
    case Answer::kOurs: return "ours";
    case Answer::kForwarded: return "forwarded";
    case Answer::kInherited: return "inherited";
    case Answer::kNotOffered: return "not offered";
  }
  return "?";
}

const std::vector<SurfaceEntry>& backend_surface() {
  constexpr Answer kOurs = Answer::kOurs;
  constexpr Answer kForwarded = Answer::kForwarded;
  constexpr Answer kInherited = Answer::kInherited;
  constexpr Answer kNotOffered = Answer::kNotOffered;
  static const std::vector<SurfaceEntry> table = {
      // The collectives: described, decided, issued on the engine of the tensors' device.
      {"broadcast", kOurs, "tuned"},
      {"allreduce", kOurs, "tuned"},
      {"allreduce_coalesced", kOurs, "tuned as one call on CPU"},
      {"reduce", kOurs, "tuned"},
      {"allgather", kOurs, "tuned"},
      {"_allgather_base", kOurs, "tuned"},
      {"all_gather_single", kOurs, "= _allgather_base (torch 2.14's name)"},
      {"allgather_coalesced", kOurs, "counted; the engine's own form"},
      {"allgather_into_tensor_coalesced", kOurs, "tuned as one call on CPU"},
      {"all_gather_single_coalesced", kOurs, "= allgather_into_tensor_coalesced"},
      {"gather", kOurs, "counted; the engine's algorithm"},
      {"scatter", kOurs, "counted; the engine's algorithm"},
      {"reduce_scatter", kOurs, "tuned"},
      {"_reduce_scatter_base", kOurs, "tuned"},
      {"reduce_scatter_single", kOurs, "= _reduce_scatter_base"},
      {"reduce_scatter_tensor_coalesced", kOurs, "tuned as one call on CPU"},
      {"reduce_scatter_single_coalesced", kOurs, "= reduce_scatter_tensor_coalesced"},
      {"alltoall_base", kOurs, "tuned (equal splits, CPU)"},
      {"all_to_all_single", kOurs, "= alltoall_base"},
      {"alltoall", kOurs, "counted; Gloo gets its single-tensor form"},
      {"send", kOurs, "counted; tags from 2^30 up are the group's own"},
      {"recv", kOurs, "counted; tags from 2^30 up are the group's own"},
      {"recvAnysource", kOurs, "counted"},
      {"barrier", kOurs, "counted; on Gloo, which blocks the host"},
      {"monitoredBarrier", kOurs, "Gloo's, which names the ranks that did not arrive"},
      {"allreduce_sparse", kForwarded, "sparse tensors are not tuned"},
      {"gather_single", kForwarded, "not tuned"},
      {"gather_into_tensor", kForwarded, "not tuned"},
      // Coalescing and sequence numbers.
      {"supportsCoalescing", kOurs, "true"},
      {"startCoalescing", kOurs, "CPU calls kept, NCCL's window opened on its first call"},
      {"endCoalescing", kOurs, "one Work for the window"},
      {"setSequenceNumberForGroup", kOurs, "no-op: our counters start at 0 on every rank"},
      {"getSequenceNumberForGroup", kOurs, "the group's collective count"},
      // What the group is, and its life cycle.
      {"getBackendName", kOurs, "\"dynamiccl\""},
      {"getBackendOptions", kOurs, "timeout, name and description"},
      {"supportsSplitting", kOurs, "a child is made as every group is"},
      {"split", kOurs, "a child is made as every group is (its own engines and learner)"},
      {"merge", kOurs, "Gloo's merge, wrapped as a new group; an engine without one raises"},
      {"supportsReconfigure", kOurs, "where every engine of the group supports it"},
      {"get_reconfigure_handle", kOurs, "Gloo's handle, and the CUDA engine's beside it"},
      {"reconfigure", kOurs, "every engine, then learning restarts on the new membership"},
      {"setTimeout", kOurs, "every engine, our schedules and rounds"},
      {"addEphemeralTimeout", kForwarded, "to every engine"},
      {"setGroupUid", kOurs, "the group's and every engine's"},
      {"getBoundDeviceId", kInherited, "the group's, which setBoundDeviceId keeps"},
      {"setBoundDeviceId", kOurs, "the group's and the CUDA engine's"},
      {"eagerConnectSingleDevice", kOurs, "the CUDA engine connects; its tuner binds"},
      {"isInitialized", kForwarded, "the CUDA engine's (lazy communicators)"},
      {"getError", kOurs, "the engines' first error, or COMM_ERROR once the ranks disagreed"},
      {"abort", kOurs, "every engine; learning stops until a reconfigure"},
      {"shutdown", kOurs, "every engine; what was learned stays readable"},
      {"waitForPendingWorks", kForwarded, "to every engine that has it"},
      {"enableCollectivesTiming", kForwarded, "to every engine"},
      {"registerOnCompletionHook", kForwarded, "the CUDA engine's"},
      {"supportsAbortHooks", kForwarded, "the CUDA engine's"},
      {"registerAbortHook", kForwarded, "the CUDA engine's"},
      {"unregisterAbortHook", kForwarded, "the CUDA engine's"},
      {"supportsCompletionHooks", kForwarded, "the CUDA engine's: its calls are the ones reported"},
      {"registerCompletionHook", kForwarded, "the CUDA engine's"},
      {"unregisterCompletionHook", kForwarded, "the CUDA engine's"},
      {"supportsTimeEstimation", kForwarded, "the CUDA engine's"},
      {"startTimeEstimate", kOurs,
       "the CUDA engine's, and calls pass through undecided and uncounted until the end"},
      {"endTimeEstimate", kOurs, "the CUDA engine's estimate"},
      {"supportsWindow", kForwarded, "the CUDA engine's (one-sided ops are not tuned)"},
      {"new_window", kForwarded, "the CUDA engine's"},
      {"getMemAllocator", kForwarded, "the CUDA engine's (NCCL symmetric memory)"},
      {"allocateTensor", kForwarded, "the engine of the tensor's device"},
      {"supportsTensorAlloc", kForwarded, "the CUDA engine's"},
      {"suspend", kForwarded, "the CUDA engine's"},
      {"resume", kForwarded, "the CUDA engine's"},
      {"getMemoryStats", kForwarded, "the CUDA engine's"},
      {"supportsShrinking", kNotOffered,
       "only NCCL shrinks (nccl2, NCCL >= 2.27), Gloo does not; reconfigure reaches the same "
       "survivors on both"},
      {"shrink", kNotOffered, "see supportsShrinking"},
  };
  return table;
}

}  // namespace dynamiccl
