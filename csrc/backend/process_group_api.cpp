// What the group offers of c10d::Backend beyond its collectives (backend/surface.h says how each
// virtual is answered): its life cycle (timeouts, split, merge, reconfigure, abort, shutdown),
// which must reach every engine and our own state alike, and what is handed to the engines
// unchanged.
#include <c10/util/Exception.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "backend/dynamic_work.h"
#include "backend/process_group_dynamiccl.h"
#include "engines/coalesced_work.h"

namespace dynamiccl {

namespace {

#ifdef C10D_BACKEND_HAS_RECONFIGURE
// A group with a CUDA engine hands out both engines' reconfigure handles as one:
// "dynamiccl:<length of Gloo's>:<Gloo's><the CUDA engine's>". A CPU group hands out Gloo's as is.
constexpr char kHandlePrefix[] = "dynamiccl:";

std::string join_handles(const std::string& gloo, const std::string& cuda) {
  return kHandlePrefix + std::to_string(gloo.size()) + ":" + gloo + cuda;
}

std::pair<std::string, std::string> split_handle(const std::string& h) {
  const size_t prefix = sizeof(kHandlePrefix) - 1;
  const size_t colon = h.find(':', prefix);
  size_t length = std::string::npos;
  if (h.compare(0, prefix, kHandlePrefix) == 0 && colon != std::string::npos) {
    try {
      length = std::stoul(h.substr(prefix, colon - prefix));
    } catch (const std::exception&) {
    }
  }
  TORCH_CHECK_VALUE(length != std::string::npos && colon + 1 + length <= h.size(),
                    "dynamiccl: reconfigure handle '", h,
                    "' is not one of a dynamiccl group with a CUDA engine; accepted: the handles "
                    "its ranks' get_reconfigure_handle() returned");
  return {h.substr(colon + 1, length), h.substr(colon + 1 + length)};
}
#endif

// An engine's own options (their type kept where torch can copy them so) for a group merge()
// makes of it, with the merged group's timeout and name.
c10::intrusive_ptr<c10d::Backend::Options> merged_options(
    c10d::Backend& engine, const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
#if DYNAMICCL_C10D_HAS_2_14_SURFACE
  auto o = engine.getBackendOptions()->clone();
#else
  auto o = c10::make_intrusive<c10d::Backend::Options>(*engine.getBackendOptions());
#endif
  if (opts) {
    o->timeout = opts->timeout;
    o->group_name = opts->group_name;
    o->group_desc = opts->group_desc;
  }
  return o;
}

}  // namespace

c10d::Backend& ProcessGroupDynamicCCL::api_engine(const char* what) const {
  TORCH_CHECK(!shut_down_, "dynamiccl: ", what, " after shutdown()");
  return engines_.nccl ? *engines_.nccl : *engines_.gloo;
}

c10d::Backend& ProcessGroupDynamicCCL::engine_of(const at::Tensor& t, const char* what) const {
  TORCH_CHECK(!shut_down_, "dynamiccl: ", what, " after shutdown()");
  if (cpu_engine(t)) return *engines_.gloo;
  TORCH_CHECK(engines_.nccl, "dynamiccl: ", what, " on ", t.device(),
              " reached a group created without a CUDA engine");
  return *engines_.nccl;
}

// ---- timeouts, options, splitting ------------------------------------------------------------

void ProcessGroupDynamicCCL::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(!shut_down_, "dynamiccl: setTimeout() after shutdown()");
  timeout_ = timeout;
  consensus_->set_timeout(timeout);
  cpu_->set_timeout(timeout);
  engines_.gloo->setTimeout(timeout);
  if (engines_.nccl) engines_.nccl->setTimeout(timeout);
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupDynamicCCL::getBackendOptions() {
  auto opts = c10::make_intrusive<Options>(getBackendName(), timeout_);
  opts->group_name = getGroupUid();
  opts->group_desc = getGroupDesc();
  return opts;
}

void ProcessGroupDynamicCCL::setGroupUid(const std::string& pg_uid) {
  Backend::setGroupUid(pg_uid);
  group_identity_read_ = false;  // the engines take the name at the next call
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupDynamicCCL::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  TORCH_CHECK(!shut_down_, "dynamiccl: split() after shutdown()");
  TORCH_CHECK(factories_.split, "dynamiccl: this group cannot be split (no creator was given)");
  // A rank outside the child takes no part: our engines are made afresh, not split.
  if (std::find(ranks.begin(), ranks.end(), rank_) == ranks.end()) return nullptr;
  for (int r : ranks) {
    TORCH_CHECK_VALUE(r >= 0 && r < size_, "dynamiccl: split rank ", r,
                      " is out of range; accepted: 0..", size_ - 1);
  }
  SplitRequest req{store, ranks, rank_, opts ? opts->timeout : timeout_, "", ""};
  if (opts) {
    req.group_name = opts->group_name;
    req.group_desc = opts->group_desc;
  }
  return factories_.split(req);
}

// Gloo's merge (the remote group's ranks join this one's over `store`), wrapped as a new group by
// the creator. A CUDA engine that cannot merge (torch's NCCL engines) raises its own error first.
c10::intrusive_ptr<c10d::Backend> ProcessGroupDynamicCCL::merge(
    const c10::intrusive_ptr<c10d::Store>& store, const c10::intrusive_ptr<Options>& opts,
    const int& rank, const int& size) {
  TORCH_CHECK(!shut_down_, "dynamiccl: merge() after shutdown()");
  TORCH_CHECK(factories_.merge, "dynamiccl: this group cannot be merged (no creator was given)");
  c10::intrusive_ptr<c10d::Backend> cuda;
  if (engines_.nccl) {
    cuda = engines_.nccl->merge(store, merged_options(*engines_.nccl, opts), rank, size);
  }
  auto gloo = engines_.gloo->merge(store, merged_options(*engines_.gloo, opts), rank, size);
  return factories_.merge(MergeRequest{store, gloo, cuda, rank, size,
                                       opts ? opts->timeout : timeout_,
                                       opts ? opts->group_name : "", opts ? opts->group_desc : ""});
}

// Eager init (init_process_group(device_id=...)) connects NCCL's communicator at once: its tuner
// binds to the group's channel.
void ProcessGroupDynamicCCL::eagerConnectSingleDevice(at::Device device) {
  if (!device.is_cuda() || !engines_.nccl) return;
  nccl_channel_.expect_comm(static_cast<size_t>(size_));
  try {
    engines_.nccl->eagerConnectSingleDevice(device);
  } catch (...) {
    nccl_channel_.expect_done();
    throw;
  }
  nccl_channel_.expect_done();
}

// ---- fault tolerance -------------------------------------------------------------------------

c10d::ErrorType ProcessGroupDynamicCCL::getError() {
  if (shut_down_) return c10d::ErrorType::SUCCESS;
  for (c10d::Backend* e : {engines_.gloo.get(), engines_.nccl.get()}) {
    if (e && e->getError() != c10d::ErrorType::SUCCESS) return e->getError();
  }
  return consensus_->failure().empty() ? c10d::ErrorType::SUCCESS : c10d::ErrorType::COMM_ERROR;
}

// Our schedules and the round in flight are let go (they may wait on a rank that is gone); calls
// pass through until a reconfigure starts learning again on the new membership.
void ProcessGroupDynamicCCL::stop_learning() {
  if (suspended_) return;
  suspended_ = true;
  consensus_->abandon();
  cpu_->stop();
}

void ProcessGroupDynamicCCL::abort() {
  if (shut_down_) return;
  for (auto* e : {engines_.gloo.get(), engines_.nccl.get()}) {
    if (e) e->abort();
  }
  stop_learning();
}

void ProcessGroupDynamicCCL::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  factories_ = Factories{};
  cpu_->stop();
  consensus_->drain();
  for (auto* e : {engines_.gloo.get(), engines_.nccl.get()}) {
    if (e) e->shutdown();
  }
  // What was learned and measured stays readable; the engines and their threads go now.
  consensus_->release_engine();
  cpu_.reset();
  engines_ = Engines{};
}

