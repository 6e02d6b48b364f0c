// ProcessGroupDynamicCCL: the c10d::Backend behind init_process_group(backend="dynamiccl").
//
// A decorator over the engines torch would have given the user (built by the Python creator,
// dynamiccl_pg/engines.py): Gloo for CPU tensors, and for CUDA tensors whatever `nccl` means in
// the installed torch (nccl2 on 2.15, ProcessGroupNCCL before). Our CPU schedules and the
// consensus rounds travel on the Gloo engine's point-to-point operations, so a group opens no
// connections beyond its engines'. Every collective method validates its arguments, describes
// the call (Call)
// and hands it to dispatch(), which runs the same steps for all of them (docs/architecture.md,
// "The path of one collective"):
//   route (which engine) -> decide (the policy's arm) -> issue (on the engine) ->
//   attach completion (the wrapped Work, timing) -> finish (consensus round, coalescing).
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/config.h"
#include "backend/consensus.h"
#include "backend/telemetry.h"
#include "backend/torch_compat.h"
#include "engines/cpu/cpu_engine.h"
#include "engines/nccl/publish.h"
#include "policy/arm_catalog.h"
#include "policy/learner.h"

namespace dynamiccl {

class DynamicWork;

class ProcessGroupDynamicCCL : public c10d::Backend {
 public:
  struct Engines {
    // CPU collectives, the user's CPU p2p, our schedules' p2p and the consensus rounds.
    c10::intrusive_ptr<c10d::Backend> gloo;
    c10::intrusive_ptr<c10d::Backend> nccl;  // CUDA collectives; null without CUDA
  };

  // What split() asks of the creator: a child group of `ranks` (this group's numbering, in the
  // child's order) over `store`, with the options torch hands a child.
  struct SplitRequest {
    c10::intrusive_ptr<c10d::Store> store;
    std::vector<int> ranks;
    int parent_rank = 0;
    std::chrono::milliseconds timeout;
    std::string group_name, group_desc;
  };
  // What merge() asks of it: a group over the engines that merged (the CUDA one null where the
  // group has none), this rank's place in it, and the options torch hands it.
  struct MergeRequest {
    c10::intrusive_ptr<c10d::Store> store;
    c10::intrusive_ptr<c10d::Backend> gloo, cuda;
    int rank = 0, size = 0;
    std::chrono::milliseconds timeout;
    std::string group_name, group_desc;
  };
  // The creator's part in what the group becomes (the Python creator's: a child or a merged group
  // is built as every group is, with its own engines, learner and settings agreement; a new
  // membership agrees on the settings before it learns).
  struct Factories {
    std::function<c10::intrusive_ptr<c10d::Backend>(const SplitRequest&)> split;
    std::function<c10::intrusive_ptr<c10d::Backend>(const MergeRequest&)> merge;
    // After a reconfigure: (uuid, rank, size) of the new membership; throws when its members'
    // settings differ.
    std::function<void(int64_t, int, int)> membership;
  };

  // `nccl_channel`: the decision channel the creator opened for the NCCL engine (0: none); the
  // group closes it.
  ProcessGroupDynamicCCL(int rank, int size, Engines engines, BackendConfig config,
                         std::chrono::milliseconds timeout, int nccl_channel = 0);
  ~ProcessGroupDynamicCCL() override;

