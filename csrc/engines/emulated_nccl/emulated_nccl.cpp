#include "engines/emulated_nccl/emulated_nccl.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "engines/coalesced_work.h"
#include "engines/cpu/reduction.h"

namespace dynamiccl {
namespace emulated_nccl {

namespace {

constexpr size_t kKeptRuns = 1 << 16;

uint64_t nbytes(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }

std::string normalized(std::string name) {
  std::string out;
  for (char ch : name) {
    if (ch != '_' && ch != ' ')
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  return out;
}

// NCCL_ALGO / NCCL_PROTO: a comma-separated list of names (any case; "NVLSTree" = "nvls_tree"),
// or "^" and the names to exclude. Sets allowed[i] for each of `names`.
std::vector<bool> parse_selection(const char* var, const std::string& value,
                                  const std::vector<std::string>& names) {
  std::vector<bool> allowed(names.size(), true);
  if (value.empty()) return allowed;
  const bool exclude = value[0] == '^';
  std::vector<bool> listed(names.size(), false);
  size_t start = exclude ? 1 : 0;
  while (start <= value.size()) {
    const size_t end = std::min(value.find(',', start), value.size());
    const std::string item = normalized(value.substr(start, end - start));
    const auto it = std::find_if(names.begin(), names.end(),
                                 [&](const std::string& n) { return normalized(n) == item; });
    if (it == names.end()) {
      std::string accepted;
      for (const auto& n : names) accepted += (accepted.empty() ? "" : ", ") + n;
      throw std::invalid_argument(
          std::string(var) + "=" + value + ": '" + value.substr(start, end - start) +
          "' is not accepted; accepted: " + accepted + " (comma-separated, '^' to exclude)");
    }
    listed[it - names.begin()] = true;
    start = end + 1;
  }
  for (size_t i = 0; i < names.size(); ++i) allowed[i] = exclude ? !listed[i] : listed[i];
  return allowed;
}

truth::GroupWorld make_world(const EmulationConfig& c) {
  return truth::GroupWorld(nccl::resolve_topology(c.cluster.topology), c.shape,
                           truth::TruthFactors::from_entries(c.cluster.truth),
                           c.cluster.channel_model);
}

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

// A Gloo work as NCCL's would be: a future for every op, `after` (NCCL's own AVG / PREMUL_SUM
// scaling, or placing a reduce-scatter's chunk) run once the data is there, and the modelled
// duration through getDuration() once complete.
class EmulatedWork : public c10d::Work {
 public:
  // `engine_future`: whether the Gloo work has a future (Gloo gives point-to-point works none).
  // Without one, ours completes once the inner work is seen complete (isCompleted / wait): NCCL
  // gives every op a future.
  // `timed`: the engine times its calls (enableCollectivesTiming), as torch's NCCL engines do
  // only when asked.
  EmulatedWork(c10::intrusive_ptr<c10d::Work> inner, double duration_us, bool timed,
               std::function<void()> after, std::vector<at::Tensor> outputs, bool engine_future)
      : Work(-1, inner->retrieveOpType()),
        inner_(std::move(inner)),
        duration_ms_(static_cast<float>(duration_us / 1000.0)),
        timed_(timed),
        outputs_(std::move(outputs)) {
    if (!engine_future) {
      lazy_after_ = std::move(after);
      future_ = tensor_list_future();
      return;
    }
    if (!after) {
      future_ = inner_->getFuture();
      return;
    }
    future_ = inner_->getFuture()->then(
        [after = std::move(after), outputs = outputs_](c10::ivalue::Future& done) {
          if (done.hasError()) std::rethrow_exception(done.exception_ptr());
          after();
          return c10::IValue(outputs);
        },
        c10::ListType::create(c10::TensorType::get()));
  }

  bool isCompleted() override {
    if (lazy() && inner_->isCompleted()) complete_lazily();
    return future_->completed();
  }
  bool isSuccess() const override { return !future_->hasError(); }
  std::exception_ptr exception() const override {
    return future_->hasError() ? future_->exception_ptr() : nullptr;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    inner_->wait(timeout);
    if (lazy()) complete_lazily();
    future_->wait();
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  float getDuration() const override {
    TORCH_CHECK(timed_, "emulated NCCL: getDuration() needs timing enabled "
                        "(enableCollectivesTiming)");
    TORCH_CHECK(future_->completed(), "emulated NCCL: getDuration() before the work completed");
    return duration_ms_;
  }

 private:
  bool lazy() const { return !future_->completed() && lazy_pending_; }
  void complete_lazily() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!lazy_pending_) return;
    lazy_pending_ = false;
    try {
      if (lazy_after_) lazy_after_();
      future_->markCompleted(c10::IValue(outputs_));
    } catch (...) {
      future_->setError(std::current_exception());
    }
  }

  c10::intrusive_ptr<c10d::Work> inner_;
  float duration_ms_;
  bool timed_;
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::function<void()> lazy_after_;
  bool lazy_pending_ = true;
  std::mutex mu_;
};

// The scaling NCCL applies itself for AVG / PREMUL_SUM (Gloo runs the SUM).
std::function<void()> scaling(const Reduction& plan, std::vector<at::Tensor> tensors, int size) {
  if (!plan.rescales()) return nullptr;
  return [plan, tensors = std::move(tensors), size] {
    for (const at::Tensor& t : tensors) apply_scaling(plan, t, size);
  };
}

// NCCL's chunk before the tuner speaks: the protocol's step buffer (nccl::default_chunk_bytes),
// at most the message.
size_t default_chunk_bytes(int proto, uint64_t bytes) {
  return std::max<size_t>(1, std::min<size_t>(nccl::default_chunk_bytes(proto), bytes));
}

}  // namespace

EmulatedNccl::EmulatedNccl(int rank, int size, c10::intrusive_ptr<c10d::Backend> gloo,
                           EmulationConfig config)
    : Backend(rank, size),
      gloo_(std::move(gloo)),
      config_(std::move(config)),
      world_(make_world(config_)),
      rng_(config_.cluster.seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank)) {
  TORCH_CHECK(gloo_, "emulated NCCL: a Gloo engine is required to move the data");
  const auto algos = parse_selection("NCCL_ALGO", config_.nccl_algo, nccl::algo_names());
  const auto protos = parse_selection("NCCL_PROTO", config_.nccl_proto, nccl::proto_names());
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a) {
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) allowed_[a][p] = algos[a] && protos[p];
  }
  for (const auto& [a, p] : config_.unavailable) allowed_[a][p] = false;
  runs_.reserve(kKeptRuns);
}

