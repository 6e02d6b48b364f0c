#include "engines/cpu/cpu_engine.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

namespace dynamiccl {

namespace {

// A call's tag: its number in the group and its schedule, so that ranks which disagree on the
// schedule never exchange messages (each waits for its own, and times out with an error).
uint32_t call_tag(uint32_t number, const Action& action) {
  return number * 2654435761u ^ (static_cast<uint32_t>(static_cast<uint8_t>(action.algo)) << 24 |
                                 static_cast<uint32_t>(static_cast<uint16_t>(action.channels)));
}

c10::intrusive_ptr<c10::ivalue::Future> tensor_list_future() {
  return c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

}  // namespace

CpuEngine::CpuEngine(c10::intrusive_ptr<c10d::Backend> p2p, std::chrono::milliseconds timeout)
    : channel_(std::move(p2p), timeout) {}

void CpuEngine::warm_connections() {
  const int n = channel_.size(), rank = channel_.rank();
  // The peers at distances +-2^j: ring neighbours, tree parents and children, recursive halving
  // and doubling partners (every peer in groups of up to 5, about 2 log2(n) in larger ones, where
  // all-to-all's other peers open on first use). The set is closed under negation: each
  // connection warms both ways.
  std::vector<int> shifts;
  for (int d = 1; d < n; d *= 2) {
    for (int k : {d, n - d}) {
      if (std::find(shifts.begin(), shifts.end(), k) == shifts.end()) shifts.push_back(k);
    }
  }
  if (shifts.empty()) return;                 // a group of one
  constexpr size_t kWindow = 8;               // shifts in flight: bounded receive buffers
  constexpr uint32_t kWarmTag = 0xffffffffu;  // nothing else is in flight yet
  // A send area and up to kWindow receive areas per creating thread, kept for its next groups: a
  // fresh set for every group left the heap fragmented (test_group_lifetime.py).
  const size_t receives = std::min(kWindow, shifts.size());
  thread_local std::vector<uint8_t> area;
  if (area.size() < (receives + 1) * kWarmBytes) area.resize((receives + 1) * kWarmBytes);
  auto piece = [](size_t i) {
    return at::from_blob(area.data() + i * kWarmBytes, {kWarmBytes}, at::kByte);
  };
  at::Tensor out = piece(receives);
  std::vector<at::Tensor> in;
  for (size_t i = 0; i < receives; ++i) in.push_back(piece(i));
  for (size_t first = 0; first < shifts.size(); first += kWindow) {
    std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, int>> works;  // (transfer, peer)
    for (size_t i = first; i < std::min(first + kWindow, shifts.size()); ++i) {
      const int to = (rank + shifts[i]) % n, from = (rank - shifts[i] + n) % n;
      works.emplace_back(channel_.isend(out, to, kWarmTag), to);
      works.emplace_back(channel_.irecv(in[i - first], from, kWarmTag), from);
    }
    for (const auto& [w, peer] : works) {
      try {
        channel_.wait(w);
      } catch (...) {  // a peer that died after connecting fails the group's creation here
        rethrow_naming(c10::str("dynamiccl: creating the group, rank ", rank, " of ", n,
                                " warming its connection with rank ", peer));
      }
    }
  }
}

std::function<void()> CpuEngine::rescaler(const CpuCallArgs& args) const {
  if (!args.reduction.rescales()) return nullptr;
  if (args.op == OpKind::kReduce && args.rescaled.empty()) {  // a non-root rank
    return [red = args.reduction, dtype = args.outputs[0].scalar_type()] {
      check_scaling(red, dtype);
    };
  }
  if (args.rescaled.empty()) return nullptr;
  return [red = args.reduction, rescaled = args.rescaled.vec(), n = channel_.size()] {
    for (const at::Tensor& t : rescaled) apply_scaling(red, t, n);
  };
}

c10::intrusive_ptr<c10::ivalue::Future> CpuEngine::rescale_after(
    const CpuCallArgs& args, const c10::intrusive_ptr<c10::ivalue::Future>& engine_future) const {
  auto rescale = rescaler(args);
  if (!rescale) return nullptr;
  return engine_future->then(
      [rescale = std::move(rescale), outputs = args.outputs.vec()](c10::ivalue::Future&) {
        rescale();
        return c10::IValue(outputs);
      },
      c10::ListType::create(c10::TensorType::get()));
}

c10::intrusive_ptr<c10::ivalue::Future> CpuEngine::run_schedule(const CpuCallArgs& args,
                                                                const Action& action) {
  return enqueue(args, action, /*test_effects=*/true);
}

c10::intrusive_ptr<c10::ivalue::Future> CpuEngine::min_allreduce(const at::Tensor& t) {
  if (channel_.size() == 1) {  // nothing to exchange: done now, on the caller's thread
    auto done = tensor_list_future();
    done->markCompleted(c10::IValue(std::vector<at::Tensor>{t}));
    return done;
  }
  static const int8_t rd = [] {
    const auto& all = cpu_schedules();
    return static_cast<int8_t>(std::find(all.begin(), all.end(), &recursive_doubling_schedule()) -
                               all.begin());
  }();
  CpuCallArgs args;
  args.op = OpKind::kAllReduce;
  args.reduction.engine_op = RedOp::MIN;
  args.outputs = t;
  args.in = args.out = &t;
  Action action;
  action.algo = rd;
  action.channels = 1;
  return enqueue(args, action, /*test_effects=*/false);
}

c10::intrusive_ptr<c10::ivalue::Future> CpuEngine::enqueue(const CpuCallArgs& args,
                                                           const Action& action,
                                                           bool test_effects) {
  // Schedules move data, not autograd history: they work on detached views (a bucket may
  // require grad, e.g. DDP with create_graph). List forms run on a flat buffer of the message.
  const int n = channel_.size();
  at::Tensor in = args.in ? args.in->detach().view({-1}) : at::Tensor();
  at::Tensor out = args.out ? args.out->detach().view({-1}) : at::Tensor();
  if (!args.gather_into.empty()) out = at::empty({in.numel() * n}, in.options());
  if (!args.scatter_from.empty()) in = at::empty({out.numel() * n}, out.options());
  // The caller's storages the schedule touches: a later schedule on one of them waits for this
  // one (schedule_worker.h).
  ScheduleWorker::Storages storages;
  for (const at::Tensor* t : {args.in, args.out}) {
    if (t) storages.push_back(t->storage().unsafeGetStorageImpl());
  }
  for (c10::ArrayRef<at::Tensor> list : {args.gather_into, args.scatter_from}) {
    for (const at::Tensor& t : list) storages.push_back(t.storage().unsafeGetStorageImpl());
  }
  auto future = tensor_list_future();
  auto task = [this, future, action, in, out, op = args.op, root = args.root, red = args.reduction,
               outputs = args.outputs.vec(), gather_into = args.gather_into.vec(),
               scatter_from = args.scatter_from.vec(), tag = call_tag(next_tag_++, action),
               delay = test_effects ? slow_.on(action.algo) : std::chrono::microseconds(0),
               debt = test_effects ? busy_.on(action.algo)
                                   : std::chrono::microseconds(0)]() mutable {
    at::NoGradGuard no_grad;  // grad mode is per thread: this one only moves data
    if (delay.count() > 0) std::this_thread::sleep_for(delay);
    try {
      for (size_t r = 0; r < scatter_from.size(); ++r) {
        in.narrow(0, r * out.numel(), out.numel()).copy_(scatter_from[r].reshape({-1}));
      }
      ScheduleCall call{channel_, in, out, red.engine_op, root, action.channels, tag};
      execute_schedule(*cpu_schedules()[action.algo], op, call);
      for (size_t r = 0; r < gather_into.size(); ++r) {
        gather_into[r].copy_(out.narrow(0, r * in.numel(), in.numel()).view_as(gather_into[r]));
      }
      const bool reduced_here = op != OpKind::kAllGather && op != OpKind::kBroadcast &&
                                op != OpKind::kAllToAll &&
                                (op != OpKind::kReduce || channel_.rank() == root);
      if (reduced_here) {
        apply_scaling(red, out, channel_.size());
      } else if (op == OpKind::kReduce) {
        check_scaling(red, out.scalar_type());
      }
    } catch (...) {
      future->setError(std::current_exception());
      return;
    }
    // Before completion: a caller that has waited on this call finds its debt.
    if (debt.count() > 0) test_debt_us_.fetch_add(debt.count());
    future->markCompleted(c10::IValue(outputs));
  };
  worker_.enqueue(std::move(storages), std::move(task));
  return future;
}

c10::intrusive_ptr<c10::ivalue::Future> CpuEngine::run_batch(const std::vector<CpuCallArgs>& parts,
                                                             c10::ArrayRef<at::Tensor> outputs,
                                                             const Action& action) {
  c10::List<c10::intrusive_ptr<c10::ivalue::Future>> futures(
      c10::FutureType::create(c10::ListType::create(c10::TensorType::get())));
  for (const CpuCallArgs& part : parts) futures.push_back(run_schedule(part, action));
  return c10::collectAll(futures)->then(
      [outputs = outputs.vec()](c10::ivalue::Future& all) {
        if (all.hasError()) std::rethrow_exception(all.exception_ptr());
        return c10::IValue(outputs);
      },
      c10::ListType::create(c10::TensorType::get()));
}

}  // namespace dynamiccl
