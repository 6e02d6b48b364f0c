// An emulated NCCL: a host-only stand-in for torch's NCCL engines that behaves as NCCL 2.28, 2.30
// or 2.32 does towards our tuner plugin, so that the backend's NCCL branch runs end to end
// without a GPU (DYNAMICCL_EMULATE_NCCL=<scenario.json>). Like ProcessGroupNCCL it creates its
// communicator (and so inits the tuner) at its first collective. Per collective it builds NCCL's
// cost table from NCCL's cost model of the emulated communicator (nccl_model/), lets the plugin
// it loaded as NCCL does (tuner_loader.h) adjust it, on the calling thread or, for a non-blocking
// communicator, on a thread of its own, picks the cheapest entry and the channel cap as NCCL
// does, moves the data through Gloo (results are exact), and reports through the Work's
// getDuration() — the timing path the backend reads for NCCL, on once enableCollectivesTiming()
// was called, as in torch's engines — what the scenario's truth says the chosen algorithm,
// protocol and channels cost, with noise. It records what it ran.
//
// Tests can ask one rank's emulated NCCL not to load the plugin, or to mark pairs unavailable.
// NCCL_ALGO / NCCL_PROTO restrict the table as in NCCL.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engines/emulated_nccl/tuner_loader.h"
#include "truth/rng.h"
#include "truth/truth.h"
#include "truth/truth_spec.h"

namespace dynamiccl {
namespace emulated_nccl {

struct EmulationConfig {
  truth::ClusterTruth cluster;  // the cluster (topology), the truth, the noise, the seed
  nccl::GroupShape shape;       // this communicator on that cluster
  uint64_t comm_id = 0;         // the same on every rank of the communicator
  NcclRelease release = NcclRelease::k2_28;  // how it treats the tuner (ABI v5, or v6 + chunks)
  std::string tuner_plugin;                  // NCCL_TUNER_PLUGIN ("" = none)
  std::string nccl_algo;                     // NCCL_ALGO as the user set it ("" = unset)
  std::string nccl_proto;                    // NCCL_PROTO
  bool skip_plugin = false;                  // tests: this rank's NCCL does not load the plugin
  bool nonblocking = false;  // the tuner is called on NCCL's own thread, not the caller's
  std::vector<std::pair<int, int>> unavailable;  // tests: (algo, proto) unavailable on this rank
};

// One collective as the emulated NCCL ran it.
struct EmulatedRun {
  OpKind op = OpKind::kAllReduce;
  bool tuner_saw = false;  // false for what NCCL's tuner never sees (send, all-to-all, barrier...)
  uint64_t bytes = 0;      // the size its tuner saw
  int algo = -1;
  int proto = -1;
  int channels = -1;         // the cap applied, -1 = all of the communicator's
  uint64_t chunk_bytes = 0;  // the chunk size it ran with (NCCL 2.30 asks the tuner for it)
  double duration_us = 0;    // what the truth says it took
};

class EmulatedNccl : public c10d::Backend {
 public:
  // `gloo`: moves the data. Throws std::invalid_argument on a bad NCCL_ALGO/NCCL_PROTO or
  // scenario.
  EmulatedNccl(int rank, int size, c10::intrusive_ptr<c10d::Backend> gloo, EmulationConfig config);
  ~EmulatedNccl() override;

  const std::string getBackendName() const override { return "emulated_nccl"; }
  // Whether its communicator exists and loaded the plugin, and by which ABI (0: none).
  bool plugin_loaded() const { return tuner_ && tuner_->loaded(); }
  int tuner_abi() const { return tuner_ ? tuner_->abi() : 0; }
  void enableCollectivesTiming() override { timing_ = true; }
  void eagerConnectSingleDevice(at::Device /*device*/) override { communicator(); }
  std::vector<EmulatedRun> runs() const;  // the most recent, oldest first

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
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
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void shutdown() override;
#ifdef C10D_BACKEND_HAS_RECONFIGURE
  // Fault tolerance as nccl2 offers it, on the Gloo that moves the data: a new membership, then a
  // new communicator (and tuner init) at the next call.
  bool supportsReconfigure() const override { return gloo_->supportsReconfigure(); }
  c10d::ReconfigureHandle get_reconfigure_handle() const override {
    return gloo_->get_reconfigure_handle();
  }
  c10::intrusive_ptr<c10d::Work> reconfigure(const c10d::ReconfigureOptions& opts) override;
#endif

 private:
  // The communicator, created at first use (its tuner init included).
  const LoadedTuner& communicator();
  // NCCL's decision for one collective its tuner sees, and its modelled duration.
  EmulatedRun decide(OpKind op, uint64_t bytes);
  // The run of anything else (all-to-all, send, ...): NCCL's own path, modelled duration.
  EmulatedRun untuned(OpKind op, uint64_t bytes);
  // Wraps the Gloo work with the run's duration (and, for AVG / PREMUL_SUM, the rescale NCCL
  // does itself), and records the run.
  c10::intrusive_ptr<c10d::Work> finish(c10::intrusive_ptr<c10d::Work> inner, EmulatedRun run,
                                        std::vector<at::Tensor> outputs,
                                        std::function<void()> after = nullptr);

  c10::intrusive_ptr<c10d::Backend> gloo_;
  EmulationConfig config_;
  truth::GroupWorld world_;
  std::unique_ptr<LoadedTuner> tuner_;
  bool timing_ = false;  // enableCollectivesTiming(): Works report their duration
  bool allowed_[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];  // NCCL_ALGO/PROTO and test faults
  truth::Rng rng_;
  mutable std::mutex mu_;
  std::vector<EmulatedRun> runs_;  // a ring of kKeptRuns
  size_t next_run_ = 0;
};

}  // namespace emulated_nccl
}  // namespace dynamiccl