#ifdef C10D_BACKEND_HAS_RECONFIGURE
bool ProcessGroupDynamicCCL::supportsReconfigure() const {
  return !shut_down_ && engines_.gloo->supportsReconfigure() &&
         (!engines_.nccl || engines_.nccl->supportsReconfigure());
}

c10d::ReconfigureHandle ProcessGroupDynamicCCL::get_reconfigure_handle() const {
  TORCH_CHECK(!shut_down_, "dynamiccl: get_reconfigure_handle() after shutdown()");
  const auto gloo = engines_.gloo->get_reconfigure_handle();
  return engines_.nccl ? join_handles(gloo, engines_.nccl->get_reconfigure_handle()) : gloo;
}

// Every engine takes the new membership (the inner engines check the handles and the uuid and
// raise their own errors, leaving everything as it was), then every member of it starts learning
// afresh: the same (empty) state on every rank, one that joined included, with the settings
// agreed among them (the creator's hook) and our connections warmed.
c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::reconfigure(
    const c10d::ReconfigureOptions& opts) {
  TORCH_CHECK(!shut_down_, "dynamiccl: reconfigure() after shutdown()");
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  // Nothing of ours may run on the engines while they change.
  stop_learning();
  try {
    reconfigure_engines(opts, works);
  } catch (...) {
    // The engines are as they were (they roll back): learning restarts on them, on every rank
    // that saw the error, without touching the network.
    start_learning(/*connected=*/true, /*warm=*/false);
    throw;
  }
  rank_ = engines_.gloo->getRank();
  size_ = engines_.gloo->getSize();
  if (engines_.nccl) {
    TORCH_CHECK(engines_.nccl->getRank() == rank_ && engines_.nccl->getSize() == size_,
                "dynamiccl: after reconfigure the engines disagree on this rank's place: Gloo has "
                "rank ",
                rank_, " of ", size_, ", ", engines_.nccl->getBackendName(), " rank ",
                engines_.nccl->getRank(), " of ", engines_.nccl->getSize());
  }
  if (factories_.membership) factories_.membership(opts.uuid, rank_, size_);
  telemetry_.restart_decisions();
  start_learning(/*connected=*/true, /*warm=*/true);
  if (works.size() == 1) return works[0];
  return c10::make_intrusive<CoalescedWork>(rank_, std::move(works));
}