EmulatedNccl::~EmulatedNccl() = default;

std::vector<EmulatedRun> EmulatedNccl::runs() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (runs_.size() < kKeptRuns) return runs_;
  std::vector<EmulatedRun> out(runs_.begin() + next_run_, runs_.end());
  out.insert(out.end(), runs_.begin(), runs_.begin() + next_run_);
  return out;
}

const LoadedTuner& EmulatedNccl::communicator() {
  if (!tuner_) {
    tuner_ = std::make_unique<LoadedTuner>(
        config_.skip_plugin ? std::string() : config_.tuner_plugin, config_.release,
        config_.comm_id, static_cast<size_t>(size_), static_cast<size_t>(config_.shape.nodes),
        config_.nonblocking);
  }
  return *tuner_;
}

EmulatedRun EmulatedNccl::decide(OpKind op, uint64_t bytes) {
  const int func = nccl::func_of(op);
  const nccl::NcclCostModel& model = world_.nominal();
  float table[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a) {
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      const double t = allowed_[a][p] ? model.time_us(func, a, p, bytes) : -1.0;
      table[a][p] = t >= 0 ? static_cast<float>(t) : static_cast<float>(NCCL_ALGO_PROTO_IGNORE);
    }
  }
  int n_channels = 0;
  const LoadedTuner& tuner = communicator();
  tuner.get_coll_info(func, bytes, table, &n_channels);
  // NCCL's scan: the strict minimum over entries it offers, algorithm-major.
  EmulatedRun run;
  run.op = op;
  run.tuner_saw = true;
  run.bytes = bytes;
  float best = std::numeric_limits<float>::infinity();
  for (int a = 0; a < NCCL_NUM_ALGORITHMS; ++a) {
    for (int p = 0; p < NCCL_NUM_PROTOCOLS; ++p) {
      if (table[a][p] >= 0 && table[a][p] < best) {
        best = table[a][p];
        run.algo = a;
        run.proto = p;
      }
    }
  }
  TORCH_CHECK(run.algo >= 0, "emulated NCCL: no algorithm/protocol left for ", op_name(op), " of ",
              bytes, " bytes (NCCL_ALGO='", config_.nccl_algo, "', NCCL_PROTO='",
              config_.nccl_proto, "')");
  if (n_channels > 0) run.channels = std::min(n_channels, model.graph_channels(run.algo));
  const size_t nccl_chunk = default_chunk_bytes(run.proto, bytes);
  size_t chunk = nccl_chunk;
  // NCCL tells it the channels the call runs on: the cap or the communicator's, fewer for a call
  // too small to fill them (the model's per-call shrink).
  const int cap = run.channels > 0 ? run.channels : model.graph_channels(run.algo);
  tuner.get_chunk_size(func, bytes, run.algo, run.proto,
                       model.channels_used(run.algo, run.proto, bytes, cap), &chunk);
  // NCCL clamps a tuner's chunk to the step buffer (a chunk of 0 would be its own bug: kept out).
  if (chunk == 0) chunk = nccl_chunk;
  chunk = std::min(chunk, nccl::default_chunk_bytes(run.proto));
  run.chunk_bytes = chunk;
  // The truth prices a chunk the tuner changed; NCCL's own is the chunk-less truth.
  const Action chosen{static_cast<int8_t>(run.algo), static_cast<int8_t>(run.proto),
                      static_cast<int16_t>(run.channels),
                      chunk != nccl_chunk ? static_cast<int32_t>(chunk) : -1};
  run.duration_us = world_.truth_us(op, chosen, bytes) * config_.cluster.noise.sample(rng_);
  return run;
}

