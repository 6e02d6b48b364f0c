// The per-call CPU cost the backend adds on top of its engine: context + decide + (publish) +
// wrapping the Work. The engine is a null backend that hands back an already-completed Work,
// so what is measured is ours alone. Allocations per call are counted with a replaced
// operator new.
//
//   build/benchmarks/backend_hot_path --benchmark_repetitions=10 --benchmark_report_aggregates_only
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "backend/null_engine.h"
#include "backend/process_group_dynamiccl.h"

namespace {

std::atomic<uint64_t> g_allocations{0};

using dynamiccl::testing::NullEngine;

c10::intrusive_ptr<NullEngine> null_engine() {
  auto e = c10::make_intrusive<NullEngine>();
  e->reuse_work = true;
  return e;
}

c10::intrusive_ptr<dynamiccl::ProcessGroupDynamicCCL> make_pg(dynamiccl::Mode mode) {
  dynamiccl::BackendConfig cfg;
  cfg.mode = mode;
  dynamiccl::ProcessGroupDynamicCCL::Engines engines{null_engine(), {}};
  auto pg = c10::make_intrusive<dynamiccl::ProcessGroupDynamicCCL>(0, 1, std::move(engines), cfg,
                                                                   std::chrono::minutes(1));
  if (mode == dynamiccl::Mode::kLearn) {
    // A converged state whose incumbent is the engine default: the steady state of a job.
    dynamiccl::PolicySnapshot snap;
    dynamiccl::StateSnapshot st;
    st.role = dynamiccl::Role::kDefault;
    st.op = dynamiccl::OpKind::kAllReduce;
    st.size_bin = dynamiccl::size_bin(4);
    st.incumbent = "default";
    st.converged = true;
    st.arms.push_back({"default", 100, 10.0, 1.0, false});
    snap.states.push_back(st);
    pg->mutable_learner(dynamiccl::EngineKind::kCpu)->restore(snap);
  }
  return pg;
}

void run(benchmark::State& state, c10d::Backend& backend) {
  std::vector<at::Tensor> tensors{at::ones({1})};  // 4 bytes
  c10d::AllreduceOptions opts;
  for (int i = 0; i < 1000; ++i) backend.allreduce(tensors, opts)->wait();  // warm, states exist
  const uint64_t before = g_allocations.load();
  for (auto _ : state) {
    auto work = backend.allreduce(tensors, opts);
    benchmark::DoNotOptimize(work.get());
  }
  state.counters["allocs_per_call"] = static_cast<double>(g_allocations.load() - before) /
                                      static_cast<double>(state.iterations());
}

void BM_EngineDirect(benchmark::State& state) {
  auto engine = null_engine();
  run(state, *engine);
}
void BM_DynamicOff(benchmark::State& state) {
  auto pg = make_pg(dynamiccl::Mode::kOff);
  run(state, *pg);
}
void BM_DynamicLearnConverged(benchmark::State& state) {
  auto pg = make_pg(dynamiccl::Mode::kLearn);
  run(state, *pg);
}

BENCHMARK(BM_EngineDirect);
BENCHMARK(BM_DynamicOff);
BENCHMARK(BM_DynamicLearnConverged);

}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

BENCHMARK_MAIN();