void ProcessGroupDynamicCCL::reconfigure_engines(
    const c10d::ReconfigureOptions& opts, std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  // An engine that cannot reconfigure raises its own error before any engine has changed.
  for (c10d::Backend* e : {engines_.nccl.get(), engines_.gloo.get()}) {
    if (e && !e->supportsReconfigure()) works.push_back(e->reconfigure(opts));
  }
  if (!engines_.nccl) {
    works.push_back(engines_.gloo->reconfigure(opts));
  } else {
    // One rank order for both engines: a set is ordered as Gloo orders its own (sorted handles).
    std::vector<std::pair<std::string, std::string>> parts;
    std::visit(
        [&](const auto& handles) {
          for (const auto& h : handles) parts.push_back(split_handle(h));
        },
        opts.handles);
    if (std::holds_alternative<std::unordered_set<c10d::ReconfigureHandle>>(opts.handles)) {
      std::sort(parts.begin(), parts.end());
    }
    c10d::ReconfigureOptions gloo_opts = opts, cuda_opts = opts;
    std::vector<c10d::ReconfigureHandle> gloo_handles, cuda_handles;
    for (const auto& [g, c] : parts) {
      gloo_handles.push_back(g);
      cuda_handles.push_back(c);
    }
    gloo_opts.handles = std::move(gloo_handles);
    cuda_opts.handles = std::move(cuda_handles);
    works.push_back(engines_.gloo->reconfigure(gloo_opts));
    // The CUDA engine makes a new communicator: its tuner binds to the group's channel.
    nccl_channel_.expect_comm(parts.size());
    try {
      works.push_back(engines_.nccl->reconfigure(cuda_opts));
    } catch (...) {
      nccl_channel_.expect_done();
      throw;
    }
    nccl_channel_.expect_done();
  }
}
#endif

// ---- handed to the engines -------------------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::allreduce_sparse(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  TORCH_CHECK_VALUE(!tensors.empty(), "dynamiccl: allreduce_sparse needs a tensor");
  return engine_of(tensors[0], "allreduce_sparse").allreduce_sparse(tensors, opts);
}

void ProcessGroupDynamicCCL::registerOnCompletionHook(
    std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  api_engine("registerOnCompletionHook").registerOnCompletionHook(std::move(hook));
}

void ProcessGroupDynamicCCL::waitForPendingWorks() {
  api_engine("waitForPendingWorks").waitForPendingWorks();
}

void ProcessGroupDynamicCCL::enableCollectivesTiming() {
  TORCH_CHECK(!shut_down_, "dynamiccl: enableCollectivesTiming() after shutdown()");
  for (c10d::Backend* e : {engines_.gloo.get(), engines_.nccl.get()}) {
    if (e) e->enableCollectivesTiming();
  }
}

bool ProcessGroupDynamicCCL::supportsTimeEstimation() const {
  return engines_.nccl && engines_.nccl->supportsTimeEstimation();
}

std::shared_ptr<c10::Allocator> ProcessGroupDynamicCCL::getMemAllocator() {
  return api_engine("getMemAllocator").getMemAllocator();
}

