#include "backend/process_group_dynamiccl.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <type_traits>

#include "backend/dynamic_work.h"
#include "backend/hint_scope.h"
#include "backend/roles.h"
#include "engines/coalesced_work.h"
#include "engines/cpu/arm_catalog.h"
#include "engines/nccl/arm_catalog.h"
#include "engines/nccl/publish.h"
#include "prior/learned_prior_catalog.h"

namespace dynamiccl {

namespace {

constexpr EngineKind kCpu = EngineKind::kCpu;
constexpr EngineKind kNccl = EngineKind::kNccl;

uint64_t nbytes(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }

uint64_t total_bytes(const std::vector<at::Tensor>& tensors) {
  uint64_t bytes = 0;
  for (const at::Tensor& t : tensors) bytes += nbytes(t);
  return bytes;
}

// Work's constructor prepares a profiler range (allocating) whenever it gets a title: give it
// one only while the profiler has callbacks installed.
const char* profiling_title(const char* title) { return at::hasCallbacks() ? title : nullptr; }

// The reduce op the engine is asked for: the CPU engine's is the plan's (AVG runs as SUM, then a
// rescale); NCCL takes the requested one.
c10d::ReduceOp engine_reduce_op(const Reduction& plan, bool cpu_engine,
                                const c10d::ReduceOp& requested) {
  return cpu_engine ? c10d::ReduceOp(plan.engine_op) : requested;
}

// A rank argument (a root or a peer) of a group of `size` ranks. `self`: this rank, when the
// argument may not name it (point-to-point).
void check_rank(const char* op, const char* what, int64_t value, int size, int self = -1) {
  TORCH_CHECK_VALUE(value >= 0 && value < size && value != self, "dynamiccl: ", op, " ", what, " ",
                    value, " is out of range; accepted: ", self >= 0 ? "another rank in " : "",
                    "0..", size - 1);
}

// A point-to-point tag of the user's on the CPU engine: the range from
// P2PChannel::kFirstReservedTag up is our schedules' and the consensus rounds', which travel on
// the same Gloo.
void check_tag(const char* op, int tag) {
  TORCH_CHECK_VALUE(tag >= 0 && tag < P2PChannel::kFirstReservedTag, "dynamiccl: ", op, " tag ",
                    tag, " is not accepted; accepted: 0..", P2PChannel::kFirstReservedTag - 1,
                    " (tags from ", P2PChannel::kFirstReservedTag,
                    " up carry the group's own messages)");
}

// One tensor per rank in a list argument.
void check_per_rank(const char* op, const char* what, size_t count, int size) {
  TORCH_CHECK_VALUE(static_cast<int>(count) == size, "dynamiccl: ", op, " ", what, " has ", count,
                    " tensors; it must have one per rank (", size, ")");
}

// The flat "into tensor" forms: FSDP2 issues these (call_role tells FSDP traffic by them).
bool flat_form(c10d::OpType type) {
  return type == c10d::OpType::_ALLGATHER_BASE || type == c10d::OpType::_REDUCE_SCATTER_BASE ||
         type == c10d::OpType::COALESCED;
}

}  // namespace

// Everything dispatch() needs to know about one call besides how to issue it natively.
struct ProcessGroupDynamicCCL::Call {
  // bytes and effective bytes start as the sample's size; collectives whose message is larger
  // (gathers, lists) set them.
  Call(OpKind op, c10d::OpType type, const char* title, at::Tensor sample_tensor)
      : op(op), type(type), title(title), sample(std::move(sample_tensor)) {
    bytes = effective_bytes = nbytes(sample);
    p2p = op == OpKind::kSend || op == OpKind::kRecv;
    gloo_future = !p2p && op != OpKind::kReduceScatter;
    args.op = op;
  }
  OpKind op;
  c10d::OpType type;
  const char* title;             // the profiler's name for it
  at::Tensor sample;             // selects the engine
  uint64_t bytes = 0;            // this rank's payload
  uint64_t effective_bytes = 0;  // the size NCCL's tuner sees (the same on every rank)
  bool p2p;
  // Gloo gives this op's Work a future (not for point-to-point and reduce-scatter); NCCL always.
  bool gloo_future;
  // One collective an engine can run with a chosen arm: our schedule on CPU, the plugin's forced
  // choice on NCCL (which sees it as one call of `effective_bytes`). Non-contiguous tensors are
  // not, nor coalesced batches on NCCL (it merges them into one launch its tuner sees as a
  // different call): they always take the engine default.
  bool tunable = false;
  CpuCallArgs args;  // the caller's tensors (args.outputs: the Work's result)
  // A coalesced batch of one op kind on CPU: one decision for the batch (its total bytes), each
  // part run on the chosen schedule.
  std::vector<CpuCallArgs> parts;
  // The engine options' asyncOp. ProcessGroupNCCL runs a synchronous call (async_op=False) on the
  // caller's stream and returns no Work; a call whose arm we chose is issued async instead, so
  // that its Work can be timed, and the caller waits on ours.
  bool* engine_async_op = nullptr;
};

ProcessGroupDynamicCCL::ProcessGroupDynamicCCL(int rank, int size, Engines engines,
                                               BackendConfig config,
                                               std::chrono::milliseconds timeout, int nccl_channel)
    : Backend(rank, size),
      engines_(std::move(engines)),
      config_(std::move(config)),
      timeout_(timeout),
      telemetry_(config_.decision_log_capacity, config_.trace),
      nccl_channel_(nccl_channel) {
  TORCH_CHECK(engines_.gloo, "dynamiccl: the Gloo engine is required");
  TORCH_CHECK_VALUE(config_.round_calls > 0, "dynamiccl: round_calls must be positive, got ",
                    config_.round_calls);
  catalogs_[index(kCpu)] = std::make_shared<CpuArmCatalog>();
  if (engines_.nccl) {
    catalogs_[index(kNccl)] = std::make_shared<NcclArmCatalog>(
        nccl_catalog_for(nccl::resolve_topology(config_.nccl_topology), config_.nccl_group, {},
                         true, config_.nccl_version));
  }
  if (!config_.prior_path.empty()) use_learned_prior();
  // With enable_reconfigure the engines connect at the first reconfigure: until then nothing
  // runs over them, and calls pass through.
  start_learning(/*connected=*/!config_.connect_at_reconfigure, /*warm=*/true);
  init();
}

void ProcessGroupDynamicCCL::start_learning(bool connected, bool warm) {
  cpu_ = std::make_unique<CpuEngine>(engines_.gloo, timeout_);
  consensus_ = std::make_unique<Consensus>(config_.round_calls, config_.cost_reduce,
                                           rounds_on_cpu_engine());
  consensus_->set_timeout(timeout_);
  for (auto& learner : learners_) learner.reset();
  for (int e = 0; e < kNumEngines; ++e) {
    const bool tuned = catalogs_[e] && (e == index(kCpu) || config_.nccl_tuning);
    for (int o = 0; o < kNumOps; ++o) {
      const bool learned = tuned && catalogs_[e]->arms(static_cast<OpKind>(o)).size() > 1;
      plans_[e][o] = OpPlan{learned ? OpPlan::kLearned : OpPlan::kNative, kDefaultArm};
    }
  }
  resolve_forced_arms();
  apply_test_arm_effects();
  seq_collective_ = seq_p2p_ = 0;
  framework_marks_steps_ = user_marks_steps_ = step_end_pending_ = false;
  nccl_plugin_checked_ = false;
  nccl_plugin_active_ = true;
  suspended_ = !connected;
  // `off` never runs our schedules.
  if (connected && warm && config_.mode != Mode::kOff) cpu_->warm_connections();
}

// The consensus rounds ride on the Gloo engine the group has anyway: their all-reduce by our
// recursive doubling over its point-to-point operations, a disagreement's all-gather on it.
RoundTransport ProcessGroupDynamicCCL::rounds_on_cpu_engine() {
  RoundTransport t;
  t.min_allreduce = [cpu = cpu_.get()](const at::Tensor& payload) {
    return cpu->min_allreduce(payload);
  };  // (a new transport with each CpuEngine: start_learning)
  t.allgather = [this](const at::Tensor& mine) {
    std::vector<at::Tensor> in{mine};
    std::vector<std::vector<at::Tensor>> out(1);
    for (int r = 0; r < size_; ++r) out[0].push_back(at::empty_like(mine));
    c10d::AllgatherOptions opts;
    opts.timeout = timeout_;
    engines_.gloo->allgather(out, in, opts)->wait(timeout_);
    return out[0];
  };
  return t;
}

void ProcessGroupDynamicCCL::apply_test_arm_effects() {
  using us = std::chrono::microseconds;
  if (const int s = test_schedule(config_.test_slow_arm, "DYNAMICCL_TEST_SLOW_ARM"); s != -1) {
    cpu_->slow_schedule_for_tests(s, us(config_.test_slow_arm.us));
  }
  if (const int s = test_schedule(config_.test_busy_arm, "DYNAMICCL_TEST_BUSY_ARM"); s != -1) {
    cpu_->busy_schedule_for_tests(s, us(config_.test_busy_arm.us));
  }
}

int ProcessGroupDynamicCCL::test_schedule(const BackendConfig::TestArmEffect& effect,
                                          const char* var) {
  if (effect.arm.empty()) return -1;
  if (effect.arm == "*") return CpuEngine::kEverySchedule;
  std::string accepted = "*";
  for (int o = 0; o < kNumOps; ++o) {
    for (const Arm& arm : catalogs_[index(kCpu)]->arms(static_cast<OpKind>(o))) {
      if (arm.name == effect.arm && !arm.action.is_default()) return arm.action.algo;
    }
  }
  for (const Arm& arm : catalogs_[index(kCpu)]->arms(OpKind::kAllReduce)) {
    if (!arm.action.is_default()) accepted += ", " + arm.name;
  }
  TORCH_CHECK_VALUE(false, "dynamiccl: ", var, " names '", effect.arm,
                    "', which is not one of our CPU schedules; accepted: ", accepted);
}

// A forced arm name belongs to one engine; that engine's calls of the op use it, the other
// engine's are untouched. A name no engine knows is an error, on every rank, at init.
void ProcessGroupDynamicCCL::resolve_forced_arms() {
  for (const auto& [op_str, arm_str] : config_.force) {
    OpKind op;
    TORCH_CHECK_VALUE(parse_op(op_str, &op), "dynamiccl: DYNAMICCL_FORCE names unknown op '",
                      op_str, "'; accepted: ", op_names().joined());
    bool found = false;
    std::string valid;
    for (int e = 0; e < kNumEngines; ++e) {
      if (!catalogs_[e]) continue;
      const auto& arms = catalogs_[e]->arms(op);
      for (size_t i = 0; i < arms.size(); ++i) {
        // Every engine's catalog starts with "default": named once.
        if (valid.empty() || !arms[i].action.is_default()) {
          valid += (valid.empty() ? "" : ", ") + arms[i].name;
        }
        if (arms[i].name == arm_str && (e == index(kCpu) || config_.nccl_tuning)) {
          plans_[e][static_cast<int>(op)] = {OpPlan::kForced, static_cast<uint16_t>(i)};
          found = true;
        }
      }
    }
    TORCH_CHECK_VALUE(found, "dynamiccl: DYNAMICCL_FORCE arm '", arm_str, "' is not an arm of ",
                      op_str, "; accepted: ", valid);
  }
}

ProcessGroupDynamicCCL::~ProcessGroupDynamicCCL() {
  // Completion callbacks of inner works write into our telemetry: shutdown() lets the engines
  // (and their threads) go before the members those callbacks touch.
  shutdown();
  NcclChannel::close(nccl_channel_.id());
}

Role ProcessGroupDynamicCCL::group_role() {
  if (!group_identity_read_) read_group_identity();
  return group_role_;
}

void ProcessGroupDynamicCCL::read_group_identity() {
  group_identity_read_ = true;
  group_role_ = group_role_from_desc(getGroupDesc(), config_.role_map);
  // The engines record their calls in torch's flight recorder under the group's name (where they
  // record at all: backend.py tells torch which do).
  if (getGroupUid().empty()) return;  // a group made outside torch's helpers has no name
  for (c10d::Backend* engine : {engines_.gloo.get(), engines_.nccl.get()}) {
    if (!engine) continue;
    engine->setGroupUid(getGroupUid());
    engine->setGroupDesc(getGroupDesc());
  }
}

// Every engine's catalog takes the model's prior (checked here, at group creation: a model that
// cannot be used is a named error now, not a change of decisions later).
void ProcessGroupDynamicCCL::use_learned_prior() {
  const std::shared_ptr<const prior::Model> model = prior::Model::load(config_.prior_path);
  for (int e = 0; e < kNumEngines; ++e) {
    if (!catalogs_[e]) continue;
    catalogs_[e] = std::make_shared<prior::LearnedPriorCatalog>(
        catalogs_[e], model, static_cast<EngineKind>(e), nodes());
  }
}

Learner* ProcessGroupDynamicCCL::mutable_learner(EngineKind engine) {
  ensure_learner(engine);
  return learners_[index(engine)].get();
}

void ProcessGroupDynamicCCL::ensure_learner(EngineKind engine) {
  auto& learner = learners_[index(engine)];
  if (learner) return;
  TORCH_CHECK_VALUE(catalogs_[index(engine)], "dynamiccl: the ", engine_name(engine),
                    " engine is not available in this group");
  LearnerConfig cfg = config_.learner;
  cfg.mode = config_.mode;
  learner = std::make_unique<Learner>(cfg, catalogs_[index(engine)]);
  // Step numbers are the group's: a learner made later counts the steps already ended.
  for (uint64_t s = consensus_->steps_ended(); s > 0; --s) learner->mark_step();
  if (rounds_are_steps()) {
    learner->set_step_source(engine == kCpu ? StepSource::kRoundsJudged
                                            : StepSource::kRoundsIgnored);
  }
}

// ---------------------------------------------------------------------------------------------
// The path of one call: route -> decide -> issue -> attach completion -> finish.

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::dispatch(Call& c, NativeFn native) {
  TORCH_CHECK(!shut_down_, "dynamiccl: ", op_name(c.op), " issued after shutdown()");
  if (C10_UNLIKELY(estimating_)) return native(route(c) == kCpu ? *engines_.gloo : *engines_.nccl);
  if (!group_identity_read_) read_group_identity();
  if (!consensus_->failure().empty()) C10_THROW_ERROR(DistBackendError, consensus_->failure());
  if (config_.check_calls) check_call_agrees(c);
  const CallRecord rec = decide(c, route(c));
  Issued issued = issue(c, rec, native);
  // No Work and no future: the engine ran the call synchronously on the caller's stream
  // (ProcessGroupNCCL, async_op=False), and so do we: nothing to wait for, nothing to time.
  const bool synchronous = !issued.inner && !issued.future;
  const bool nccl_check = issued.nccl_check, nccl_delivered = issued.nccl_delivered;
  auto work = attach_completion(c, rec, std::move(issued));
  finish(c, rec, work, nccl_check, nccl_delivered);
  return synchronous ? nullptr : work;
}

EngineKind ProcessGroupDynamicCCL::route(const Call& c) {
  if (c.sample.device().is_cpu()) return cpu_engine(c.sample) ? kCpu : kNccl;
  TORCH_CHECK_VALUE(c.sample.device().is_cuda(), "dynamiccl: tensors on device ", c.sample.device(),
                    " are not supported; accepted: cpu, cuda");
  TORCH_CHECK(engines_.nccl, "dynamiccl: a CUDA tensor reached a group created without the NCCL "
                             "engine (was CUDA available when the group was created?)");
  return kNccl;
}

CallRecord ProcessGroupDynamicCCL::decide(const Call& c, EngineKind engine) {
  CallRecord r;
  r.seq = c.p2p ? seq_p2p_++ : seq_collective_++;
  r.bytes = c.bytes;
  r.op = c.op;
  r.engine = engine;
  // The context is built from these locals, not read back from `r`: reading the two adjacent
  // byte fields just written as one word stalls store forwarding on the hot path.
  // A step DDP's last bucket closed ends at the next collective (the same call on every rank):
  // the wait for the step's buckets, after the last one is issued, belongs to the step. Ending it
  // at the last bucket would charge the challenger's tail to the incumbent's step in a trial.
  if (step_end_pending_ && !c.p2p) {
    step_end_pending_ = false;
    end_step();
  }
  const Hint& hint = current_hint();
  const Role role = call_role(group_role_, c.op, flat_form(c.type), hint);  // read by dispatch
  const bool synchronous = c.engine_async_op && !*c.engine_async_op;
  const Exposure exposure = call_exposure(role, synchronous, hint);
  r.role = role;
  r.exposure = exposure;
  // Off mode, coalescing windows and untunable calls take the native path, and so do NCCL calls
  // until the first tunable one checked the plugin: it creates the communicator, which tells
  // whether NCCL loaded our plugin and consults it on the group's channel, and every rank must
  // agree on that before any NCCL decision is published.
  const bool nccl_unchecked = engine == kNccl && !nccl_plugin_checked_;
  OpPlan plan = plans_[index(engine)][static_cast<int>(c.op)];
  if (config_.mode == Mode::kOff || coalescing_ || !c.tunable || nccl_unchecked || suspended_) {
    plan = OpPlan{};
  }
  if (plan.kind == OpPlan::kForced) {
    r.arm = plan.forced_arm;
    r.action = catalogs_[index(engine)]->arms(c.op)[plan.forced_arm].action;
    r.forced = true;
  } else if (plan.kind == OpPlan::kLearned) {
    ensure_learner(engine);
    const Decision d = learners_[index(engine)]->decide(
        CollectiveContext{c.op, c.effective_bytes, size_, role, exposure, c.parts.size() > 1});
    r.state_id = d.state_id;
    r.arm = d.arm;
    r.epoch = d.epoch;
    r.probe = d.probe;
    r.after_probe = d.after_probe;
    r.action = d.action;
    r.learned = true;
    r.measured = d.measure;
  }
  if (r.learned || r.forced) telemetry_.log_decision(r);
  if (hint.is_last == 1) {
    if (rounds_are_steps()) steps_marked();
    framework_marks_steps_ = true;
    step_end_pending_ = true;
  }
  r.start_ns = now_ns();
  return r;
}

void ProcessGroupDynamicCCL::steps_marked() {
  for (auto& learner : learners_) {
    if (learner) learner->set_step_source(StepSource::kMarked);
  }
}

void ProcessGroupDynamicCCL::end_step() {
  // Tests only (DYNAMICCL_TEST_BUSY_ARM): what busy arms took from the step's compute, paid as the
  // step ends: the same debt at the same call on every rank. (Paid at any call, a rank whose busy
  // call completed later would pay one call later, and the skew would land in calls' durations.)
  if (cpu_) cpu_->pay_test_debt();
  for (auto& learner : learners_) {
    if (learner) learner->mark_step();
  }
  consensus_->end_step(now_ns());
}

ProcessGroupDynamicCCL::Issued ProcessGroupDynamicCCL::issue(const Call& c, const CallRecord& rec,
                                                             NativeFn native) {
  Issued out;
  if (rec.engine == kCpu && !rec.action.is_default()) {
    out.future = c.parts.empty() ? cpu_->run_schedule(c.args, rec.action)
                                 : cpu_->run_batch(c.parts, c.args.outputs, rec.action);
    return out;
  }
  c10d::Backend& engine = rec.engine == kCpu ? *engines_.gloo : *engines_.nccl;
  // Until the plugin check, the NCCL engine may create the group's communicator at any call: its
  // tuner binds to our channel then. The check's call publishes NCCL's own choice, which changes
  // nothing and tells whether NCCL consulted the plugin on the channel for it.
  const bool nccl_check = rec.engine == kNccl && !nccl_plugin_checked_ && !c.p2p;
  const bool nccl_checking = nccl_check && c.tunable && !coalescing_;
  if (rec.engine == kNccl) {
    // Inside a coalescing window NCCL needs the batch in one group (send/recv pairs would
    // deadlock otherwise): open it on the first CUDA call.
    if (coalescing_ && !nccl_coalescing_) {
      engines_.nccl->startCoalescing();
      nccl_coalescing_ = true;
    }
    if (nccl_check) nccl_channel_.expect_comm(static_cast<size_t>(size_));
    // The engine times its calls (GPU events) from the first one a state asks the cost of: a
    // group that never measures (off, frozen, forced) pays for no timing at all.
    if (rec.measured && !nccl_timing_) {
      engines_.nccl->enableCollectivesTiming();
      nccl_timing_ = true;
    }
    if (nccl_checking) {
      nccl_channel_.publish_nccl_choice(c.op, c.effective_bytes);
    } else {
      nccl_channel_.publish(c.op, c.effective_bytes, rec.action);
    }
    if (c.engine_async_op && (rec.learned || rec.forced)) *c.engine_async_op = true;
  }
  try {
    out.inner = native(engine);
  } catch (c10::Error& e) {
    // The engine's own error class (DistBackendError, ValueError, ...) reaches the user.
    if (rec.engine == kNccl) {
      nccl_channel_.clear();
      nccl_channel_.expect_done();
    }
    e.add_context(std::string("dynamiccl: ") + op_name(c.op) + " in the " +
                  engine_name(rec.engine) + " engine");
    throw;
  }
  if (rec.engine == kNccl) {
    out.nccl_unavailable = nccl_channel_.last_unavailable();
    if (rec.measured) out.nccl_channels = nccl_channel_.last_channels(c.op, c.effective_bytes);
    out.nccl_check = nccl_checking;
    out.nccl_delivered = nccl_checking && nccl_channel_.delivered();
    nccl_channel_.clear();
    if (nccl_check) nccl_channel_.expect_done();
  }
  if (!out.inner) return out;  // a synchronous NCCL call (see Call::engine_async_op)
  if (rec.engine == kNccl) {
    out.future = out.inner->getFuture();
  } else if (c.gloo_future) {
    out.future = out.inner->getFuture();
    if (auto rescaled = cpu_->rescale_after(c.args, out.future)) out.future = rescaled;
  } else {
    out.rescale_at_wait = cpu_->rescaler(c.args);  // the Work has no future: neither has ours
  }
  return out;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::attach_completion(const Call& c,
                                                                         const CallRecord& rec,
                                                                         Issued&& issued) {
  auto work = c10::make_intrusive<DynamicWork>(rank_, c.type, profiling_title(c.title),
                                               issued.inner, issued.future, c.args.outputs.vec());
  SummaryCell& cell = telemetry_.summary(rec.engine, c.op, size_bin(c.effective_bytes));
  cell.calls.fetch_add(1, std::memory_order_relaxed);
  cell.bytes.fetch_add(c.bytes, std::memory_order_relaxed);
  CallTiming& timing = work->timing;
  timing.cell = &cell;
  timing.start_ns = rec.start_ns;
  if (telemetry_.tracing()) timing.trace = &telemetry_.add_trace(rec);
  if (rec.learned) {
    const uint64_t index = consensus_->add_call(rec);
    if (rec.measured) {
      timing.consensus_index = index;
      ConsensusSlot& slot = consensus_->slot(index);
      slot.cell.store(&cell, std::memory_order_relaxed);
      slot.unavailable.store(issued.nccl_unavailable, std::memory_order_relaxed);
      slot.channels.store(issued.nccl_channels, std::memory_order_relaxed);
      if (rec.engine == kNccl) slot.timed_work = issued.inner;  // GPU time, read next round
    }
  }
  // CPU calls are timed on completion, on the thread that completes them, or at wait() when the
  // engine's Work has no future. NCCL calls report GPU time instead.
  if (rec.engine == kCpu && issued.future) {
    issued.future->addCallback(
        [this, w = work](c10::ivalue::Future&) { call_done(w->timing, now_ns()); });
  } else if (rec.engine == kCpu) {
    work->on_wait = [this, rescale = std::move(issued.rescale_at_wait)](DynamicWork& w) {
      if (rescale) rescale();
      call_done(w.timing, now_ns());
    };
  }
  return work;
}

// The per-call check of DYNAMICCL_CHECK=1 (or TORCH_DISTRIBUTED_DEBUG=DETAIL), as torch does it
// for gloo and nccl: every rank shares what it is about to run, and a call that differs anywhere
// fails on every rank with the per-rank values, before any data moves.
void ProcessGroupDynamicCCL::check_call_agrees(const Call& c) {
  if (c.p2p) return;  // a send and its receive differ by nature; Gloo checks their sizes
  const uint64_t seq = seq_collective_;
  at::Tensor mine = at::tensor(
      {static_cast<int64_t>(seq), static_cast<int64_t>(c.op),
       static_cast<int64_t>(c.sample.scalar_type()), static_cast<int64_t>(c.bytes),
       static_cast<int64_t>(c.effective_bytes), static_cast<int64_t>(c.args.root),
       static_cast<int64_t>(c.sample.device().is_cpu())},
      at::kLong);
  std::vector<at::Tensor> in{mine};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size_; ++r) out[0].push_back(at::empty_like(mine));
  c10d::AllgatherOptions opts;
  opts.timeout = timeout_;
  engines_.gloo->allgather(out, in, opts)->wait(timeout_);
  bool same = true;
  for (int r = 1; r < size_; ++r) same = same && at::equal(out[0][r], out[0][0]);
  if (same) return;
  std::ostringstream msg;
  msg << "dynamiccl: the ranks issued different collectives as call #" << seq
      << " of this group (DYNAMICCL_CHECK):";
  for (int r = 0; r < size_; ++r) {
    const int64_t* v = out[0][r].data_ptr<int64_t>();
    msg << "\n  rank " << r << ": " << op_name(static_cast<OpKind>(v[1])) << " on "
        << (v[6] ? "cpu" : "cuda") << ", dtype " << static_cast<c10::ScalarType>(v[2]) << ", "
        << v[3] << " bytes (" << v[4] << " in all), root " << v[5];
  }
  C10_THROW_ERROR(DistBackendError, msg.str());
}

void ProcessGroupDynamicCCL::call_done(const CallTiming& timing, int64_t end_ns) {
  if (timing.consensus_index != CallTiming::kNotLearned) {
    consensus_->complete(timing.consensus_index, end_ns);  // the summary too, once checked
  } else {
    timing.cell->add_duration(end_ns - timing.start_ns);
  }
  if (timing.trace) timing.trace->end_ns.store(end_ns, std::memory_order_relaxed);
}

void ProcessGroupDynamicCCL::finish(const Call& c, const CallRecord& rec,
                                    const c10::intrusive_ptr<c10d::Work>& work, bool nccl_check,
                                    bool nccl_delivered) {
  if (nccl_check) agree_on_nccl_plugin(nccl_delivered);
  // The round boundary (if this call ends a round) runs on every rank here.
  if (rec.learned &&
      consensus_->end_call({learners_[index(kCpu)].get(), learners_[index(kNccl)].get()}) &&
      rounds_are_steps()) {
    step_end_pending_ = true;  // ends at the next collective, as DDP's step does
  }
  if (coalescing_ && rec.engine == kCpu) coalesced_works_.push_back(work);
}

// A coalesced batch of all-gathers or reduce-scatters into tensors: one part per (input, output)
// pair; tunable on CPU while every pair is contiguous.
void ProcessGroupDynamicCCL::add_flat_parts(Call& c, std::vector<at::Tensor>& outputs,
                                            std::vector<at::Tensor>& inputs) {
  const bool gather = c.op == OpKind::kAllGather;
  c.tunable = cpu_engine(c.sample);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& whole = gather ? outputs[i] : inputs[i];
    const at::Tensor& piece = gather ? inputs[i] : outputs[i];
    TORCH_CHECK(whole.numel() == piece.numel() * size_ && whole.dtype() == piece.dtype(), c.title,
                " pair ", i, ": the ", gather ? "output" : "input", " must have the ",
                gather ? "input" : "output", "'s dtype and ", piece.numel() * size_,
                " elements (its numel x world size); got ", whole.numel(), " of ",
                whole.scalar_type());
    c.tunable = c.tunable && inputs[i].is_contiguous() && outputs[i].is_contiguous();
    CpuCallArgs part = c.args;
    part.outputs = outputs[i];
    if (!gather) part.rescaled = outputs[i];
    part.in = &inputs[i];
    part.out = &outputs[i];
    c.parts.push_back(part);
  }
}

