#include "backend/process_group_dynamiccl.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <ATen/record_function.h>
#include <c10/util/FunctionRef.h>

#include <numeric>
#include <sstream>

#include "backend/cpu_arm_catalog.h"
#include "backend/dynamic_work.h"
#include "backend/hint_scope.h"
#include "backend/nccl_engine.h"
#include "backend/roles.h"

namespace dynamiccl {

namespace {

constexpr int kCpu = 0;
constexpr int kNccl = 1;
using RedOp = c10d::ReduceOp::RedOpType;

uint64_t nbytes(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }

const char* red_op_name(RedOp op) {
  switch (op) {
    case RedOp::SUM: return "SUM";
    case RedOp::AVG: return "AVG";
    case RedOp::PRODUCT: return "PRODUCT";
    case RedOp::MIN: return "MIN";
    case RedOp::MAX: return "MAX";
    case RedOp::BAND: return "BAND";
    case RedOp::BOR: return "BOR";
    case RedOp::BXOR: return "BXOR";
    case RedOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// How a reduction is carried out on the CPU engine. Gloo has no AVG and no PREMUL_SUM: run SUM,
// then scale the result (1/n or the factor). Bitwise ops need an integral (or bool) dtype.
struct Reduction {
  RedOp engine_op = RedOp::SUM;  // what the engine / our schedules are asked for
  double scale = 1.0;            // applied to the result afterwards when != 1
  bool divide = false;           // AVG: divide by the group size (integer-safe)
};

Reduction plan_reduction(const c10d::ReduceOp& op, const at::Tensor& t, int group_size,
                         bool cpu) {
  const RedOp r = op.op_;
  const auto dtype = t.scalar_type();
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  if (r == RedOp::BAND || r == RedOp::BOR || r == RedOp::BXOR) {
    TORCH_CHECK(integral, "dynamiccl: reduce op ", red_op_name(r), " is not supported for dtype ",
                dtype, "; bitwise reductions accept integer and bool dtypes");
  }
  if (r == RedOp::PREMUL_SUM || r == RedOp::AVG) {
    TORCH_CHECK(dtype != at::kBool, "dynamiccl: reduce op ", red_op_name(r),
                " is not supported for dtype Bool; accepted: floating and integer dtypes");
  }
  if (r == RedOp::PREMUL_SUM) {
    TORCH_CHECK(at::isFloatingType(dtype), "dynamiccl: reduce op PREMUL_SUM is not supported for "
                "dtype ", dtype, "; accepted: floating dtypes");
  }
  Reduction plan;
  plan.engine_op = r;
  if (!cpu) return plan;  // NCCL implements all of them natively
  if (r == RedOp::AVG) {
    plan.engine_op = RedOp::SUM;
    plan.divide = true;
  } else if (r == RedOp::PREMUL_SUM) {
    plan.engine_op = RedOp::SUM;
    auto* supp = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(supp, "dynamiccl: PREMUL_SUM without its factor (make it with "
                "torch.distributed._make_nccl_premul_sum)");
    plan.scale = supp->tensor_factor.defined() ? supp->tensor_factor.item<double>()
                                               : supp->double_factor;
  }
  (void)group_size;
  return plan;
}

void apply_scaling(const Reduction& plan, const at::Tensor& tensor, int group_size) {
  // Communication buffers may require grad (DDP with create_graph): scale the data, untracked.
  at::Tensor t = tensor.detach();
  if (plan.divide) {
    if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) {
      t.div_(group_size);
    } else {
      t.div_(group_size, "trunc");
    }
  } else if (plan.scale != 1.0) {
    t.mul_(plan.scale);
  }
}

c10d::ReduceOp as_engine_op(RedOp op) { return c10d::ReduceOp(op); }

// Work's constructor prepares a profiler range (allocating) whenever it gets a title: give it
// one only while the profiler has callbacks installed.
const char* profiling_title(const char* title) {
  return at::hasCallbacks() ? title : nullptr;
}

template <typename Opts>
Opts with_timeout(Opts opts, std::chrono::milliseconds timeout) {
  if (opts.timeout == c10d::kUnsetTimeout) opts.timeout = timeout;
  return opts;
}

}  // namespace

// Everything dispatch() needs to know about one call.
struct ProcessGroupDynamicCCL::Call {
  // bytes and effective bytes start as the sample's size; collectives whose message is larger
  // (gathers, lists) set them.
  Call(OpKind op, c10d::OpType type, const char* title, at::Tensor sample_tensor)
      : op(op), type(type), title(title), sample(std::move(sample_tensor)) {
    bytes = effective_bytes = nbytes(sample);
  }
  OpKind op;
  c10d::OpType type;
  const char* title;   // the profiler's name for it
  at::Tensor sample;   // selects the engine; its dtype is the context's
  uint64_t bytes = 0;
  uint64_t effective_bytes = 0;
  bool p2p = false;
  // How to issue it natively on the selected engine (Gloo or NCCL).
  c10::function_ref<c10::intrusive_ptr<c10d::Work>(c10d::Backend&)> native;
  // Views of the caller's tensors (valid during dispatch): copied only where kept.
  c10::ArrayRef<at::Tensor> outputs;  // the future's value
  // Reduction handling (CPU: AVG/PREMUL_SUM emulation); `scaled` holds what gets scaled.
  Reduction reduction;
  c10::ArrayRef<at::Tensor> scaled;
  // One collective an engine can run with a chosen arm — our schedule on CPU, the plugin's
  // forced choice on NCCL (which sees it as one call of `effective_bytes`). Coalesced batches and
  // non-contiguous tensors are not: they always take the engine default.
  bool tunable = false;
  // Made into flat views only when one of our schedules runs (a view costs allocations).
  const at::Tensor* in = nullptr;
  const at::Tensor* out = nullptr;
  int root = 0;
  c10::ArrayRef<at::Tensor> unflatten_to;  // list-form all-gather: copy the pieces here
  c10::ArrayRef<at::Tensor> flatten_from;  // list-form reduce-scatter: concatenated first
};

ProcessGroupDynamicCCL::ProcessGroupDynamicCCL(int rank, int size, Engines engines,
                                               BackendConfig config,
                                               std::chrono::milliseconds timeout)
    : Backend(rank, size),
      engines_(std::move(engines)),
      config_(std::move(config)),
      timeout_(timeout),
      consensus_(config_.round_calls, config_.cost_reduce, engines_.control),
      telemetry_(config_.decision_log_capacity, config_.trace) {
  TORCH_CHECK(engines_.gloo && engines_.control, "dynamiccl: the Gloo engines are required");
  TORCH_CHECK(config_.round_calls > 0, "dynamiccl: round_calls must be positive, got ",
              config_.round_calls);
  consensus_.set_timeout(timeout_);
  channel_ = std::make_unique<P2PChannel>(engines_.control, timeout_);
  for (auto& plan : op_plan_) plan.fill(-1);
  // Catalogs are built up front so a bad DYNAMICCL_FORCE fails at init, on every rank.
  catalogs_[kCpu] = std::make_shared<CpuArmCatalog>(size);
  if (engines_.nccl) catalogs_[kNccl] = std::make_shared<NcclArmCatalog>(size);
  for (int e = 0; e < kNumEngines; ++e) {
    if (!catalogs_[e] || (e == kNccl && !config_.nccl_tuning)) continue;
    for (int o = 0; o < kNumOps; ++o) {
      if (catalogs_[e]->arms(static_cast<OpKind>(o)).size() > 1) op_plan_[e][o] = -2;
    }
  }
  // A forced arm name belongs to one engine; that engine's calls of the op use it, the other
  // engine's are untouched. A name no engine knows is an error, on every rank, at init.
  for (const auto& [op_str, arm_str] : config_.force) {
    OpKind op;
    TORCH_CHECK(parse_op(op_str, &op), "dynamiccl: DYNAMICCL_FORCE names unknown op '", op_str,
                "'");
    bool found = false;
    std::ostringstream valid;
    for (int e = 0; e < kNumEngines; ++e) {
      if (!catalogs_[e]) continue;
      const auto& arms = catalogs_[e]->arms(op);
      for (size_t i = 0; i < arms.size(); ++i) {
        valid << (valid.tellp() > 0 ? ", " : "") << arms[i].name;
        if (arms[i].name == arm_str && (e == kCpu || config_.nccl_tuning)) {
          op_plan_[e][static_cast<int>(op)] = static_cast<int>(i);
          found = true;
        }
      }
    }
    TORCH_CHECK(found, "dynamiccl: DYNAMICCL_FORCE arm '", arm_str, "' is not an arm of ", op_str,
                "; valid arms: ", valid.str());
  }
  init();
}

ProcessGroupDynamicCCL::~ProcessGroupDynamicCCL() {
  // Completion callbacks of inner works write into our telemetry: shutdown() lets the engines
  // (and their threads) go before the members those callbacks touch.
  shutdown();
}

Role ProcessGroupDynamicCCL::group_role() {
  if (!group_role_resolved_) {
    group_role_ = group_role_from_desc(getGroupDesc(), config_.role_map);
    group_role_resolved_ = true;
  }
  return group_role_;
}

Learner* ProcessGroupDynamicCCL::mutable_learner(int engine) {
  TORCH_CHECK(engine >= 0 && engine < kNumEngines, "dynamiccl: engine must be 0 (cpu) or 1 "
              "(nccl), got ", engine);
  ensure_learning_engine(engine);
  return learners_[engine].get();
}

void ProcessGroupDynamicCCL::ensure_learning_engine(int engine) {
  if (learners_[engine]) return;
  TORCH_CHECK(catalogs_[engine], "dynamiccl: engine ", engine, " is not available in this group");
  LearnerConfig cfg = config_.learner;
  cfg.mode = config_.mode;
  learners_[engine] = std::make_unique<Learner>(cfg, catalogs_[engine]);
}

c10::intrusive_ptr<c10d::Backend>& ProcessGroupDynamicCCL::engine_for(const at::Tensor& t,
                                                                      int* engine) {
  if (t.device().is_cpu()) {
    *engine = kCpu;
    return engines_.gloo;
  }
  TORCH_CHECK(t.device().is_cuda(), "dynamiccl: tensors on device ", t.device(),
              " are not supported; accepted: cpu, cuda");
  TORCH_CHECK(engines_.nccl, "dynamiccl: a CUDA tensor reached a group created without the NCCL "
              "engine (was CUDA available when the group was created?)");
  *engine = kNccl;
  return engines_.nccl;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::dispatch(Call& c) {
  TORCH_CHECK(!shut_down_, "dynamiccl: ", op_name(c.op), " issued after shutdown()");
  int engine = kCpu;
  c10d::Backend& inner = *engine_for(c.sample, &engine);
  const uint64_t seq = c.p2p ? seq_p2p_++ : seq_collective_++;
  const int bin = size_bin(c.effective_bytes);
  SummaryCell& cell = telemetry_.summary(engine, c.op, bin);
  cell.calls.fetch_add(1, std::memory_order_relaxed);
  cell.bytes.fetch_add(c.bytes, std::memory_order_relaxed);

  // 1. Decide. Off mode, coalescing windows and ops with a single arm take the native path, and
  // so does the first NCCL collective: it creates the communicator, which tells whether NCCL loaded
  // our plugin, and every rank must agree on that before any NCCL decision is published.
  int plan = op_plan_[engine][static_cast<int>(c.op)];
  const bool first_nccl_call = engine == kNccl && !c.p2p && !nccl_plugin_checked_;
  if (config_.mode == Mode::kOff || coalescing_ || !c.tunable || first_nccl_call) {
    plan = -1;
  }
  Decision d;
  bool learned = false;
  const bool flat = c.type == c10d::OpType::_ALLGATHER_BASE ||
                    c.type == c10d::OpType::_REDUCE_SCATTER_BASE ||
                    c.type == c10d::OpType::COALESCED;
  const Hint& hint = current_hint();
  const Role role = call_role(group_role(), c.op, flat, hint);
  if (plan >= 0) {
    d.arm = static_cast<uint16_t>(plan);
    d.action = catalogs_[engine]->arms(c.op)[plan].action;
  } else if (plan == -2) {
    ensure_learning_engine(engine);
    CollectiveContext ctx;
    ctx.op = c.op;
    ctx.dtype = static_cast<uint8_t>(c.sample.scalar_type());
    ctx.bytes = c.bytes;
    ctx.effective_bytes = c.effective_bytes;
    ctx.group_size = size_;
    ctx.group_rank = rank_;
    ctx.seq = seq;
    ctx.hint = hint;
    ctx.role = role;
    d = learners_[engine]->decide(ctx);
    learned = true;
  }
  if (plan != -1) {
    telemetry_.log_decision({seq, c.bytes, d.state_id, d.epoch, d.arm, static_cast<uint8_t>(c.op),
                             static_cast<uint8_t>(engine), d.probe, plan >= 0});
  }
  CallRecord* rec =
      learned ? &consensus_.begin_call(static_cast<uint8_t>(engine), d, &cell) : nullptr;
  const uint64_t rec_index = consensus_.learned_calls();
  TraceEntry* trace = nullptr;
  if (telemetry_.tracing()) {
    trace = &telemetry_.add_trace();
    trace->seq = seq;
    trace->bytes = c.bytes;
    trace->op = static_cast<uint8_t>(c.op);
    trace->engine = static_cast<uint8_t>(engine);
    trace->role = static_cast<uint8_t>(role);
    trace->arm = d.arm;
    trace->probe = d.probe;
    trace->epoch = d.epoch;
    trace->start_ns = now_ns();
  }
  const int64_t start = rec ? rec->start_ns.load(std::memory_order_relaxed) : now_ns();

  // 2. Issue. Inside a coalescing window NCCL needs the batch in one group (send/recv pairs
  // would deadlock otherwise): open it on the first CUDA call.
  if (coalescing_ && engine == kNccl && !nccl_coalescing_) {
    engines_.nccl->startCoalescing();
    nccl_coalescing_ = true;
  }
  c10::intrusive_ptr<c10d::Work> work;
  if (engine == kCpu && !d.action.is_default()) {
    work = issue_custom_cpu(c, d.action, learned, rec_index, &cell, start, trace);
  } else {
    if (engine == kNccl) nccl_publish(c.op, c.effective_bytes, d.action);
    c10::intrusive_ptr<c10d::Work> inner_work;
    try {
      inner_work = c.native(inner);
    } catch (const c10::Error& e) {
      if (engine == kNccl) nccl_clear();
      TORCH_CHECK(false, "dynamiccl: ", op_name(c.op), " on dtype ", c.sample.scalar_type(),
                  " failed in the ", engine == kCpu ? "gloo" : "nccl", " engine: ",
                  e.what_without_backtrace());
    }
    if (engine == kNccl) {
      if (rec && nccl_last_outcome_unavailable()) rec->unavailable.store(true);
      nccl_clear();
    }
    // Post-processing (AVG / PREMUL_SUM emulation) and timing run on completion: as future
    // callbacks, or at wait() for the few engine ops that have no future.
    auto inner_future = future_or_null(*inner_work);
    const bool scale = !c.scaled.empty() && (c.reduction.divide || c.reduction.scale != 1.0);
    auto scale_outputs = [scaled = scale ? c.scaled.vec() : std::vector<at::Tensor>{},
                          red = c.reduction, n = size_] {
      for (const at::Tensor& t : scaled) apply_scaling(red, t, n);
    };
    c10::intrusive_ptr<c10::ivalue::Future> post;
    std::function<void()> on_wait;
    if (scale && inner_future) {
      post = inner_future->then(
          [scale_outputs, outputs = c.outputs.vec()](c10::ivalue::Future&) -> c10::IValue {
            scale_outputs();
            return c10::IValue(outputs);
          },
          c10::ListType::create(c10::TensorType::get()));
    }
    if (engine == kCpu) {
      // Small captures keep the callback's storage inline: no allocation for it.
      auto when_done = [&](auto&& done) {
        if (inner_future) {
          (post ? post : inner_future)->addCallback([done](c10::ivalue::Future&) { done(); });
        } else {
          on_wait = [done, scale_outputs, scale] {
            if (scale) scale_outputs();
            done();
          };
        }
      };
      if (trace) {
        when_done([this, learned, rec_index, cell = &cell, start, trace] {
          record_cpu_end(learned, rec_index, cell, start, trace);
        });
      } else if (rec) {
        when_done([this, rec_index] { consensus_.complete(rec_index, now_ns()); });
      } else {
        when_done([cell = &cell, start] { cell->add_duration(now_ns() - start); });
      }
    } else if (rec) {
      rec->timed_work = inner_work;  // GPU time is read at the next round, once complete
    }
    work = c10::make_intrusive<DynamicWork>(rank_, c.type, profiling_title(c.title),
                                            std::move(inner_work),
                                            std::move(post), c.outputs.vec(),
                                            std::move(on_wait));
  }
  if (first_nccl_call) agree_on_nccl_plugin();
  // 3. Learn: the round boundary (if this call ends a round) runs on every rank here.
  if (learned) consensus_.end_call({learners_[0].get(), learners_[1].get()});
  if (coalescing_ && engine == kCpu) coalesced_works_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::issue_custom_cpu(Call& c,
                                                                       const Action& action,
                                                                       bool learned,
                                                                       uint64_t rec_index,
                                                                       SummaryCell* cell,
                                                                       int64_t start,
                                                                       TraceEntry* trace) {
  // Schedules move data, not autograd history: they work on detached views (a bucket may
  // require grad, e.g. DDP with create_graph).
  at::Tensor flat_in = c.in ? c.in->detach().view({-1}) : at::Tensor();
  at::Tensor flat_out = c.out ? c.out->detach().view({-1}) : at::Tensor();
  // List forms run on a flat buffer of the whole message.
  if (!c.unflatten_to.empty()) flat_out = at::empty({flat_in.numel() * size_}, flat_in.options());
  if (!c.flatten_from.empty()) flat_in = at::empty({flat_out.numel() * size_}, flat_out.options());
  auto future = make_tensor_list_future({});  // CPU: no devices to synchronize
  const uint32_t tag = next_schedule_tag();
  // The caller's storages the schedule touches (its outputs among them): a later schedule on
  // one of them waits for this one (schedule_worker.h).
  ScheduleWorker::Storages storages;
  for (const at::Tensor* t : {c.in, c.out}) {
    if (t) storages.push_back(t->storage().unsafeGetStorageImpl());
  }
  for (c10::ArrayRef<at::Tensor> list : {c.unflatten_to, c.flatten_from}) {
    for (const at::Tensor& t : list) storages.push_back(t.storage().unsafeGetStorageImpl());
  }
  auto schedule = [this, future, tag, action, cell, learned, rec_index, start, trace, op = c.op,
                   in = flat_in, out = flat_out, root = c.root, red = c.reduction,
                   outputs = c.outputs.vec(), unflatten = c.unflatten_to.vec(),
                   flatten = c.flatten_from.vec()]() mutable {
    at::NoGradGuard no_grad;  // grad mode is per thread: this one only moves data
    try {
      const auto algo = static_cast<CpuAlgo>(action.algo);
      const int segments = action.channels > 0 ? action.channels : 1;
      switch (op) {
        case OpKind::kAllReduce:
          cpu_allreduce(algo, segments, *channel_, out, red.engine_op, tag);
          apply_scaling(red, out, size_);
          break;
        case OpKind::kBroadcast:
          cpu_broadcast(algo, segments, *channel_, out, root, tag);
          break;
        case OpKind::kReduce:
          cpu_reduce(algo, segments, *channel_, out, root, red.engine_op, tag);
          if (rank_ == root) apply_scaling(red, out, size_);
          break;
        case OpKind::kAllGather:
          cpu_allgather(algo, segments, *channel_, in, out, tag);
          for (size_t r = 0; r < unflatten.size(); ++r) {
            unflatten[r].copy_(out.narrow(0, r * in.numel(), in.numel()).view_as(unflatten[r]));
          }
          break;
        case OpKind::kReduceScatter:
          if (!flatten.empty()) {
            for (size_t r = 0; r < flatten.size(); ++r) {
              in.narrow(0, r * out.numel(), out.numel()).copy_(flatten[r].reshape({-1}));
            }
          }
          cpu_reduce_scatter(algo, segments, *channel_, in, out, red.engine_op, tag);
          apply_scaling(red, out, size_);
          break;
        default:
          TORCH_CHECK(false, "dynamiccl: no CPU schedule for ", op_name(op));
      }
    } catch (...) {
      future->setError(std::current_exception());
      return;
    }
    record_cpu_end(learned, rec_index, cell, start, trace);
    future->markCompleted(c10::IValue(outputs));
  };
  worker_.enqueue(std::move(storages), std::move(schedule));
  return c10::make_intrusive<DynamicWork>(rank_, c.type, profiling_title(c.title), nullptr,
                                          std::move(future), c.outputs.vec());
}

void ProcessGroupDynamicCCL::record_cpu_end(bool learned, uint64_t rec_index, SummaryCell* cell,
                                            int64_t start, TraceEntry* trace) {
  const int64_t end = now_ns();
  if (learned) {
    consensus_.complete(rec_index, end);  // the summary too, once the slot's start is checked
  } else {
    cell->add_duration(end - start);
  }
  if (trace) trace->end_ns.store(end, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Collectives: each one describes itself as a Call and goes through dispatch().

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "dynamiccl: allreduce takes one tensor per call, got ",
              tensors.size());
  at::Tensor& t = tensors[0];
  Call c(OpKind::kAllReduce, c10d::OpType::ALLREDUCE, "dynamiccl:all_reduce", t);
  c.reduction = plan_reduction(opts.reduceOp, t, size_, t.device().is_cpu());
  c.outputs = tensors;
  c.scaled = tensors;
  c.tunable = t.is_contiguous();
  c.out = &t;
  auto native_opts = with_timeout(opts, timeout_);
  native_opts.reduceOp = t.device().is_cpu() ? as_engine_op(c.reduction.engine_op) : opts.reduceOp;
  auto native = [&](c10d::Backend& e) { return e.allreduce(tensors, native_opts); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "dynamiccl: allreduce_coalesced needs at least one tensor");
  Call c(OpKind::kAllReduce, c10d::OpType::ALLREDUCE_COALESCED, "dynamiccl:all_reduce_coalesced", tensors[0]);
  c.bytes = 0;
  for (auto& t : tensors) c.bytes += nbytes(t);
  c.effective_bytes = c.bytes;
  c.reduction = plan_reduction(opts.reduceOp, tensors[0], size_, tensors[0].device().is_cpu());
  c.outputs = tensors;
  c.scaled = tensors;
  auto native_opts = with_timeout(opts, timeout_);
  if (tensors[0].device().is_cpu()) native_opts.reduceOp = as_engine_op(c.reduction.engine_op);
  auto native = [&](c10d::Backend& e) { return e.allreduce_coalesced(tensors, native_opts); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "dynamiccl: broadcast takes one tensor per call, got ",
              tensors.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "dynamiccl: broadcast root ",
              opts.rootRank, " is out of range; accepted: 0..", size_ - 1);
  at::Tensor& t = tensors[0];
  Call c(OpKind::kBroadcast, c10d::OpType::BROADCAST, "dynamiccl:broadcast", t);
  c.outputs = tensors;
  c.tunable = t.is_contiguous();
  c.out = &t;
  c.root = static_cast<int>(opts.rootRank);
  auto native_opts = with_timeout(opts, timeout_);
  auto native = [&](c10d::Backend& e) { return e.broadcast(tensors, native_opts); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::reduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::ReduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "dynamiccl: reduce takes one tensor per call, got ",
              tensors.size());
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "dynamiccl: reduce root ",
              opts.rootRank, " is out of range; accepted: 0..", size_ - 1);
  at::Tensor& t = tensors[0];
  Call c(OpKind::kReduce, c10d::OpType::REDUCE, "dynamiccl:reduce", t);
  c.reduction = plan_reduction(opts.reduceOp, t, size_, t.device().is_cpu());
  c.outputs = tensors;
  if (rank_ == opts.rootRank) c.scaled = tensors;
  c.tunable = t.is_contiguous();
  c.out = &t;
  c.root = static_cast<int>(opts.rootRank);
  auto native_opts = with_timeout(opts, timeout_);
  if (t.device().is_cpu()) native_opts.reduceOp = as_engine_op(c.reduction.engine_op);
  auto native = [&](c10d::Backend& e) { return e.reduce(tensors, native_opts); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
              "dynamiccl: allgather takes one input tensor and one output list per call");
  TORCH_CHECK(static_cast<int>(outputs[0].size()) == size_, "dynamiccl: allgather output list has ",
              outputs[0].size(), " tensors; it must have one per rank (", size_, ")");
  at::Tensor& in = inputs[0];
  Call c(OpKind::kAllGather, c10d::OpType::ALLGATHER, "dynamiccl:all_gather", in);
  c.effective_bytes = c.bytes * size_;
  c.outputs = outputs[0];
  bool uniform = in.is_contiguous();
  for (const auto& o : outputs[0]) {
    TORCH_CHECK(o.dtype() == in.dtype(), "dynamiccl: allgather output dtype ", o.scalar_type(),
                " does not match the input dtype ", in.scalar_type());
    uniform = uniform && o.numel() == in.numel() && o.device() == in.device();
  }
  c.tunable = uniform;
  c.in = &in;
  c.unflatten_to = outputs[0];
  auto native_opts = with_timeout(opts, timeout_);
  auto native = [&](c10d::Backend& e) { return e.allgather(outputs, inputs, native_opts); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(output.numel() == input.numel() * size_, "dynamiccl: all_gather_into_tensor output "
              "has ", output.numel(), " elements; it must have input.numel() * world size = ",
              input.numel() * size_);
  TORCH_CHECK(output.dtype() == input.dtype(), "dynamiccl: all_gather_into_tensor output dtype ",
              output.scalar_type(), " does not match the input dtype ", input.scalar_type());
  Call c(OpKind::kAllGather, c10d::OpType::_ALLGATHER_BASE, "dynamiccl:all_gather_into_tensor", input);
  c.effective_bytes = nbytes(output);
  c.outputs = output;
  c.tunable = input.is_contiguous() && output.is_contiguous();
  if (c.tunable) {
    c.in = &input;
    c.out = &output;
  }
  auto native_opts = with_timeout(opts, timeout_);
  auto native = [&](c10d::Backend& e) { return e._allgather_base(output, input, native_opts); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(),
              "dynamiccl: allgather_into_tensor_coalesced needs as many outputs as inputs (got ",
              outputs.size(), " and ", inputs.size(), ")");
  Call c(OpKind::kAllGather, c10d::OpType::COALESCED, "dynamiccl:all_gather_into_tensor_coalesced", inputs[0]);
  c.bytes = 0;
  for (auto& t : inputs) c.bytes += nbytes(t);
  c.effective_bytes = c.bytes * size_;
  c.outputs = outputs;
  auto native_opts = with_timeout(opts, timeout_);
  c10d::Backend* gloo = engines_.gloo.get();
  auto native = [&](c10d::Backend& e) -> c10::intrusive_ptr<c10d::Work> {
    if (&e != gloo) return e.allgather_into_tensor_coalesced(outputs, inputs, native_opts);
    // Gloo has no coalesced form: one all-gather per pair, one Work for the batch.
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (size_t i = 0; i < inputs.size(); ++i) {
      works.push_back(e._allgather_base(outputs[i], inputs[i], native_opts));
    }
    return c10::make_intrusive<CoalescedWork>(rank_, std::move(works));
  };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
              "dynamiccl: reduce_scatter takes one output tensor and one input list per call");
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == size_, "dynamiccl: reduce_scatter input list "
              "has ", inputs[0].size(), " tensors; it must have one per rank (", size_, ")");
  at::Tensor& out = outputs[0];
  Call c(OpKind::kReduceScatter, c10d::OpType::REDUCE_SCATTER, "dynamiccl:reduce_scatter", out);
  c.bytes = nbytes(out) * size_;
  c.effective_bytes = c.bytes;
  c.reduction = plan_reduction(opts.reduceOp, out, size_, out.device().is_cpu());
  c.outputs = outputs;
  c.scaled = outputs;
  bool uniform = out.is_contiguous();
  for (const auto& t : inputs[0]) {
    TORCH_CHECK(t.dtype() == out.dtype(), "dynamiccl: reduce_scatter input dtype ",
                t.scalar_type(), " does not match the output dtype ", out.scalar_type());
    uniform = uniform && t.numel() == out.numel() && t.device() == out.device();
  }
  auto native_opts = with_timeout(opts, timeout_);
  if (out.device().is_cpu()) native_opts.reduceOp = as_engine_op(c.reduction.engine_op);
  auto native = [&](c10d::Backend& e) { return e.reduce_scatter(outputs, inputs, native_opts); };
  c.native = native;
  c.tunable = uniform;
  c.out = &out;
  c.flatten_from = inputs[0];
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * size_, "dynamiccl: reduce_scatter_tensor input "
              "has ", input.numel(), " elements; it must have output.numel() * world size = ",
              output.numel() * size_);
  TORCH_CHECK(output.dtype() == input.dtype(), "dynamiccl: reduce_scatter_tensor output dtype ",
              output.scalar_type(), " does not match the input dtype ", input.scalar_type());
  Call c(OpKind::kReduceScatter, c10d::OpType::_REDUCE_SCATTER_BASE, "dynamiccl:reduce_scatter_tensor", input);
  c.reduction = plan_reduction(opts.reduceOp, input, size_, input.device().is_cpu());
  c.outputs = output;
  c.scaled = output;
  c.tunable = input.is_contiguous() && output.is_contiguous();
  if (c.tunable) {
    c.in = &input;
    c.out = &output;
  }
  auto native_opts = with_timeout(opts, timeout_);
  if (input.device().is_cpu()) native_opts.reduceOp = as_engine_op(c.reduction.engine_op);
  auto native = [&](c10d::Backend& e) {
    return e._reduce_scatter_base(output, input, native_opts);
  };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(),
              "dynamiccl: reduce_scatter_tensor_coalesced needs as many outputs as inputs (got ",
              outputs.size(), " and ", inputs.size(), ")");
  Call c(OpKind::kReduceScatter, c10d::OpType::COALESCED, "dynamiccl:reduce_scatter_tensor_coalesced", inputs[0]);
  c.bytes = 0;
  for (auto& t : inputs) c.bytes += nbytes(t);
  c.effective_bytes = c.bytes;
  c.reduction = plan_reduction(opts.reduceOp, inputs[0], size_, inputs[0].device().is_cpu());
  c.outputs = outputs;
  c.scaled = outputs;
  auto native_opts = with_timeout(opts, timeout_);
  if (inputs[0].device().is_cpu()) native_opts.reduceOp = as_engine_op(c.reduction.engine_op);
  c10d::Backend* gloo = engines_.gloo.get();
  auto native = [&](c10d::Backend& e) -> c10::intrusive_ptr<c10d::Work> {
    if (&e != gloo) return e.reduce_scatter_tensor_coalesced(outputs, inputs, native_opts);
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (size_t i = 0; i < inputs.size(); ++i) {
      works.push_back(e._reduce_scatter_base(outputs[i], inputs[i], native_opts));
    }
    return c10::make_intrusive<CoalescedWork>(rank_, std::move(works));
  };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // Deprecated upstream but still reachable (dist.all_gather_coalesced): the engine's own form.
  TORCH_CHECK(!inputs.empty(), "dynamiccl: allgather_coalesced needs input tensors");
  Call c(OpKind::kAllGather, c10d::OpType::ALLGATHER_COALESCED, "dynamiccl:all_gather_coalesced",
         inputs[0]);
  c.bytes = 0;
  for (auto& t : inputs) c.bytes += nbytes(t);
  c.effective_bytes = c.bytes * size_;
  auto native_opts = with_timeout(opts, timeout_);
  auto native = [&](c10d::Backend& e) {
    return e.allgather_coalesced(outputs, inputs, native_opts);
  };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "dynamiccl: gather takes one input tensor per call");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "dynamiccl: gather root ",
              opts.rootRank, " is out of range; accepted: 0..", size_ - 1);
  Call c(OpKind::kGather, c10d::OpType::GATHER, "dynamiccl:gather", inputs[0]);
  c.effective_bytes = c.bytes * size_;
  if (!outputs.empty()) c.outputs = outputs[0];
  auto native_opts = with_timeout(opts, timeout_);
  auto native = [&](c10d::Backend& e) { return e.gather(outputs, inputs, native_opts); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "dynamiccl: scatter takes one output tensor per call");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "dynamiccl: scatter root ",
              opts.rootRank, " is out of range; accepted: 0..", size_ - 1);
  Call c(OpKind::kScatter, c10d::OpType::SCATTER, "dynamiccl:scatter", outputs[0]);
  c.effective_bytes = c.bytes * size_;
  c.outputs = outputs;
  auto native_opts = with_timeout(opts, timeout_);
  auto native = [&](c10d::Backend& e) { return e.scatter(outputs, inputs, native_opts); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  Call c(OpKind::kAllToAll, c10d::OpType::ALLTOALL_BASE, "dynamiccl:all_to_all_single", input);
  c.outputs = output;
  auto native_opts = with_timeout(opts, timeout_);
  auto native = [&](c10d::Backend& e) {
    return e.alltoall_base(output, input, output_splits, input_splits, native_opts);
  };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::alltoall(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "dynamiccl: alltoall needs input tensors");
  Call c(OpKind::kAllToAll, c10d::OpType::ALLTOALL, "dynamiccl:all_to_all", inputs[0]);
  c.bytes = 0;
  for (auto& t : inputs) c.bytes += nbytes(t);
  c.effective_bytes = c.bytes;
  c.outputs = outputs;
  auto native_opts = with_timeout(opts, timeout_);
  c10d::Backend* gloo = engines_.gloo.get();
  auto native = [&](c10d::Backend& e) -> c10::intrusive_ptr<c10d::Work> {
    if (&e != gloo) return e.alltoall(outputs, inputs, native_opts);
    // Gloo has only the single-tensor form: exchange concatenated buffers with splits, then
    // copy the received pieces into the caller's list.
    std::vector<int64_t> in_splits, out_splits;
    std::vector<at::Tensor> flat_ins;
    for (auto& t : inputs) {
      in_splits.push_back(t.numel());
      flat_ins.push_back(t.reshape({-1}));
    }
    for (auto& t : outputs) out_splits.push_back(t.numel());
    at::Tensor in = at::cat(flat_ins);
    at::Tensor out = at::empty({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})},
                               in.options());
    // The engine may take its split vectors (it gets non-const references): hand it copies.
    std::vector<int64_t> engine_out_splits = out_splits, engine_in_splits = in_splits;
    auto work = e.alltoall_base(out, in, engine_out_splits, engine_in_splits, native_opts);
    auto copy_back = [out, outs = outputs, out_splits] {
      int64_t offset = 0;
      for (size_t i = 0; i < outs.size(); ++i) {
        at::Tensor dst = outs[i].detach();
        dst.copy_(out.narrow(0, offset, out_splits[i]).view_as(dst));
        offset += out_splits[i];
      }
    };
    return c10::make_intrusive<DynamicWork>(rank_, c10d::OpType::ALLTOALL, nullptr,
                                            std::move(work), nullptr, outputs, copy_back);
  };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::send(std::vector<at::Tensor>& tensors,
                                                            int dst, int tag) {
  TORCH_CHECK(tensors.size() == 1, "dynamiccl: send takes one tensor per call");
  TORCH_CHECK(dst >= 0 && dst < size_ && dst != rank_, "dynamiccl: send destination ", dst,
              " is invalid; accepted: another rank in 0..", size_ - 1);
  Call c(OpKind::kSend, c10d::OpType::SEND, "dynamiccl:send", tensors[0]);
  c.p2p = true;
  c.outputs = tensors;
  auto native = [&](c10d::Backend& e) { return e.send(tensors, dst, tag); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::recv(std::vector<at::Tensor>& tensors,
                                                            int src, int tag) {
  TORCH_CHECK(tensors.size() == 1, "dynamiccl: recv takes one tensor per call");
  TORCH_CHECK(src >= 0 && src < size_ && src != rank_, "dynamiccl: recv source ", src,
              " is invalid; accepted: another rank in 0..", size_ - 1);
  Call c(OpKind::kRecv, c10d::OpType::RECV, "dynamiccl:recv", tensors[0]);
  c.p2p = true;
  c.outputs = tensors;
  auto native = [&](c10d::Backend& e) { return e.recv(tensors, src, tag); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::recvAnysource(
    std::vector<at::Tensor>& tensors, int tag) {
  TORCH_CHECK(tensors.size() == 1, "dynamiccl: recv takes one tensor per call");
  Call c(OpKind::kRecv, c10d::OpType::RECVANYSOURCE, "dynamiccl:recv_anysource", tensors[0]);
  c.p2p = true;
  c.outputs = tensors;
  auto native = [&](c10d::Backend& e) { return e.recvAnysource(tensors, tag); };
  c.native = native;
  return dispatch(c);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::barrier(const c10d::BarrierOptions& opts) {
  // A barrier is host-blocking on every engine: run it on Gloo, which blocks the host in wait().
  Call c(OpKind::kBarrier, c10d::OpType::BARRIER, "dynamiccl:barrier", at::empty({0}, at::kByte));
  auto native_opts = with_timeout(opts, timeout_);
  native_opts.device_ids.clear();
  native_opts.device.reset();
  auto native = [&](c10d::Backend& e) { return e.barrier(native_opts); };
  c.native = native;
  return dispatch(c);
}

void ProcessGroupDynamicCCL::monitoredBarrier(const c10d::BarrierOptions& opts,
                                              bool wait_all_ranks) {
  // Gloo's monitored barrier names the ranks that did not arrive: exactly what a user wants.
  TORCH_CHECK(!shut_down_, "dynamiccl: monitored_barrier issued after shutdown()");
  engines_.gloo->monitoredBarrier(with_timeout(opts, timeout_), wait_all_ranks);
}

// ---------------------------------------------------------------------------------------------

void ProcessGroupDynamicCCL::agree_on_nccl_plugin() {
  nccl_plugin_checked_ = true;
  if (!config_.nccl_tuning) return;
  // A rank whose NCCL did not load the plugin (another communicator came first, a different
  // NCCL_TUNER_PLUGIN) would let NCCL choose while the others force: mismatched algorithms hang.
  // So the flag is agreed (MIN over ranks) and tuning steps aside everywhere if anyone lacks it.
  at::Tensor loaded = at::full({1}, nccl_plugin_loaded() ? 1.f : 0.f);
  std::vector<at::Tensor> payload{loaded};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp(c10d::ReduceOp::MIN);
  opts.timeout = timeout_;
  engines_.control->allreduce(payload, opts)->wait(timeout_);
  if (loaded.item<float>() < 0.5f) {
    TORCH_WARN_ONCE("dynamiccl: NCCL did not load the DynamICCL tuner plugin on every rank "
                    "(another NCCL communicator was created first, or NCCL_TUNER_PLUGIN differs); "
                    "NCCL tuning steps aside and NCCL decides as usual");
    nccl_plugin_active_ = false;
    for (auto& plan : op_plan_[kNccl]) plan = -1;
  }
}

void ProcessGroupDynamicCCL::startCoalescing() {
  TORCH_CHECK(!coalescing_, "dynamiccl: startCoalescing() called twice without endCoalescing()");
  coalescing_ = true;
  coalesced_works_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::endCoalescing() {
  TORCH_CHECK(coalescing_, "dynamiccl: endCoalescing() without startCoalescing()");
  coalescing_ = false;
  // CPU members were issued one by one (Gloo progresses them in any order); NCCL's ran as one
  // group whose endCoalescing work stands for all of them.
  std::vector<c10::intrusive_ptr<c10d::Work>> works = std::move(coalesced_works_);
  coalesced_works_.clear();
  if (nccl_coalescing_) {
    nccl_coalescing_ = false;
    if (auto w = engines_.nccl->endCoalescing()) works.push_back(w);
  }
  return c10::make_intrusive<CoalescedWork>(rank_, std::move(works));
}

void ProcessGroupDynamicCCL::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(!shut_down_, "dynamiccl: setTimeout() after shutdown()");
  timeout_ = timeout;
  consensus_.set_timeout(timeout);
  channel_->set_timeout(timeout);
  engines_.gloo->setTimeout(timeout);
  engines_.control->setTimeout(timeout);
  if (engines_.nccl) engines_.nccl->setTimeout(timeout);
}

void ProcessGroupDynamicCCL::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  worker_.stop();
  consensus_.drain();
  for (auto* e : {engines_.gloo.get(), engines_.control.get(), engines_.nccl.get()}) {
    if (e) e->shutdown();
  }
  // What was learned and measured stays readable; the engines and their threads go now.
  consensus_.release_engine();
  channel_.reset();
  engines_ = Engines{};
}

void ProcessGroupDynamicCCL::abort() {
  if (shut_down_) return;
  for (auto* e : {engines_.gloo.get(), engines_.control.get(), engines_.nccl.get()}) {
    if (e) e->abort();
  }
  shutdown();
}

}  // namespace dynamiccl
