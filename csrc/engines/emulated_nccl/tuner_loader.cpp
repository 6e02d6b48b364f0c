#include "engines/emulated_nccl/tuner_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <strings.h>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dynamiccl {
namespace emulated_nccl {

namespace {

// NCCL_DEBUG's level and NCCL_DEBUG_SUBSYS's mask, read as NCCL reads them (the subset the
// plugin logs under: INIT, TUNING, ALL; a leading '^' excludes).
ncclDebugLogLevel debug_level() {
  const char* v = std::getenv("NCCL_DEBUG");
  if (v == nullptr) return NCCL_LOG_NONE;
  if (strcasecmp(v, "VERSION") == 0) return NCCL_LOG_VERSION;
  if (strcasecmp(v, "WARN") == 0) return NCCL_LOG_WARN;
  if (strcasecmp(v, "INFO") == 0) return NCCL_LOG_INFO;
  if (strcasecmp(v, "TRACE") == 0) return NCCL_LOG_TRACE;
  return NCCL_LOG_NONE;
}

unsigned long debug_mask() {
  const char* v = std::getenv("NCCL_DEBUG_SUBSYS");
  if (v == nullptr || *v == '\0') return NCCL_INIT;  // NCCL's default
  const bool invert = *v == '^';
  unsigned long mask = 0;
  std::string list(invert ? v + 1 : v);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    const std::string item = list.substr(start, end - start);
    if (strcasecmp(item.c_str(), "INIT") == 0) mask |= NCCL_INIT;
    if (strcasecmp(item.c_str(), "TUNING") == 0) mask |= NCCL_TUNING;
    if (strcasecmp(item.c_str(), "ALL") == 0) mask |= static_cast<unsigned long>(NCCL_ALL);
    start = end + 1;
  }
  return invert ? ~mask : mask;
}

void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
            const char* fmt, ...) {
  static const ncclDebugLogLevel max_level = debug_level();
  static const unsigned long mask = debug_mask();
  if (level > max_level || (level >= NCCL_LOG_INFO && (flags & mask) == 0)) return;
  char message[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  const char* name = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_TRACE ? "TRACE" : "INFO";
  if (level == NCCL_LOG_TRACE) {
    std::fprintf(stderr, "[pid %d] emulated NCCL %s %s:%d %s\n", static_cast<int>(getpid()), name,
                 file, line, message);
  } else {
    std::fprintf(stderr, "[pid %d] emulated NCCL %s %s\n", static_cast<int>(getpid()), name,
                 message);
  }
}

}  // namespace

HelperThread::HelperThread() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || task_ != nullptr; });
      if (stop_) return;
      (*task_)();
      task_ = nullptr;
      done_ = true;
      cv_.notify_all();
    }
  });
}

HelperThread::~HelperThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HelperThread::run(const std::function<void()>& task) {
  std::unique_lock<std::mutex> lock(mu_);
  task_ = &task;
  done_ = false;
  cv_.notify_all();
  cv_.wait(lock, [this] { return done_; });
}

LoadedTuner::LoadedTuner(const std::string& path, NcclRelease release, uint64_t comm_id,
                         size_t n_ranks, size_t n_nodes, bool nonblocking)
    : helper_(nonblocking ? std::make_unique<HelperThread>() : nullptr) {
  if (path.empty()) return;
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  // The newest ABI the release loads that the file exports.
  const std::pair<const char*, int> kAbis[] = {
      {"ncclTunerPlugin_v7", 7}, {"ncclTunerPlugin_v6", 6}, {"ncclTunerPlugin_v5", 5}};
  const int newest = release == NcclRelease::k2_32 ? 7 : release == NcclRelease::k2_30 ? 6 : 5;
  if (handle_ == nullptr) {
    const char* why = dlerror();
    failure_ = "could not load " + path + ": " + (why ? why : "unknown error");
  } else {
    for (const auto& [symbol, abi] : kAbis) {
      if (abi > newest) continue;
      if (void* table = dlsym(handle_, symbol)) {
        tuner_ = static_cast<const ncclTuner_v5_t*>(table);
        if (abi >= 6) get_chunk_size_ = static_cast<const ncclTuner_v6_t*>(table)->getChunkSize;
        abi_ = abi;
        break;
      }
    }
    if (tuner_ == nullptr) failure_ = path + " has no ncclTunerPlugin_v5";
  }
  if (!failure_.empty()) {
    logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING, __func__, __LINE__,
           "TUNER/Plugin: %s; using the internal tuner", failure_.c_str());
    tuner_ = nullptr;
    return;
  }
  on_nccl_thread([&] { init(comm_id, n_ranks, n_nodes); });
  if (tuner_ == nullptr) return;
  logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_TUNING, __func__, __LINE__, "TUNER/Plugin: Using %s (v%d)",
         tuner_->name, abi_);
}

// NCCL hands the plugin the NVLink domain shape and its model constants (in/out), in the ABI's
// layout (v7: five GPU generations). The emulation builds its own cost table from the project's
// model, so it passes zeros and reads nothing back (our plugin leaves both untouched).
void LoadedTuner::init(uint64_t comm_id, size_t n_ranks, size_t n_nodes) {
  ncclNvlDomainInfo_v5_t domains{};
  ncclResult_t rc;
  if (abi_ == 7) {
    ncclTunerConstants_v7_t constants{};
    rc = reinterpret_cast<const ncclTuner_v7_t*>(tuner_)->init(&context_, comm_id, n_ranks, n_nodes,
                                                               logger, &domains, &constants);
  } else {
    ncclTunerConstants_v5_t constants{};
    rc = tuner_->init(&context_, comm_id, n_ranks, n_nodes, logger, &domains, &constants);
  }
  if (rc != ncclSuccess) {
    failure_ = "the plugin's init failed";
    tuner_ = nullptr;
  }
}

void LoadedTuner::on_nccl_thread(const std::function<void()>& call) const {
  if (helper_) {
    helper_->run(call);
  } else {
    call();
  }
}

LoadedTuner::~LoadedTuner() {
  if (tuner_ != nullptr) on_nccl_thread([this] { tuner_->finalize(context_); });
  // NCCL keeps the library loaded until its last communicator goes; so do we (dlclose would only
  // drop our reference: the backend itself is linked with the same file).
  if (handle_ != nullptr) dlclose(handle_);
}

void LoadedTuner::get_coll_info(int coll_type, size_t n_bytes, float table[][NCCL_NUM_PROTOCOLS],
                                int* n_channels) const {
  if (tuner_ == nullptr) return;
  // As NCCL passes it: one contiguous float[algorithms][protocols], typed float**.
  on_nccl_thread([&] {
    tuner_->getCollInfo(context_, static_cast<ncclFunc_t>(coll_type), n_bytes, /*numPipeOps=*/1,
                        reinterpret_cast<float**>(table), NCCL_NUM_ALGORITHMS, NCCL_NUM_PROTOCOLS,
                        /*regBuff=*/0, n_channels);
  });
}

void LoadedTuner::get_chunk_size(int coll_type, size_t n_bytes, int algo, int proto, int n_channels,
                                 size_t* chunk) const {
  if (tuner_ == nullptr || get_chunk_size_ == nullptr) return;
  on_nccl_thread([&] {
    get_chunk_size_(context_, static_cast<ncclFunc_t>(coll_type), n_bytes, algo, proto, n_channels,
                    chunk);
  });
}

}  // namespace emulated_nccl
}  // namespace dynamiccl