// ---------------------------------------------------------------------------------------------
// Describing a call. Every collective is the same recipe: validate its arguments, describe it
// with the builder of its shape (one tensor, a flat pair, a coalesced batch, a list), prepare the
// engine's copy of its options, dispatch.

ProcessGroupDynamicCCL::Call ProcessGroupDynamicCCL::one_tensor_call(
    OpKind op, c10d::OpType type, const char* title, std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(tensors.size() == 1, "dynamiccl: ", op_name(op), " takes one tensor per call, got ",
              tensors.size());
  at::Tensor& t = tensors[0];
  Call c(op, type, title, t);
  c.args.outputs = tensors;
  c.tunable = !c.p2p && t.is_contiguous();
  c.args.out = &t;
  return c;
}

ProcessGroupDynamicCCL::Call ProcessGroupDynamicCCL::flat_pair_call(OpKind op, c10d::OpType type,
                                                                    const char* title,
                                                                    at::Tensor& output,
                                                                    at::Tensor& input) {
  Call c(op, type, title, input);
  c.args.outputs = output;
  c.tunable = input.is_contiguous() && output.is_contiguous();
  if (c.tunable) {
    c.args.in = &input;
    c.args.out = &output;
  }
  return c;
}

ProcessGroupDynamicCCL::Call ProcessGroupDynamicCCL::coalesced_call(
    OpKind op, const char* title, std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceOp* reduce_op) {
  TORCH_CHECK(!inputs.empty() && inputs.size() == outputs.size(), title,
              " needs as many outputs as inputs (got ", outputs.size(), " and ", inputs.size(),
              ")");
  Call c(op, c10d::OpType::COALESCED, title, inputs[0]);
  c.bytes = total_bytes(inputs);
  c.effective_bytes = op == OpKind::kAllGather ? c.bytes * size_ : c.bytes;
  c.args.outputs = outputs;
  if (reduce_op) set_reduction(c, *reduce_op, outputs);  // before the parts copy the arguments
  add_flat_parts(c, outputs, inputs);
  return c;
}