  const std::string getBackendName() const override { return "dynamiccl"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  void set_factories(Factories factories) { factories_ = std::move(factories); }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  uint64_t getSequenceNumberForGroup() override { return seq_collective_; }
  void setSequenceNumberForGroup() override {}  // our counters start at 0 on every rank

  // --- The rest of c10d::Backend (process_group_api.cpp; backend/surface.h says how each virtual
  // is answered) ---
  // torch.distributed.split_group (and what splits through it, e.g. DeviceMesh's eager init).
  bool supportsSplitting() const override { return static_cast<bool>(factories_.split); }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  c10::intrusive_ptr<c10d::Backend> merge(const c10::intrusive_ptr<c10d::Store>& store,
                                          const c10::intrusive_ptr<Options>& opts, const int& rank,
                                          const int& size) override;
  void eagerConnectSingleDevice(at::Device device) override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void setGroupUid(const std::string& pg_uid) override;
  c10d::ErrorType getError() override;
  void shutdown() override;
  void abort() override;
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                  const c10d::AllreduceOptions& opts) override;
  void registerOnCompletionHook(
      std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) override;
  void waitForPendingWorks() override;
  void enableCollectivesTiming() override;
  bool supportsTimeEstimation() const override;
  std::shared_ptr<c10::Allocator> getMemAllocator() override;
  at::Tensor allocateTensor(long size, at::TensorOptions options) override;
  bool supportsTensorAlloc(c10::DeviceIndex device_index) override;
#if DYNAMICCL_C10D_HAS_MEMORY_OFFLOAD
  void suspend() override;
  void resume() override;
  std::unordered_map<std::string, uint64_t> getMemoryStats() override;
#endif
#if DYNAMICCL_C10D_HAS_2_14_SURFACE
  void addEphemeralTimeout(const std::chrono::milliseconds& timeout) override;
  void setBoundDeviceId(std::optional<at::Device> device) override;
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
                                               const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather_into_tensor(at::Tensor& output, at::Tensor& input,
                                                    const c10d::GatherOptions& opts) override;
#endif
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  bool supportsReconfigure() const override;
  c10d::ReconfigureHandle get_reconfigure_handle() const override;
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif
#ifdef C10D_BACKEND_HAS_WINDOW
  bool supportsWindow() const override;
  c10::intrusive_ptr<c10d::Window> new_window(const std::optional<at::Tensor>& tensor) override;
#endif
#ifdef C10D_BACKEND_HAS_HOOKS
  void registerAbortHook(int64_t hook_id, c10d::AbortHook hook) override;
  void unregisterAbortHook(int64_t hook_id) override;
#endif
#if DYNAMICCL_C10D_HAS_2_15_SURFACE
  bool supportsAbortHooks() const override;
  bool supportsCompletionHooks() const override;
  void registerCompletionHook(int64_t hook_id, c10d::CompletionHook hook) override;
  void unregisterCompletionHook(int64_t hook_id) override;
  bool isInitialized() override;
  void startTimeEstimate() override;
  float endTimeEstimate() override;
#endif

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
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
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
  DYNAMICCL_C10D_SINGLE_NAME_OVERRIDES
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  // --- Introspection and control (bound to Python) ---
  Mode mode() const { return config_.mode; }
  bool is_shut_down() const { return shut_down_; }  // destroyed: telemetry only, no engines
  const BackendConfig& config() const { return config_; }
  Role group_role();  // from the group description (read at first use)
  // Whether a tensor's calls run on the CPU engine: CPU tensors, unless NCCL is emulated on them.
  bool cpu_engine(const at::Tensor& t) const {
    return t.device().is_cpu() && !config_.nccl_emulated;
  }
  // The learner of an engine; null until that engine carried a learned call.
  const Learner* learner(EngineKind engine) const { return learners_[index(engine)].get(); }
  Learner* mutable_learner(EngineKind engine);  // creates it (restore before the first call)
  // The nodes the group spans (as described), and the learned prior's file ("" = analytic).
  int nodes() const { return std::clamp(config_.nccl_group.nodes, 1, size_); }
  const std::string& prior_path() const { return config_.prior_path; }
  const ArmCatalog* catalog(EngineKind engine) const { return catalogs_[index(engine)].get(); }
  const Telemetry& telemetry() const { return telemetry_; }
  uint64_t learned_calls() const { return consensus_->learned_calls(); }
  uint64_t steps() { return consensus_->steps_ended(); }
  uint64_t rounds_applied() const { return consensus_->rounds_applied(); }
  uint64_t rounds_started() const { return consensus_->rounds_started(); }
  double round_cost_us(EngineKind e) const { return consensus_->round_cost_us(e); }
  // NCCL tuning is live: the engine exists, tuning was not stepped aside, every rank's NCCL
  // loaded the plugin (known after the first NCCL call).
  bool nccl_tuning_active() const {
    return engines_.nccl && config_.nccl_tuning && nccl_plugin_active_;
  }
  // dynamiccl_pg.step(): the training step ends here, unless the framework marks steps itself
  // (DDP's last bucket does); the same call index on every rank either way.
  void end_step_from_user() {
    if (rounds_are_steps()) steps_marked();
    user_marks_steps_ = true;
    if (!framework_marks_steps_) end_step();
  }
  void add_loss(double loss) { consensus_->add_loss(loss); }