EmulatedRun EmulatedNccl::untuned(OpKind op, uint64_t bytes) {
  communicator();
  EmulatedRun run;
  run.op = op;
  run.bytes = bytes;
  run.duration_us = world_.truth_us(op, Action{}, bytes) * config_.cluster.noise.sample(rng_);
  return run;
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::finish(c10::intrusive_ptr<c10d::Work> inner,
                                                    EmulatedRun run,
                                                    std::vector<at::Tensor> outputs,
                                                    std::function<void()> after) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (runs_.size() < kKeptRuns) {
      runs_.push_back(run);
    } else {
      runs_[next_run_] = run;
      next_run_ = (next_run_ + 1) % kKeptRuns;
    }
  }
  // Gloo's point-to-point works (send, recv; gather and scatter are recorded as sends) are
  // treated as futureless: completing lazily is right for any work.
  const bool engine_future = run.op != OpKind::kSend && run.op != OpKind::kRecv;
  return c10::make_intrusive<EmulatedWork>(std::move(inner), run.duration_us, timing_,
                                           std::move(after), std::move(outputs), engine_future);
}

// ---- the collectives NCCL's tuner sees ------------------------------------------------------

c10::intrusive_ptr<c10d::Work> EmulatedNccl::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  const Reduction plan = plan_reduction(opts.reduceOp, tensors[0], /*cpu=*/true);
  EmulatedRun run = decide(OpKind::kAllReduce, nbytes(tensors[0]));
  c10d::AllreduceOptions gloo_opts = opts;
  gloo_opts.reduceOp = c10d::ReduceOp(plan.engine_op);
  return finish(gloo_->allreduce(tensors, gloo_opts), run, tensors, scaling(plan, tensors, size_));
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  EmulatedRun run = decide(OpKind::kBroadcast, nbytes(tensors[0]));
  return finish(gloo_->broadcast(tensors, opts), run, tensors);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::reduce(std::vector<at::Tensor>& tensors,
                                                    const c10d::ReduceOptions& opts) {
  const Reduction plan = plan_reduction(opts.reduceOp, tensors[0], /*cpu=*/true);
  EmulatedRun run = decide(OpKind::kReduce, nbytes(tensors[0]));
  c10d::ReduceOptions gloo_opts = opts;
  gloo_opts.reduceOp = c10d::ReduceOp(plan.engine_op);
  auto after = rank_ == opts.rootRank ? scaling(plan, tensors, size_) : nullptr;
  return finish(gloo_->reduce(tensors, gloo_opts), run, tensors, std::move(after));
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  EmulatedRun run = decide(OpKind::kAllGather, nbytes(inputs[0]) * size_);
  return finish(gloo_->allgather(outputs, inputs, opts), run, outputs[0]);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  EmulatedRun run = decide(OpKind::kAllGather, nbytes(output));
  return finish(gloo_->_allgather_base(output, input, opts), run, {output});
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < inputs.size(); ++i)
    works.push_back(_allgather_base(outputs[i], inputs[i], opts));
  return c10::make_intrusive<CoalescedWork>(rank_, std::move(works));
}