// AVG and PREMUL_SUM on CPU run as SUM, then `rescaled` is rescaled (cpu/reduction.h).
void ProcessGroupDynamicCCL::set_reduction(Call& c, const c10d::ReduceOp& op,
                                           c10::ArrayRef<at::Tensor> rescaled) {
  c.args.reduction = plan_reduction(op, c.sample, cpu_engine(c.sample));
  c.args.rescaled = rescaled;
}

namespace {

// Which engine options carry a reduce op (the CPU engine may be asked for another one).
template <typename T, typename = void>
struct HasReduceOp : std::false_type {};
template <typename T>
struct HasReduceOp<T, std::void_t<decltype(std::declval<T&>().reduceOp)>> : std::true_type {};

}  // namespace

// The engine's copy of a call's options: our timeout where the caller set none, the reduce op the
// engine runs (CPU: the plan's, see set_reduction), and its asyncOp tied to the call (see
// Call::engine_async_op). `engine_opts` must outlive the dispatch.
template <typename Opts>
void ProcessGroupDynamicCCL::prepare_engine_options(Call& c, Opts& engine_opts) {
  if (engine_opts.timeout == c10d::kUnsetTimeout) engine_opts.timeout = timeout_;
  c.engine_async_op = &engine_opts.asyncOp;
  if constexpr (HasReduceOp<Opts>::value) {
    engine_opts.reduceOp = engine_reduce_op(c.args.reduction, cpu_engine(c.sample),
                                            engine_opts.reduceOp);
  }
}