at::Tensor ProcessGroupDynamicCCL::allocateTensor(long size, at::TensorOptions options) {
  TORCH_CHECK(!shut_down_, "dynamiccl: allocateTensor() after shutdown()");
  c10d::Backend& e = options.device().is_cpu() ? *engines_.gloo : api_engine("allocateTensor");
  return e.allocateTensor(size, options);
}

bool ProcessGroupDynamicCCL::supportsTensorAlloc(c10::DeviceIndex device_index) {
  return engines_.nccl && engines_.nccl->supportsTensorAlloc(device_index);
}

#if DYNAMICCL_C10D_HAS_MEMORY_OFFLOAD
void ProcessGroupDynamicCCL::suspend() { api_engine("suspend").suspend(); }
void ProcessGroupDynamicCCL::resume() { api_engine("resume").resume(); }

std::unordered_map<std::string, uint64_t> ProcessGroupDynamicCCL::getMemoryStats() {
  return api_engine("getMemoryStats").getMemoryStats();
}
#endif

#if DYNAMICCL_C10D_HAS_2_14_SURFACE
void ProcessGroupDynamicCCL::addEphemeralTimeout(const std::chrono::milliseconds& timeout) {
  for (c10d::Backend* e : {engines_.gloo.get(), engines_.nccl.get()}) {
    if (e) e->addEphemeralTimeout(timeout);
  }
}

void ProcessGroupDynamicCCL::setBoundDeviceId(std::optional<at::Device> device) {
  Backend::setBoundDeviceId(device);
  if (engines_.nccl && (!device || device->is_cuda())) engines_.nccl->setBoundDeviceId(device);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::gather_single(
    at::Tensor& output, at::Tensor& input, const c10d::GatherOptions& opts) {
  return engine_of(input, "gather_single").gather_single(output, input, opts);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupDynamicCCL::gather_into_tensor(
    at::Tensor& output, at::Tensor& input, const c10d::GatherOptions& opts) {
  return engine_of(input, "gather_into_tensor").gather_into_tensor(output, input, opts);
}
#endif

#ifdef C10D_BACKEND_HAS_WINDOW
bool ProcessGroupDynamicCCL::supportsWindow() const {
  return engines_.nccl && engines_.nccl->supportsWindow();
}

c10::intrusive_ptr<c10d::Window> ProcessGroupDynamicCCL::new_window(
    const std::optional<at::Tensor>& tensor) {
  return (tensor ? engine_of(*tensor, "new_window") : api_engine("new_window")).new_window(tensor);
}
#endif

#ifdef C10D_BACKEND_HAS_HOOKS
void ProcessGroupDynamicCCL::registerAbortHook(int64_t hook_id, c10d::AbortHook hook) {
  api_engine("registerAbortHook").registerAbortHook(hook_id, std::move(hook));
}

void ProcessGroupDynamicCCL::unregisterAbortHook(int64_t hook_id) {
  api_engine("unregisterAbortHook").unregisterAbortHook(hook_id);
}
#endif

#if DYNAMICCL_C10D_HAS_2_15_SURFACE
bool ProcessGroupDynamicCCL::supportsAbortHooks() const {
  return engines_.nccl && engines_.nccl->supportsAbortHooks();
}

bool ProcessGroupDynamicCCL::supportsCompletionHooks() const {
  return engines_.nccl && engines_.nccl->supportsCompletionHooks();
}

void ProcessGroupDynamicCCL::registerCompletionHook(int64_t hook_id, c10d::CompletionHook hook) {
  api_engine("registerCompletionHook").registerCompletionHook(hook_id, std::move(hook));
}

void ProcessGroupDynamicCCL::unregisterCompletionHook(int64_t hook_id) {
  api_engine("unregisterCompletionHook").unregisterCompletionHook(hook_id);
}

bool ProcessGroupDynamicCCL::isInitialized() {
  return !engines_.nccl || engines_.nccl->isInitialized();
}

// While the CUDA engine estimates, the calls it is given are simulated, not run: they pass
// through undecided and uncounted (dispatch), and nothing is published to NCCL's tuner.
void ProcessGroupDynamicCCL::startTimeEstimate() {
  api_engine("startTimeEstimate").startTimeEstimate();
  estimating_ = true;
}

float ProcessGroupDynamicCCL::endTimeEstimate() {
  estimating_ = false;
  return api_engine("endTimeEstimate").endTimeEstimate();
}
#endif

}  // namespace dynamiccl
