// Simulated calls per second through the real learner, on one core: decide, cost with noise,
// consensus rounds (apply_round every 64 calls of a group) and the bookkeeping of default,
// learned and oracle totals. The target is >= 1 million calls per second.
//
//   cmake --build BUILD --target core_sim_bench && BUILD/benchmarks/core_sim_bench
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "sim/runner.h"

// Every heap allocation of the program is counted, so the steady-state benchmarks can show
// allocations per simulated call (the hot path should make none).
namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace dynamiccl {
namespace sim {
namespace {

TopologySpec h100(int nodes) {
  TopologySpec t;
  t.nodes = nodes;
  t.gpus_per_node = 8;
  t.intra = {"nvlink", 450.0, 0.0};
  t.inter = {"ib", 50.0, 2.0};
  return t;
}

WorkloadSpec call(const char* role, const char* op, uint64_t bytes, int per_step) {
  WorkloadSpec w;
  w.role = role;
  w.op = op;
  w.bytes = bytes;
  w.per_step = per_step;
  return w;
}

// DDP buckets and scalar all-reduces on 4 nodes: one learner, a handful of states.
ScenarioSpec ddp_spec(double noise) {
  ScenarioSpec s;
  s.name = "bench_ddp";
  s.steps = 1;
  s.topology = h100(4);
  s.noise_sigma = noise;
  s.truth = {{"tree", "*", 0.8, 1.0}};
  WorkloadSpec ddp;
  ddp.kind = "ddp";
  ddp.layers = 48;
  ddp.layer_bytes = 8ull << 20;
  s.workload = {ddp, call("default", "allreduce", 4, 2), call("default", "allreduce", 1 << 16, 8)};
  return s;
}

// A 3D-parallel LLM step on 64 nodes: three learners (tp, pp, dp), ~700 calls per step.
ScenarioSpec mixed_3d_spec() {
  ScenarioSpec s;
  s.name = "bench_3d";
  s.steps = 1;
  s.microbatches = 8;
  s.topology = h100(64);
  s.noise_sigma = 0.05;
  s.truth = {{"nvls", "Simple", 0.8, 1.5}, {"tree", "*", 0.75, 1.0}, {"*", "LL128", 0.8, 1.0}};
  WorkloadSpec tp;
  tp.kind = "tp";
  tp.layers = 20;
  tp.activation_bytes = 16ull << 20;
  WorkloadSpec tp_small = tp;
  tp_small.activation_bytes = 1ull << 20;
  tp_small.calls_per_layer = 1;
  WorkloadSpec pp;
  pp.kind = "pp";
  pp.activation_bytes = 16ull << 20;
  WorkloadSpec ddp;
  ddp.kind = "ddp";
  ddp.layers = 20;
  ddp.layer_bytes = 40ull << 20;
  ddp.group = {"dp", 16, 1};
  s.workload = {tp, tp_small, pp, ddp};
  return s;
}

// Steady state: the learner has converged (warm-up steps run before timing), costs still flow
// through consensus rounds and the CUSUM detectors every 64 calls.
void run_bench(benchmark::State& state, const ScenarioSpec& spec, int warm_steps) {
  SimRunner runner(spec);
  runner.run_steps(warm_steps);
  const uint64_t start = runner.calls();
  const uint64_t allocs = g_allocations.load();
  for (auto _ : state) runner.run_steps(1);
  const uint64_t calls = runner.calls() - start;
  state.SetItemsProcessed(static_cast<int64_t>(calls));
  state.counters["calls_per_step"] = runner.calls_per_step();
  // Includes the per-step series (amortized vector growth) and any convergence polling.
  state.counters["allocs_per_call"] = static_cast<double>(g_allocations.load() - allocs) /
                                      static_cast<double>(calls);
}

void BM_SimDdpNoise(benchmark::State& state) { run_bench(state, ddp_spec(0.05), 2000); }
void BM_SimDdpNoNoise(benchmark::State& state) { run_bench(state, ddp_spec(0.0), 2000); }
void BM_SimMixed3d(benchmark::State& state) { run_bench(state, mixed_3d_spec(), 300); }

// From the first call: warm-up, probing and convergence polling included.
void BM_SimColdStart(benchmark::State& state) {
  const ScenarioSpec spec = ddp_spec(0.05);
  uint64_t calls = 0;
  for (auto _ : state) {
    SimRunner runner(spec);
    runner.run_steps(400);
    calls += runner.calls();
  }
  state.SetItemsProcessed(static_cast<int64_t>(calls));
}

BENCHMARK(BM_SimDdpNoise);
BENCHMARK(BM_SimDdpNoNoise);
BENCHMARK(BM_SimMixed3d);
BENCHMARK(BM_SimColdStart)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace sim
}  // namespace dynamiccl

BENCHMARK_MAIN();