// Gloo's reduce-scatter has no future: an all-reduce of the whole input, then this rank's chunk
// (NCCL's result, NCCL's scaling).
c10::intrusive_ptr<c10d::Work> EmulatedNccl::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const Reduction plan = plan_reduction(opts.reduceOp, input, /*cpu=*/true);
  EmulatedRun run = decide(OpKind::kReduceScatter, nbytes(input));
  std::vector<at::Tensor> whole{input.detach().reshape({-1}).clone()};
  c10d::AllreduceOptions gloo_opts;
  gloo_opts.reduceOp = c10d::ReduceOp(plan.engine_op);
  gloo_opts.timeout = opts.timeout;
  auto work = gloo_->allreduce(whole, gloo_opts);
  auto place = [plan, whole = whole[0], output, rank = rank_, size = size_] {
    const int64_t n = output.numel();
    output.copy_(whole.narrow(0, rank * n, n).view_as(output));
    apply_scaling(plan, output, size);
  };
  return finish(std::move(work), run, {output}, place);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor flat = at::cat(inputs[0]).reshape({-1});
  return _reduce_scatter_base(outputs[0], flat, opts);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < inputs.size(); ++i) {
    works.push_back(_reduce_scatter_base(outputs[i], inputs[i], opts));
  }
  return c10::make_intrusive<CoalescedWork>(rank_, std::move(works));
}

// ---- what NCCL's tuner never sees: Gloo's result, a modelled duration -----------------------

c10::intrusive_ptr<c10d::Work> EmulatedNccl::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  uint64_t bytes = 0;
  for (const auto& t : tensors) bytes += nbytes(t);
  return finish(gloo_->allreduce_coalesced(tensors, opts), untuned(OpKind::kAllReduce, bytes),
                tensors);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  uint64_t bytes = 0;
  for (const auto& t : inputs) bytes += nbytes(t) * size_;
  std::vector<at::Tensor> flat;
  for (const auto& list : outputs) flat.insert(flat.end(), list.begin(), list.end());
  return finish(gloo_->allgather_coalesced(outputs, inputs, opts),
                untuned(OpKind::kAllGather, bytes), flat);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& output_split_sizes,
                                                           std::vector<int64_t>& input_split_sizes,
                                                           const c10d::AllToAllOptions& opts) {
  return finish(gloo_->alltoall_base(output, input, output_split_sizes, input_split_sizes, opts),
                untuned(OpKind::kAllToAll, nbytes(input)), {output});
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::alltoall(std::vector<at::Tensor>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  uint64_t bytes = 0;
  for (const auto& t : inputs) bytes += nbytes(t);
  return finish(gloo_->alltoall(outputs, inputs, opts), untuned(OpKind::kAllToAll, bytes), outputs);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs,
                                                    const c10d::GatherOptions& opts) {
  std::vector<at::Tensor> flat;
  for (const auto& list : outputs) flat.insert(flat.end(), list.begin(), list.end());
  return finish(gloo_->gather(outputs, inputs, opts), untuned(OpKind::kSend, nbytes(inputs[0])),
                flat);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::scatter(std::vector<at::Tensor>& outputs,
                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                     const c10d::ScatterOptions& opts) {
  return finish(gloo_->scatter(outputs, inputs, opts), untuned(OpKind::kSend, nbytes(outputs[0])),
                outputs);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::send(std::vector<at::Tensor>& tensors, int dst,
                                                  int tag) {
  return finish(gloo_->send(tensors, dst, tag), untuned(OpKind::kSend, nbytes(tensors[0])),
                tensors);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::recv(std::vector<at::Tensor>& tensors, int src,
                                                  int tag) {
  return finish(gloo_->recv(tensors, src, tag), untuned(OpKind::kRecv, nbytes(tensors[0])),
                tensors);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::recvAnysource(std::vector<at::Tensor>& tensors,
                                                           int tag) {
  return finish(gloo_->recvAnysource(tensors, tag), untuned(OpKind::kRecv, nbytes(tensors[0])),
                tensors);
}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::barrier(const c10d::BarrierOptions& opts) {
  return c10::make_intrusive<EmulatedWork>(gloo_->barrier(opts), 0.0, timing_, nullptr,
                                           std::vector<at::Tensor>(),  // not a run of note
                                           /*engine_future=*/true);
}

// NCCL batches a coalescing window into one group launch; Gloo has no windows, and runs the
// window's calls in order as they come, which gives the same results: nothing is left to end.
void EmulatedNccl::startCoalescing() {}

c10::intrusive_ptr<c10d::Work> EmulatedNccl::endCoalescing() { return {}; }

void EmulatedNccl::setTimeout(std::chrono::milliseconds timeout) { gloo_->setTimeout(timeout); }

void EmulatedNccl::shutdown() { gloo_->shutdown(); }

#ifdef C10D_BACKEND_HAS_RECONFIGURE
c10::intrusive_ptr<c10d::Work> EmulatedNccl::reconfigure(const c10d::ReconfigureOptions& opts) {
  auto work = gloo_->reconfigure(opts);
  rank_ = gloo_->getRank();
  size_ = gloo_->getSize();
  tuner_.reset();  // the old communicator goes; the next call creates the new one
  return work;
}
#endif

}  // namespace emulated_nccl
}  // namespace dynamiccl
