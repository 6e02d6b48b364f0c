// Hot-path cost of the learner: decide() on a converged state and on a probing state, and
// apply_round() per reported call. Heap allocations are counted by replacing the global
// operator new; the "allocs/call" counter must read 0 in steady state.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "policy/learner.h"

namespace {
uint64_t g_allocations = 0;  // single-threaded benchmarks: a plain counter is enough
}  // namespace

void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace dynamiccl {
namespace {

constexpr int kArms = 16;
constexpr int kRound = 32;

class BenchCatalog : public ArmCatalog {
 public:
  BenchCatalog() {
    for (int i = 0; i < kArms; ++i) {
      Arm a;
      a.name = i == 0 ? "default" : "arm" + std::to_string(i);
      if (i > 0) a.action.algo = static_cast<int8_t>(i);
      arms_.push_back(a);
    }
  }
  const std::vector<Arm>& arms(OpKind) const override { return arms_; }
  double prior_cost_us(OpKind, uint16_t arm, uint64_t, int) const override { return 10.0 + arm; }

 private:
  std::vector<Arm> arms_;
};

CollectiveContext context() {
  CollectiveContext c;
  c.op = OpKind::kAllReduce;
  c.effective_bytes = 1 << 22;
  c.group_size = 8;
  c.role = Role::kDataParallel;
  return c;
}

double cost_of(uint16_t arm) { return 100.0 + 3.0 * ((arm * 7) % kArms) + (arm == 5 ? -40 : 0); }

// Drives the learner until the state converges (arm 5 cheapest), rounds of kRound calls.
void converge(Learner& l, const CollectiveContext& ctx) {
  RoundResult r;
  for (int i = 1; i <= 20000; ++i) {
    const Decision d = l.decide(ctx);
    r.calls.push_back({d.state_id, d.arm, static_cast<float>(cost_of(d.arm))});
    if (i % kRound == 0) {
      l.apply_round(r);
      r.calls.clear();
    }
  }
}

// Past probing: exploiting, or settled (the runner-up re-checks stopped as well).
bool converged(const StateStats& s) { return s.phase == "exploit" || s.phase == "settled"; }

void report_allocations(benchmark::State& state, uint64_t allocs, double calls_per_iter) {
  state.counters["allocs/call"] = benchmark::Counter(
      static_cast<double>(allocs) / (static_cast<double>(state.iterations()) * calls_per_iter));
}

void BM_DecideConverged(benchmark::State& state) {
  Learner l(LearnerConfig{}, std::make_shared<BenchCatalog>());
  const CollectiveContext ctx = context();
  const uint64_t setup = g_allocations;
  converge(l, ctx);
  // Creating the state allocates: proof that the counter sees the library's allocations.
  if (g_allocations == setup) state.SkipWithError("the allocation counter sees nothing");
  if (!converged(l.stats().at(0))) state.SkipWithError("state did not converge");
  const uint64_t before = g_allocations;
  for (auto _ : state) benchmark::DoNotOptimize(l.decide(ctx));
  report_allocations(state, g_allocations - before, 1.0);
}
BENCHMARK(BM_DecideConverged);

// Many converged states visited in turn (8 roles x 12 size bins), as in a real step.
void BM_DecideConvergedManyStates(benchmark::State& state) {
  Learner l(LearnerConfig{}, std::make_shared<BenchCatalog>());
  std::vector<CollectiveContext> ctxs;
  for (int role = 0; role < kNumRoles; ++role) {
    for (int bin = 10; bin < 22; ++bin) {
      CollectiveContext c = context();
      c.role = static_cast<Role>(role);
      c.effective_bytes = uint64_t{1} << bin;
      ctxs.push_back(c);
    }
  }
  RoundResult r;
  for (int i = 1; i <= 400000; ++i) {
    const Decision d = l.decide(ctxs[i % ctxs.size()]);
    r.calls.push_back({d.state_id, d.arm, static_cast<float>(cost_of(d.arm))});
    if (i % kRound == 0) {
      l.apply_round(r);
      r.calls.clear();
    }
  }
  for (const StateStats& s : l.stats()) {
    if (!converged(s)) state.SkipWithError("a state did not converge");
  }
  size_t i = 0;
  const uint64_t before = g_allocations;
  for (auto _ : state) {
    benchmark::DoNotOptimize(l.decide(ctxs[i]));
    i = i + 1 == ctxs.size() ? 0 : i + 1;
  }
  report_allocations(state, g_allocations - before, 1.0);
}
BENCHMARK(BM_DecideConvergedManyStates);

// Probing: no rounds are applied, and min_samples is large, so every probe goes through the
// round-robin search over the 8 candidates of the dp head (budget 0.5: every other call probes).
void BM_DecideProbing(benchmark::State& state) {
  LearnerConfig cfg;
  for (HeadConfig& h : cfg.heads) h.min_samples = 1000000;
  Learner l(cfg, std::make_shared<BenchCatalog>());
  const CollectiveContext ctx = context();
  for (int i = 0; i < 100; ++i) l.decide(ctx);  // past warm-up
  if (l.stats().at(0).phase != "probing") state.SkipWithError("state is not probing");
  const uint64_t before = g_allocations;
  for (auto _ : state) benchmark::DoNotOptimize(l.decide(ctx));
  report_allocations(state, g_allocations - before, 1.0);
}
BENCHMARK(BM_DecideProbing);

// Late probing: every candidate has its min_samples calls, so a probe searches for the widest
// confidence interval (equal arms with 30% noise stay undecided). Once all reach the probe cap
// (no rounds are applied here) the search comes back empty: both paths scan all 16 slots. The
// documented HeadConfig defaults (16 candidates, 25% budget, min_samples 6) set this up in 416
// calls.
void BM_DecideProbingWidest(benchmark::State& state) {
  LearnerConfig cfg;
  for (HeadConfig& h : cfg.heads) {
    h = HeadConfig{};
    h.switch_margin = 0.0;
  }
  Learner l(cfg, std::make_shared<BenchCatalog>());
  const CollectiveContext ctx = context();
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(100.0, 30.0);
  RoundResult r;
  for (int i = 1; i <= 416; ++i) {
    const Decision d = l.decide(ctx);
    r.calls.push_back({d.state_id, d.arm, static_cast<float>(std::max(noise(rng), 1.0))});
    if (i % kRound == 0) {
      l.apply_round(r);
      r.calls.clear();
    }
  }
  if (l.stats().at(0).phase != "probing") state.SkipWithError("state is not probing");
  const uint64_t before = g_allocations;
  for (auto _ : state) benchmark::DoNotOptimize(l.decide(ctx));
  report_allocations(state, g_allocations - before, 1.0);
}
BENCHMARK(BM_DecideProbingWidest);

// Times apply_round(r) per outcome (r holds kRound of them), with allocations per outcome.
void time_apply_round(benchmark::State& state, Learner& l, const RoundResult& r) {
  const uint64_t before = g_allocations;
  for (auto _ : state) l.apply_round(r);
  report_allocations(state, g_allocations - before, kRound);
  state.counters["time/call"] = benchmark::Counter(
      kRound, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// apply_round with kRound outcomes on a converged state; time reported per outcome.
void BM_ApplyRoundPerCall(benchmark::State& state) {
  Learner l(LearnerConfig{}, std::make_shared<BenchCatalog>());
  const CollectiveContext ctx = context();
  converge(l, ctx);
  RoundResult r;
  for (int i = 0; i < kRound; ++i) {
    const Decision d = l.decide(ctx);
    r.calls.push_back({d.state_id, d.arm, static_cast<float>(cost_of(d.arm))});
  }
  r.step_time_us = 1000.0;
  r.loss = 1.0;
  time_apply_round(state, l, r);
}
BENCHMARK(BM_ApplyRoundPerCall);

// apply_round while probing: the kRound outcomes spread over all 8 candidates, so every arm's
// robust view is recomputed each round (its winsorized centre, and every 8 costs the median and
// MAD of its window of 32).
void BM_ApplyRoundProbingPerCall(benchmark::State& state) {
  LearnerConfig cfg;
  for (HeadConfig& h : cfg.heads) h.min_samples = 1000000;  // never resolved: stays probing
  Learner l(cfg, std::make_shared<BenchCatalog>());
  const CollectiveContext ctx = context();
  for (int i = 0; i < 100; ++i) l.decide(ctx);  // past warm-up
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(1.0, 0.05);
  RoundResult r;
  const uint32_t id = l.decide(ctx).state_id;
  // The candidates are arms 0..max_candidates-1: the best priors (10 + arm).
  const int candidates = cfg.heads[static_cast<int>(ctx.role)].max_candidates;
  for (int i = 0; i < kRound; ++i) {
    const uint16_t arm = static_cast<uint16_t>(i % candidates);
    r.calls.push_back({id, arm, static_cast<float>(cost_of(arm) * noise(rng))});
  }
  for (int i = 0; i < 64; ++i) l.apply_round(r);  // windows full
  if (l.stats().at(0).phase != "probing") state.SkipWithError("state is not probing");
  time_apply_round(state, l, r);
}
BENCHMARK(BM_ApplyRoundProbingPerCall);

}  // namespace
}  // namespace dynamiccl

BENCHMARK_MAIN();