 private:
  // One call, as its collective method describes it (defined in the .cpp).
  struct Call;
  // How an op's calls are decided on an engine.
  struct OpPlan {
    enum Kind : uint8_t { kNative, kLearned, kForced } kind = kNative;
    uint16_t forced_arm = kDefaultArm;
  };
  using NativeFn = c10::function_ref<c10::intrusive_ptr<c10d::Work>(c10d::Backend&)>;
  // The engine a call runs on and what its engine gives back.
  struct Issued {
    c10::intrusive_ptr<c10d::Work> inner;            // the engine's Work (null: our schedule)
    c10::intrusive_ptr<c10::ivalue::Future> future;  // the Work's future (null: none)
    std::function<void()> rescale_at_wait;  // CPU, no future: the AVG rescale, run at wait()
    bool nccl_unavailable = false;          // NCCL could not apply the published arm on this rank
    int nccl_channels = 0;        // measured calls: the channels NCCL ran it with (0: not said)
    bool nccl_check = false;      // the call checked the plugin (agree_on_nccl_plugin follows)
    bool nccl_delivered = false;  // ... and NCCL consulted it on the group's channel
  };

  static int index(EngineKind e) { return static_cast<int>(e); }
  c10::intrusive_ptr<c10d::Work> dispatch(Call& call, NativeFn native);
  EngineKind route(const Call& call);
  CallRecord decide(const Call& call, EngineKind engine);
  Issued issue(const Call& call, const CallRecord& rec, NativeFn native);
  // Describing a call, by the shape of its arguments (see the .cpp).
  Call one_tensor_call(OpKind op, c10d::OpType type, const char* title,
                       std::vector<at::Tensor>& tensors);
  Call flat_pair_call(OpKind op, c10d::OpType type, const char* title, at::Tensor& output,
                      at::Tensor& input);
  Call coalesced_call(OpKind op, const char* title, std::vector<at::Tensor>& outputs,
                      std::vector<at::Tensor>& inputs, const c10d::ReduceOp* reduce_op = nullptr);
  void add_flat_parts(Call& c, std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs);
  void set_reduction(Call& c, const c10d::ReduceOp& op, c10::ArrayRef<at::Tensor> rescaled);
  template <typename Opts>
  void prepare_engine_options(Call& c, Opts& engine_opts);
  template <typename PerPair>
  c10::intrusive_ptr<c10d::Work> one_call_per_pair(std::vector<at::Tensor>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   PerPair per_pair);
  c10::intrusive_ptr<c10d::Work> alltoall_list_on_gloo(c10d::Backend& gloo,
                                                       std::vector<at::Tensor>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllToAllOptions& opts);
  c10::intrusive_ptr<c10d::Work> attach_completion(const Call& call, const CallRecord& rec,
                                                   Issued&& issued);
  void finish(const Call& call, const CallRecord& rec, const c10::intrusive_ptr<c10d::Work>& w,
              bool nccl_check, bool nccl_delivered);
  // The end of a call whose completion is observed locally (CPU).
  void call_done(const CallTiming& timing, int64_t end_ns);

