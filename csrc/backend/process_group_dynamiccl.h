// ProcessGroupDynamicCCL: the c10d::Backend behind init_process_group(backend="dynamiccl").
//
// A decorator over real engines (built by the Python creator): ProcessGroupGloo for CPU tensors
// and ProcessGroupNCCL for CUDA tensors, plus a second Gloo group for the control plane and our
// own CPU schedules. Every collective takes one path (DESIGN.md §2):
//   context -> policy decision -> issue on the engine (native, our schedule, or NCCL with the
//   decision published to the tuner plugin) -> wrapped Work -> cost agreed by consensus.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/config.h"
#include "backend/consensus.h"
#include "backend/cpu_algorithms.h"
#include "backend/schedule_worker.h"
#include "backend/telemetry.h"
#include "policy/learner.h"

namespace dynamiccl {

class ProcessGroupDynamicCCL : public c10d::Backend {
 public:
  struct Engines {
    c10::intrusive_ptr<c10d::Backend> gloo;     // CPU collectives and the user's CPU p2p
    c10::intrusive_ptr<c10d::Backend> control;  // consensus all-reduce and our schedules' p2p
    c10::intrusive_ptr<c10d::Backend> nccl;     // CUDA collectives; null without CUDA
  };

  ProcessGroupDynamicCCL(int rank, int size, Engines engines, BackendConfig config,
                         std::chrono::milliseconds timeout);
  ~ProcessGroupDynamicCCL() override;

  const std::string getBackendName() const override { return "dynamiccl"; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  uint64_t getSequenceNumberForGroup() override { return seq_collective_; }
  void setSequenceNumberForGroup() override {}  // our counters start at 0 on every rank
  void shutdown() override;
  void abort() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors,
                                               int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  // --- Introspection and control (bound to Python) ---
  Mode mode() const { return config_.mode; }
  const BackendConfig& config() const { return config_; }
  Role group_role();  // resolved from the group description at first use
  // Learner of an engine (0 CPU, 1 NCCL); null until that engine carried a learned call.
  const Learner* learner(int engine) const { return learners_[engine].get(); }
  Learner* mutable_learner(int engine);  // creates it (restore before the first call)
  const ArmCatalog* catalog(int engine) const { return catalogs_[engine].get(); }
  const Telemetry& telemetry() const { return telemetry_; }
  uint64_t learned_calls() const { return consensus_.learned_calls(); }
  uint64_t rounds_applied() const { return consensus_.rounds_applied(); }
  // NCCL tuning is live: the engine exists, tuning was not stepped aside, every rank's NCCL
  // loaded the plugin (known after the first NCCL call).
  bool nccl_tuning_active() const {
    return engines_.nccl && config_.nccl_tuning && nccl_plugin_active_;
  }
  void add_step_time(double us) { consensus_.add_step_time(us); }
  void add_loss(double loss) { consensus_.add_loss(loss); }

 private:
  // What one call needs besides its tensors: how to issue it natively on an engine, and (CPU
  // only) how to run it with one of our schedules.
  struct Call;
  c10::intrusive_ptr<c10d::Work> dispatch(Call& call);
  c10::intrusive_ptr<c10d::Work> issue_custom_cpu(Call& call, const Action& action, bool learned,
                                                  uint64_t rec_index, SummaryCell* cell,
                                                  int64_t start, TraceEntry* trace);
  // A CPU call's end: its cost for the learner (learned calls) or its duration in the local
  // summary, and its trace entry.
  void record_cpu_end(bool learned, uint64_t rec_index, SummaryCell* cell, int64_t start,
                      TraceEntry* trace);
  c10::intrusive_ptr<c10d::Backend>& engine_for(const at::Tensor& t, int* engine);
  void ensure_learning_engine(int engine);
  void agree_on_nccl_plugin();
  uint32_t next_schedule_tag() { return schedule_tag_++; }

  Engines engines_;
  BackendConfig config_;
  std::chrono::milliseconds timeout_;

  Role group_role_ = Role::kDefault;
  bool group_role_resolved_ = false;
  uint64_t seq_collective_ = 0;
  uint64_t seq_p2p_ = 0;
  uint32_t schedule_tag_ = 0;

  std::array<std::shared_ptr<const ArmCatalog>, kNumEngines> catalogs_;
  std::array<std::unique_ptr<Learner>, kNumEngines> learners_;
  // Per engine and op: -1 not learned (one arm only), else -2 learned, or >= 0 a forced arm.
  std::array<std::array<int, kNumOps>, kNumEngines> op_plan_{};
  Consensus consensus_;
  ScheduleWorker worker_;
  std::unique_ptr<P2PChannel> channel_;
  Telemetry telemetry_;

  // Coalescing window (startCoalescing .. endCoalescing).
  bool coalescing_ = false;
  bool nccl_coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_works_;
  bool shut_down_ = false;
  bool nccl_plugin_checked_ = false;  // the first NCCL call agreed on whether NCCL loaded it
  bool nccl_plugin_active_ = true;
};

}  // namespace dynamiccl