// Gloo has no coalesced form of the flat collectives: one call per (output, input) pair and one
// Work for the batch.
template <typename PerPair>
c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::one_call_per_pair(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, PerPair per_pair) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (size_t i = 0; i < inputs.size(); ++i) works.push_back(per_pair(outputs[i], inputs[i]));
  return c10::make_intrusive<CoalescedWork>(rank_, std::move(works));
}

// ---------------------------------------------------------------------------------------------
// Collectives.

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  Call c = one_tensor_call(OpKind::kAllReduce, c10d::OpType::ALLREDUCE, "dynamiccl:all_reduce",
                           tensors);
  set_reduction(c, opts.reduceOp, tensors);
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) { return e.allreduce(tensors, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "dynamiccl: allreduce_coalesced needs at least one tensor");
  Call c(OpKind::kAllReduce, c10d::OpType::ALLREDUCE_COALESCED, "dynamiccl:all_reduce_coalesced",
         tensors[0]);
  c.bytes = c.effective_bytes = total_bytes(tensors);
  c.args.outputs = tensors;
  set_reduction(c, opts.reduceOp, tensors);
  c.tunable = cpu_engine(c.sample);
  for (const at::Tensor& t : tensors) {
    c.tunable = c.tunable && t.is_contiguous() && t.scalar_type() == c.sample.scalar_type();
    CpuCallArgs part = c.args;
    part.outputs = part.rescaled = t;
    part.out = &t;
    c.parts.push_back(part);
  }
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) { return e.allreduce_coalesced(tensors, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::broadcast(
    std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  check_rank("broadcast", "root", opts.rootRank, size_);
  Call c = one_tensor_call(OpKind::kBroadcast, c10d::OpType::BROADCAST, "dynamiccl:broadcast",
                           tensors);
  c.args.root = static_cast<int>(opts.rootRank);
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) { return e.broadcast(tensors, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::reduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::ReduceOptions& opts) {
  check_rank("reduce", "root", opts.rootRank, size_);
  Call c = one_tensor_call(OpKind::kReduce, c10d::OpType::REDUCE, "dynamiccl:reduce", tensors);
  // Only the root's result is defined: only it is rescaled.
  set_reduction(c, opts.reduceOp,
                rank_ == opts.rootRank ? c10::ArrayRef<at::Tensor>(tensors)
                                       : c10::ArrayRef<at::Tensor>());
  c.args.root = static_cast<int>(opts.rootRank);
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) { return e.reduce(tensors, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1 && outputs.size() == 1,
              "dynamiccl: allgather takes one input tensor and one output list per call");
  check_per_rank("allgather", "output list", outputs[0].size(), size_);
  at::Tensor& in = inputs[0];
  bool uniform = in.is_contiguous();
  for (const auto& o : outputs[0]) {
    TORCH_CHECK(o.dtype() == in.dtype(), "dynamiccl: allgather output dtype ", o.scalar_type(),
                " does not match the input dtype ", in.scalar_type());
    uniform = uniform && o.numel() == in.numel() && o.device() == in.device();
  }
  Call c(OpKind::kAllGather, c10d::OpType::ALLGATHER, "dynamiccl:all_gather", in);
  c.effective_bytes = c.bytes * size_;
  c.args.outputs = outputs[0];
  c.tunable = uniform;
  c.args.in = &in;
  c.args.gather_into = outputs[0];
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) { return e.allgather(outputs, inputs, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(output.numel() == input.numel() * size_,
              "dynamiccl: all_gather_into_tensor output "
              "has ",
              output.numel(),
              " elements; it must have input.numel() * world size = ", input.numel() * size_);
  TORCH_CHECK(output.dtype() == input.dtype(), "dynamiccl: all_gather_into_tensor output dtype ",
              output.scalar_type(), " does not match the input dtype ", input.scalar_type());
  Call c = flat_pair_call(OpKind::kAllGather, c10d::OpType::_ALLGATHER_BASE,
                          "dynamiccl:all_gather_into_tensor", output, input);
  c.effective_bytes = nbytes(output);
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c,
                  [&](c10d::Backend& e) { return e._allgather_base(output, input, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  Call c = coalesced_call(OpKind::kAllGather, "dynamiccl:all_gather_into_tensor_coalesced", outputs,
                          inputs);
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) {
    if (&e != engines_.gloo.get()) {
      return e.allgather_into_tensor_coalesced(outputs, inputs, engine_opts);
    }
    return one_call_per_pair(outputs, inputs, [&](at::Tensor& out, at::Tensor& in) {
      return e._allgather_base(out, in, engine_opts);
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1 && inputs.size() == 1,
              "dynamiccl: reduce_scatter takes one output tensor and one input list per call");
  check_per_rank("reduce_scatter", "input list", inputs[0].size(), size_);
  at::Tensor& out = outputs[0];
  bool uniform = out.is_contiguous();
  for (const auto& t : inputs[0]) {
    TORCH_CHECK(t.dtype() == out.dtype(), "dynamiccl: reduce_scatter input dtype ", t.scalar_type(),
                " does not match the output dtype ", out.scalar_type());
    uniform = uniform && t.numel() == out.numel() && t.device() == out.device();
  }
  Call c(OpKind::kReduceScatter, c10d::OpType::REDUCE_SCATTER, "dynamiccl:reduce_scatter", out);
  c.bytes = c.effective_bytes = nbytes(out) * size_;
  c.args.outputs = outputs;
  set_reduction(c, opts.reduceOp, outputs);
  c.tunable = uniform;
  c.args.out = &out;
  c.args.scatter_from = inputs[0];
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c,
                  [&](c10d::Backend& e) { return e.reduce_scatter(outputs, inputs, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(input.numel() == output.numel() * size_,
              "dynamiccl: reduce_scatter_tensor input "
              "has ",
              input.numel(),
              " elements; it must have output.numel() * world size = ", output.numel() * size_);
  TORCH_CHECK(output.dtype() == input.dtype(), "dynamiccl: reduce_scatter_tensor output dtype ",
              output.scalar_type(), " does not match the input dtype ", input.scalar_type());
  Call c = flat_pair_call(OpKind::kReduceScatter, c10d::OpType::_REDUCE_SCATTER_BASE,
                          "dynamiccl:reduce_scatter_tensor", output, input);
  set_reduction(c, opts.reduceOp, output);
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) {
    return e._reduce_scatter_base(output, input, engine_opts);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  Call c = coalesced_call(OpKind::kReduceScatter, "dynamiccl:reduce_scatter_tensor_coalesced",
                          outputs, inputs, &opts.reduceOp);
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) {
    if (&e != engines_.gloo.get()) {
      return e.reduce_scatter_tensor_coalesced(outputs, inputs, engine_opts);
    }
    return one_call_per_pair(outputs, inputs, [&](at::Tensor& out, at::Tensor& in) {
      return e._reduce_scatter_base(out, in, engine_opts);
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  // Deprecated upstream but still reachable (dist.all_gather_coalesced): the engine's own form.
  TORCH_CHECK(!inputs.empty(), "dynamiccl: allgather_coalesced needs input tensors");
  Call c(OpKind::kAllGather, c10d::OpType::ALLGATHER_COALESCED, "dynamiccl:all_gather_coalesced",
         inputs[0]);
  c.bytes = total_bytes(inputs);
  c.effective_bytes = c.bytes * size_;
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) {
    return e.allgather_coalesced(outputs, inputs, engine_opts);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  TORCH_CHECK(inputs.size() == 1, "dynamiccl: gather takes one input tensor per call");
  check_rank("gather", "root", opts.rootRank, size_);
  Call c(OpKind::kGather, c10d::OpType::GATHER, "dynamiccl:gather", inputs[0]);
  c.effective_bytes = c.bytes * size_;
  if (!outputs.empty()) c.args.outputs = outputs[0];
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) { return e.gather(outputs, inputs, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == 1, "dynamiccl: scatter takes one output tensor per call");
  check_rank("scatter", "root", opts.rootRank, size_);
  Call c(OpKind::kScatter, c10d::OpType::SCATTER, "dynamiccl:scatter", outputs[0]);
  c.effective_bytes = c.bytes * size_;
  c.args.outputs = outputs;
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) { return e.scatter(outputs, inputs, engine_opts); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  Call c = flat_pair_call(OpKind::kAllToAll, c10d::OpType::ALLTOALL_BASE,
                          "dynamiccl:all_to_all_single", output, input);
  // Our schedules run equal splits (every block the same size); uneven ones stay Gloo's.
  auto equal = [&](const std::vector<int64_t>& splits, const at::Tensor& t) {
    return std::all_of(splits.begin(), splits.end(),
                       [&](int64_t s) { return s * size_ == t.size(0); });
  };
  c.tunable = c.tunable && cpu_engine(input) && input.dim() > 0 &&
              output.sizes() == input.sizes() && output.scalar_type() == input.scalar_type() &&
              input.size(0) % size_ == 0 && equal(input_splits, input) &&
              equal(output_splits, output);
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) {
    return e.alltoall_base(output, input, output_splits, input_splits, engine_opts);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::alltoall(std::vector<at::Tensor>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(!inputs.empty(), "dynamiccl: alltoall needs input tensors");
  Call c(OpKind::kAllToAll, c10d::OpType::ALLTOALL, "dynamiccl:all_to_all", inputs[0]);
  c.bytes = c.effective_bytes = total_bytes(inputs);
  c.args.outputs = outputs;
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  return dispatch(c, [&](c10d::Backend& e) {
    if (&e != engines_.gloo.get()) return e.alltoall(outputs, inputs, engine_opts);
    return alltoall_list_on_gloo(e, outputs, inputs, engine_opts);
  });
}

// Gloo has only the single-tensor all-to-all: exchange concatenated buffers with splits, then
// copy the received pieces into the caller's list.
c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::alltoall_list_on_gloo(
    c10d::Backend& gloo, std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllToAllOptions& opts) {
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
  auto work = gloo.alltoall_base(out, in, engine_out_splits, engine_in_splits, opts);
  auto copied = work->getFuture()->then(
      [out, outs = outputs, out_splits](c10::ivalue::Future&) -> c10::IValue {
        int64_t offset = 0;
        for (size_t i = 0; i < outs.size(); ++i) {
          at::Tensor dst = outs[i].detach();
          dst.copy_(out.narrow(0, offset, out_splits[i]).view_as(dst));
          offset += out_splits[i];
        }
        return c10::IValue(outs);
      },
      c10::ListType::create(c10::TensorType::get()));
  return c10::make_intrusive<DynamicWork>(rank_, c10d::OpType::ALLTOALL, nullptr, std::move(work),
                                          std::move(copied), outputs);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::send(std::vector<at::Tensor>& tensors,
                                                            int dst, int tag) {
  check_rank("send", "destination", dst, size_, rank_);
  if (!tensors.empty() && cpu_engine(tensors[0])) check_tag("send", tag);
  Call c = one_tensor_call(OpKind::kSend, c10d::OpType::SEND, "dynamiccl:send", tensors);
  return dispatch(c, [&](c10d::Backend& e) { return e.send(tensors, dst, tag); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::recv(std::vector<at::Tensor>& tensors,
                                                            int src, int tag) {
  check_rank("recv", "source", src, size_, rank_);
  if (!tensors.empty() && cpu_engine(tensors[0])) check_tag("recv", tag);
  Call c = one_tensor_call(OpKind::kRecv, c10d::OpType::RECV, "dynamiccl:recv", tensors);
  return dispatch(c, [&](c10d::Backend& e) { return e.recv(tensors, src, tag); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::recvAnysource(
    std::vector<at::Tensor>& tensors, int tag) {
  if (!tensors.empty() && cpu_engine(tensors[0])) check_tag("recv", tag);
  Call c = one_tensor_call(OpKind::kRecv, c10d::OpType::RECVANYSOURCE, "dynamiccl:recv_anysource",
                           tensors);
  return dispatch(c, [&](c10d::Backend& e) { return e.recvAnysource(tensors, tag); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::barrier(const c10d::BarrierOptions& opts) {
  // A barrier is host-blocking on every engine: run it on Gloo, which blocks the host in wait().
  Call c(OpKind::kBarrier, c10d::OpType::BARRIER, "dynamiccl:barrier", at::empty({0}, at::kByte));
  auto engine_opts = opts;
  prepare_engine_options(c, engine_opts);
  engine_opts.device_ids.clear();
  engine_opts.device.reset();
  return dispatch(c, [&](c10d::Backend& e) { return e.barrier(engine_opts); });
}

void ProcessGroupDynamicCCL::monitoredBarrier(const c10d::BarrierOptions& opts,
                                              bool wait_all_ranks) {
  // Gloo's monitored barrier names the ranks that did not arrive: exactly what a user wants.
  TORCH_CHECK(!shut_down_, "dynamiccl: monitored_barrier issued after shutdown()");
  auto engine_opts = opts;
  if (engine_opts.timeout == c10d::kUnsetTimeout) engine_opts.timeout = timeout_;
  engines_.gloo->monitoredBarrier(engine_opts, wait_all_ranks);
}

// ---------------------------------------------------------------------------------------------

void ProcessGroupDynamicCCL::agree_on_nccl_plugin(bool delivered) {
  nccl_plugin_checked_ = true;
  if (!config_.nccl_tuning) return;
  // A rank whose NCCL did not load the plugin (another communicator came first, a different
  // NCCL_TUNER_PLUGIN), or did not consult it on the group's channel (its communicator was not
  // bound to it), would let NCCL choose while the others force: mismatched algorithms hang. So
  // both flags are agreed (MIN over ranks) and tuning steps aside everywhere if anyone lacks one.
  at::Tensor flags = at::tensor({nccl_plugin_loaded() ? 1.f : 0.f, delivered ? 1.f : 0.f});
  std::vector<at::Tensor> payload{flags};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp(c10d::ReduceOp::MIN);
  opts.timeout = timeout_;
  engines_.gloo->allreduce(payload, opts)->wait(timeout_);
  const float* agreed = flags.data_ptr<float>();
  if (agreed[0] < 0.5f) {
    TORCH_WARN_ONCE("dynamiccl: NCCL did not load the DynamICCL tuner plugin on every rank "
                    "(another NCCL communicator was created first, or NCCL_TUNER_PLUGIN differs); "
                    "NCCL tuning steps aside and NCCL decides as usual");
  } else if (agreed[1] < 0.5f) {
    TORCH_WARN_ONCE("dynamiccl: NCCL did not consult the DynamICCL tuner plugin for this group's "
                    "communicator on every rank (it was created outside the group's window, or "
                    "by an engine that does not call the tuner for it); NCCL tuning steps aside "
                    "and NCCL decides as usual");
  }
  if (agreed[0] < 0.5f || agreed[1] < 0.5f) {
    nccl_plugin_active_ = false;
    for (OpPlan& plan : plans_[index(kNccl)]) plan = OpPlan{};
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

}  // namespace dynamiccl