  void check_call_agrees(const Call& call);  // DYNAMICCL_CHECK: the ranks issue the same call
  RoundTransport rounds_on_cpu_engine();
  void ensure_learner(EngineKind engine);
  void resolve_forced_arms();
  void use_learned_prior();
  void apply_test_arm_effects();  // DYNAMICCL_TEST_SLOW_ARM, DYNAMICCL_TEST_BUSY_ARM
  int test_schedule(const BackendConfig::TestArmEffect& effect, const char* var);  // -1: none
  // The first NCCL collective NCCL's tuner sees as one call: every rank agrees whether the
  // plugin was loaded and consulted on the group's channel for it.
  void agree_on_nccl_plugin(bool delivered);
  // The learning machinery, fresh (our schedules' engine, consensus, plans; learners are made at
  // first use), the same on every rank: at creation and after a reconfigure. `connected`: the
  // engines can carry calls, else calls pass through until a reconfigure; `warm`: our schedules'
  // connections are new (CpuEngine::warm_connections).
  void start_learning(bool connected, bool warm);
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  void reconfigure_engines(const c10d::ReconfigureOptions& opts,
                           std::vector<c10::intrusive_ptr<c10d::Work>>& works);
#endif

  // The engine of a call without tensors (the CUDA one where the group has one), and of a tensor.
  c10d::Backend& api_engine(const char* what) const;
  c10d::Backend& engine_of(const at::Tensor& t, const char* what) const;
  // Lets our schedules and the round in flight go (they may wait on a rank that is gone); calls
  // pass through until start_learning.
  void stop_learning();

  Engines engines_;
  Factories factories_;
  BackendConfig config_;
  std::chrono::milliseconds timeout_;

  // torch names and describes a group after its creator returns: both are read at first use.
  void read_group_identity();
  bool group_identity_read_ = false;
  Role group_role_ = Role::kDefault;
  bool framework_marks_steps_ = false;  // a call carrying is_last=1 has closed a step
  bool user_marks_steps_ = false;       // dynamiccl_pg.step() was called
  bool step_end_pending_ = false;       // ... which ends at the next collective
  // Until the framework or the user marks a step, each consensus round is one: what a loop of
  // calls pays is windows of calls, which a call's own duration does not follow on a CPU whose
  // cores are shared (policy/learner.h, StepSource).
  bool rounds_are_steps() const { return !framework_marks_steps_ && !user_marks_steps_; }
  void steps_marked();  // the learners' steps are marked ones from now on
  void end_step();      // learners and consensus: a step boundary
  uint64_t seq_collective_ = 0;
  uint64_t seq_p2p_ = 0;

  std::array<std::shared_ptr<const ArmCatalog>, kNumEngines> catalogs_;
  std::array<std::unique_ptr<Learner>, kNumEngines> learners_;
  std::array<std::array<OpPlan, kNumOps>, kNumEngines> plans_{};
  std::unique_ptr<CpuEngine> cpu_;
  std::unique_ptr<Consensus> consensus_;  // its rounds ride on cpu_
  Telemetry telemetry_;
  NcclChannel nccl_channel_;

  // Coalescing window (startCoalescing .. endCoalescing).
  bool coalescing_ = false;
  bool nccl_coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_works_;
  bool shut_down_ = false;
  // Calls pass through undecided and uncounted: the engines await their first reconfigure, or
  // were aborted (learning restarts at the next reconfigure).
  bool suspended_ = false;
  bool estimating_ = false;   // the CUDA engine estimates times: calls pass through untouched
  bool nccl_timing_ = false;  // the CUDA engine was asked to time its calls
  // The first tunable NCCL call agreed on whether NCCL loaded the plugin and consulted it on the
  // group's channel; until then NCCL calls run natively.
  bool nccl_plugin_checked_ = false;
  bool nccl_plugin_active_ = true;
};

}  // namespace dynamiccl
