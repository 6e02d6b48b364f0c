// The online learner against synthetic costs: a fake arm catalog, a driver that decides, draws a
// cost per call (deterministic noise from a seeded std::mt19937) and applies a consensus round
// every K calls with the outcomes of those calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "policy/budget.h"  // CallCredit
#include "policy/learner.h"

namespace dynamiccl {
namespace {

constexpr int kRound = 32;  // K: calls per consensus round

class FakeCatalog : public ArmCatalog {
 public:
  // Arm i has prior priors[i]; arm 0 is the default.
  explicit FakeCatalog(std::vector<double> priors) : priors_(std::move(priors)) {
    for (size_t i = 0; i < priors_.size(); ++i) {
      Arm a;
      a.name = i == 0 ? "default" : "arm" + std::to_string(i);
      if (i > 0) a.action.algo = static_cast<int8_t>(i);
      arms_.push_back(a);
    }
  }
  const std::vector<Arm>& arms(OpKind) const override { return arms_; }
  double prior_cost_us(OpKind, uint16_t arm, uint64_t, int) const override { return priors_[arm]; }

 private:
  std::vector<double> priors_;
  std::vector<Arm> arms_;
};

CollectiveContext make_ctx(Role role, uint64_t bytes, OpKind op = OpKind::kAllReduce) {
  CollectiveContext c;
  c.op = op;
  c.effective_bytes = bytes;
  c.group_size = 8;
  c.role = role;
  return c;
}

// One learner fed by synthetic costs. cost(call, ctx, arm) is the true mean cost; the drawn
// cost adds `noise` relative Gaussian noise and, with probability `outlier_rate`, is multiplied
// by a factor drawn uniformly in [3, 10] (a preempted rank, a noisy neighbour: it hits whatever
// arm runs). Outcomes reach the learner `lag` rounds late.
using CostFn = std::function<double(uint64_t, const CollectiveContext&, uint16_t)>;

struct Driver {
  Driver(Learner& l, CostFn c) : learner(l), cost(std::move(c)) {}

  Learner& learner;
  CostFn cost;
  double noise = 0.05;
  double outlier_rate = 0;
  int lag = 0;
  double round_cost_us = 0;  // every round's price (RoundResult::round_cost_us)
  // Optional step time / loss for the round, from the decisions of its window.
  std::function<void(RoundResult&, const std::vector<Decision>&)> signals;
  std::mt19937 rng{12345};
  std::normal_distribution<double> gauss{0.0, 1.0};
  std::uniform_real_distribution<double> uniform{0.0, 1.0};
  uint64_t calls = 0;
  std::vector<Decision> log;
  std::vector<Decision> window_decisions;
  std::vector<CallOutcome> window;
  std::deque<std::vector<CallOutcome>> in_flight;

  Decision step(const CollectiveContext& ctx) {
    const Decision d = learner.decide(ctx);
    log.push_back(d);
    double c = cost(calls, ctx, d.arm) * (1.0 + noise * gauss(rng));
    if (outlier_rate > 0 && uniform(rng) < outlier_rate) c *= 3.0 + 7.0 * uniform(rng);
    // Like the backend: only the calls the learner asked to measure are reported.
    if (d.measure)
      window.push_back(
          {d.state_id, d.arm, static_cast<float>(std::max(c, 0.01)), d.probe, d.after_probe});
    window_decisions.push_back(d);
    ++calls;
    if (calls % kRound == 0) {
      learner.close_window();
      in_flight.push_back(std::move(window));
      window.clear();
      RoundResult r;
      if (static_cast<int>(in_flight.size()) > lag) {
        r.calls = std::move(in_flight.front());
        in_flight.pop_front();
      }
      if (signals) signals(r, window_decisions);
      window_decisions.clear();
      r.round_cost_us = round_cost_us;
      learner.apply_round(r);
    }
    return d;
  }
  void run(const CollectiveContext& ctx, int n) {
    for (int i = 0; i < n; ++i) step(ctx);
  }
};

LearnerConfig bulk_config() {
  LearnerConfig cfg;
  for (HeadConfig& h : cfg.heads) h = HeadConfig{};  // the documented defaults: budget 0.25
  return cfg;
}

StateStats state_stats(const Learner& l, uint32_t id) { return l.stats().at(id); }

// Done probing: exploiting its incumbent, or settled on it.
bool converged(const StateStats& st) { return st.phase == "exploit" || st.phase == "settled"; }

std::shared_ptr<FakeCatalog> catalog_of(int arms) {
  return std::make_shared<FakeCatalog>(std::vector<double>(arms, 10.0));
}

// Fixed true cost per arm, independent of time and context.
CostFn fixed(std::vector<double> costs) {
  return [costs](uint64_t, const CollectiveContext&, uint16_t arm) { return costs.at(arm); };
}

// The pacing every fraction of calls rests on (probes, measurement, watch and rollback checks):
// a rate of a quarter takes exactly every fourth call, a held call is taken on the next one
// without a second call's worth banked, and a cleared credit starts over.
TEST(CallCredit, TakesExactlyTheRatesShareOfCallsAndNeverBanksAHeldOne) {
  CallCredit c;
  std::vector<int> taken;
  for (int call = 1; call <= 12; ++call) {
    if (c.take(kPpmOne / 4)) taken.push_back(call);
  }
  EXPECT_EQ(taken, (std::vector<int>{4, 8, 12}));
  EXPECT_EQ(c.ppm, 0u);

  for (int call = 1; call <= 4; ++call) c.earn(kPpmOne / 2);  // two calls' worth earned
  c.hold();                                                   // ... and the call waits
  EXPECT_TRUE(c.earn(0));
  c.spend();
  EXPECT_FALSE(c.earn(kPpmOne / 2));  // the second call's worth was not kept

  c.clear();
  EXPECT_FALSE(c.take(kPpmOne - 1));
  EXPECT_TRUE(c.take(1));
}

TEST(Learner, FindsTheCheapestArmDespiteAMisleadingPrior) {
  // The prior ranks arm1 first; arm3 is truly cheapest.
  auto cat = std::make_shared<FakeCatalog>(std::vector<double>{10, 5, 6, 7, 8, 9});
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 90, 95, 60, 110, 120})};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, 3000);
  const StateStats st = state_stats(l, 0);
  EXPECT_EQ(st.incumbent, 3);
  EXPECT_TRUE(converged(st));
  int best = 0;
  for (size_t i = d.log.size() - 500; i < d.log.size(); ++i) best += d.log[i].arm == 3;
  EXPECT_GE(best, 490);
}

TEST(Learner, ConvergesWithinABoundedNumberOfCalls) {
  // Worst case: every one of the 15 challengers is probed up to the cap (4 * min_samples) at
  // the head's budget, after the warm-up, plus a round of lag for the last costs.
  const HeadConfig h;
  const uint64_t bound = h.warmup_calls + 15 * 4 * h.min_samples / h.probe_budget + 3 * kRound;
  for (double spread : {0.30, 0.01}) {  // well separated arms, and near-ties
    auto cat = catalog_of(16);
    Learner l(bulk_config(), cat);
    std::vector<double> costs;
    for (int i = 0; i < 16; ++i) costs.push_back(100.0 * (1.0 + spread * ((i * 7) % 16) / 16));
    Driver d{l, fixed(costs)};
    d.lag = 1;
    d.run(make_ctx(Role::kDefault, 4096), static_cast<int>(bound));
    const StateStats st = state_stats(l, 0);
    EXPECT_GT(st.converged_at_call, 0u) << "spread " << spread;
    EXPECT_LE(st.converged_at_call, bound) << "spread " << spread;
  }
}

TEST(Learner, ProbeFractionStaysWithinTheHeadBudget) {
  // (The regret budget is lifted here: this is about the heads' probe fractions alone.)
  auto cat = catalog_of(10);
  LearnerConfig cfg;  // default heads: dp explores 50%, tp 20%
  for (HeadConfig& h : cfg.heads) h.regret_budget = 1.0;
  Learner l(cfg, cat);
  Driver d{l, [](uint64_t, const CollectiveContext& c, uint16_t arm) {
             return 50.0 + 7.0 * ((arm * 3 + static_cast<int>(c.role)) % 10);
           }};
  const CollectiveContext dp = make_ctx(Role::kDataParallel, 1 << 22);
  const CollectiveContext tp = make_ctx(Role::kTensorParallel, 1 << 16);
  std::vector<uint64_t> calls(2, 0), probes(2, 0), early_probes(2, 0);
  for (int i = 0; i < 8000; ++i) {
    const CollectiveContext& ctx = i % 3 == 0 ? tp : dp;
    const Decision dec = d.step(ctx);
    ++calls.at(dec.state_id);
    probes.at(dec.state_id) += dec.probe;
    if (calls[dec.state_id] <= 96) early_probes[dec.state_id] += dec.probe;
    const double budget = cfg.heads[static_cast<int>(ctx.role)].probe_budget;
    ASSERT_LE(static_cast<double>(probes[dec.state_id]),
              budget * static_cast<double>(calls[dec.state_id]))
        << role_name(ctx.role) << " after " << i << " calls";
  }
  const std::vector<StateStats> st = l.stats();
  ASSERT_EQ(st.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(st[s].probes, probes[s]);
    EXPECT_EQ(st[s].calls, calls[s]);
    EXPECT_GT(st[s].probes, 0u);  // it did explore
  }
  // Each head spends its own budget: in their first 96 calls (8 of warm-up, the default's first
  // costs awaited, then probing with 5 or 7 challengers x min_samples waiting, minus those
  // eliminated early) tp (state 0, seen first) probes at most 20% of the calls after warm-up,
  // dp clearly more.
  const HeadConfig& tp_head = cfg.heads[static_cast<int>(Role::kTensorParallel)];
  EXPECT_LE(early_probes[0], static_cast<uint64_t>(tp_head.probe_budget * 88));
  EXPECT_GE(early_probes[1], early_probes[0] + 4);
}

TEST(Learner, DoesNotFlapBetweenNearEqualArms) {
  // Arms within 1% of each other (below the 3% switch margin), 5% noise.
  auto cat = catalog_of(3);
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 99, 101})};
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 20000);
  int switches = 0;
  int last = -1;
  for (const Decision& dec : d.log) {
    if (dec.probe) continue;
    if (last >= 0 && dec.arm != last) ++switches;
    last = dec.arm;
  }
  EXPECT_LE(switches, 1);
  // A CUSUM false alarm only re-opens probing; it must not cause a switch, and it is rare: with
  // threshold 8 and drift 0.5 on the min/max-of-3 filtered costs, false alarms are far rarer
  // than one in 20000 costs.
  EXPECT_LE(state_stats(l, 0).alarms, 1u);
}

TEST(Learner, ReadaptsAfterAPlantedShift) {
  auto cat = catalog_of(4);
  Learner l(bulk_config(), cat);
  const uint64_t shift_at = 4000;
  Driver d{l, [&](uint64_t call, const CollectiveContext&, uint16_t arm) {
             const double before[] = {100, 80, 60, 90};
             const double after[] = {100, 80, 150, 90};
             return call < shift_at ? before[arm] : after[arm];
           }};
  d.lag = 1;
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, static_cast<int>(shift_at));
  StateStats st = state_stats(l, 0);
  ASSERT_EQ(st.incumbent, 2);
  ASSERT_TRUE(converged(st));
  const uint32_t alarms = st.alarms;
  const uint64_t probes_to_converge = st.probes_to_converge;
  EXPECT_GT(probes_to_converge, 0u);
  EXPECT_LE(probes_to_converge, st.probes);
  d.run(ctx, 6000);
  st = state_stats(l, 0);
  EXPECT_GT(st.alarms, alarms);
  EXPECT_EQ(st.incumbent, 1);
  EXPECT_TRUE(converged(st));
  EXPECT_GT(st.converged_at_call, shift_at);
  // The re-open's probes count in all, not in what the first convergence took.
  EXPECT_EQ(st.probes_to_converge, probes_to_converge);
  EXPECT_GT(st.probes, probes_to_converge);
}

// The settled state of the two watch cases: arm 1 (80 us) beats the default (100) and arm 2 (120)
// until kSlowsAt, then costs 200. Rounds are free until the state has settled, then cost
// `round_cost_us` from half-way to the shift on, so that the watch rate is theirs when it comes.
constexpr uint64_t kSlowsAt = 20000;
double incumbent_slows(uint64_t call, const CollectiveContext&, uint16_t arm) {
  const double before[] = {100, 80, 120};
  const double after[] = {100, 200, 120};
  return call < kSlowsAt ? before[arm] : after[arm];
}
void settle_then_price_rounds(Driver& d, const CollectiveContext& ctx, double round_cost_us) {
  d.run(ctx, static_cast<int>(kSlowsAt / 2));
  d.round_cost_us = round_cost_us;
  d.run(ctx, static_cast<int>(kSlowsAt / 2));
  const StateStats st = state_stats(d.learner, 0);
  ASSERT_EQ(st.incumbent, 1);
  ASSERT_EQ(st.phase, "settled");
  ASSERT_EQ(st.alarms, 0u);
}

// Once settled, a state measures only what keeps measuring within kWatchOverhead of its time; where
// a round costs as much as 10,000 of its calls that is nothing, and the floor (kMinWatchFraction,
// a call in 4096) is all that lets the CUSUM see its incumbent slow down. Without it the state
// stays on the slowed arm for good.
TEST(Learner, ASettledStateWhoseRoundsCostFarMoreThanItsCallsStillSeesAShift) {
  Learner l(bulk_config(), catalog_of(3));
  Driver d{l, incumbent_slows};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  ASSERT_NO_FATAL_FAILURE(settle_then_price_rounds(d, ctx, 1e6));
  d.run(ctx, 400000);
  const StateStats st = state_stats(l, 0);
  EXPECT_GT(st.alarms, 0u);
  EXPECT_EQ(st.incumbent, 0);
}

// Where rounds are cheap, a settled state measures what kWatchOverhead (0.1% of its time) pays for,
// here a call in about 800 rather than the floor's one in 4096: a shift is caught sooner.
TEST(Learner, ASettledStateMeasuresWhatItsWatchOverheadPaysFor) {
  Learner l(bulk_config(), catalog_of(3));
  Driver d{l, incumbent_slows};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  ASSERT_NO_FATAL_FAILURE(settle_then_price_rounds(d, ctx, 64));
  d.run(ctx, 60000);
  const StateStats st = state_stats(l, 0);
  ASSERT_EQ(st.alarms, 1u);
  uint64_t reopened_at = 0;
  for (const auto& e : st.events) {
    if (e.what.rfind("reopened", 0) == 0) reopened_at = e.call;
  }
  // About 3,600 calls here, a few measured ones; on the floor's rate alone, 22,800.
  EXPECT_GT(reopened_at, kSlowsAt);
  EXPECT_LT(reopened_at, kSlowsAt + 6000);
  EXPECT_EQ(st.incumbent, 0);
}

// After a congestion episode the arm adopted during it stays only while it is no slower than the
// default: the switch margin is the price of leaving the default, not of returning to it. Here
// the arm adopted under congestion ends 2% slower than the default, inside the 3% margin a
// challenger would need; with the margin applied both ways the state stayed on it for good.
TEST(Learner, AfterAnEpisodeEndsTheDefaultReturnsWithoutTheMargin) {
  auto cat = catalog_of(3);
  Learner l(bulk_config(), cat);
  const uint64_t episode_from = 3000, episode_to = 8000;
  Driver d{l, [&](uint64_t call, const CollectiveContext&, uint16_t arm) {
             const double quiet[] = {100, 102, 130};
             const double congested[] = {200, 150, 260};
             return call >= episode_from && call < episode_to ? congested[arm] : quiet[arm];
           }};
  d.noise = 0.02;
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, static_cast<int>(episode_from));
  ASSERT_EQ(state_stats(l, 0).incumbent, 0);
  d.run(ctx, static_cast<int>(episode_to - episode_from));
  ASSERT_EQ(state_stats(l, 0).incumbent, 1);  // adopted under congestion
  d.run(ctx, 8000);
  const StateStats st = state_stats(l, 0);
  EXPECT_EQ(st.incumbent, 0);
  EXPECT_TRUE(converged(st));
}

TEST(Learner, RunnerUpRecheckFindsAnArmThatBecameCheaper) {
  // The incumbent's cost never changes (CUSUM stays quiet); the runner-up becomes much cheaper.
  // Re-checks run until the state settles (a settled state no longer probes): kept unsettled.
  auto cat = catalog_of(4);
  LearnerConfig cfg = bulk_config();
  for (HeadConfig& h : cfg.heads) h.settle_calls = 1 << 30;
  Learner l(cfg, cat);
  const uint64_t change_at = 3000;
  Driver d{l, [&](uint64_t call, const CollectiveContext&, uint16_t arm) {
             const double before[] = {100, 80, 60, 90};
             const double after[] = {100, 30, 60, 90};
             return call < change_at ? before[arm] : after[arm];
           }};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, static_cast<int>(change_at));
  ASSERT_EQ(state_stats(l, 0).incumbent, 2);
  ASSERT_TRUE(converged(state_stats(l, 0)));
  const uint32_t alarms = state_stats(l, 0).alarms;
  d.run(ctx, 3000);
  const StateStats st = state_stats(l, 0);
  EXPECT_EQ(st.incumbent, 1);
  EXPECT_GT(st.converged_at_call, change_at);
  EXPECT_EQ(st.alarms, alarms);  // found by the re-check, not by an alarm
}

TEST(Learner, DefaultStaysWhenItIsBestAndExplorationCostsLittle) {
  auto cat = std::make_shared<FakeCatalog>(std::vector<double>{10, 1, 2, 3, 4, 5});
  Learner l(bulk_config(), cat);
  const std::vector<double> costs = {100, 120, 130, 150, 170, 200};
  Driver d{l, fixed(costs)};
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 20000);
  EXPECT_EQ(state_stats(l, 0).incumbent, kDefaultArm);
  double total = 0;
  int tail_other = 0;
  for (size_t i = 0; i < d.log.size(); ++i) {
    total += costs[d.log[i].arm];
    if (i >= 10000 && d.log[i].arm != kDefaultArm) ++tail_other;
  }
  EXPECT_LT(total / (100.0 * d.log.size()) - 1.0, 0.01);  // regret below 1% of the cost
  EXPECT_LE(tail_other, 10000 * 2 / 100);                 // converged: ~converged_budget
}

// A round's window ran some arm other than the default (the step-time guard's condition).
bool ran_another_arm(const std::vector<Decision>& window) {
  return std::any_of(window.begin(), window.end(),
                     [](const Decision& x) { return x.arm != kDefaultArm; });
}

// What charging a round of `price_us` adds to a state's ledger: two learners fed the same calls
// until the first round `pick` accepts (given its probes and measured calls), which one of them
// applies with that price. NaN if no round was picked.
double ledger_difference(double price_us, const std::function<bool(int, int)>& pick) {
  auto cat = catalog_of(6);
  LearnerConfig cfg = bulk_config();
  for (HeadConfig& h : cfg.heads) h.regret_budget = 1.0;  // probes are not held back here
  Learner charged(cfg, cat), uncharged(cfg, cat);
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  const std::vector<double> costs{100, 130, 160, 190, 220, 250};
  RoundResult round;
  int probes = 0;
  for (int call = 1; call <= 4000; ++call) {
    const Decision d = charged.decide(ctx);
    EXPECT_EQ(uncharged.decide(ctx).arm, d.arm);
    if (d.measure) {
      round.calls.push_back(
          {d.state_id, d.arm, static_cast<float>(costs[d.arm]), d.probe, d.after_probe});
      probes += d.probe;
    }
    if (call % kRound != 0) continue;
    charged.close_window();
    uncharged.close_window();
    const bool picked = pick(probes, static_cast<int>(round.calls.size()));
    uncharged.apply_round(round);
    if (picked) round.round_cost_us = price_us;
    charged.apply_round(round);
    if (picked) return state_stats(charged, 0).extra_us - state_stats(uncharged, 0).extra_us;
    round = RoundResult{};
    probes = 0;
  }
  return NAN;
}

// A consensus round's price is charged in full: the probes it carries share it (a probe alone in
// its window brings a round about, two in one window bring one round between them; not a K-th
// of a round each, which left most of what probing costs the wall clock out), and a round
// without probes is charged to the calls it measured (here the warm-up's, of the default).
TEST(Learner, ARoundsPriceIsChargedInFullToWhatItMeasured) {
  EXPECT_NEAR(ledger_difference(1000, [](int probes, int) { return probes >= 2; }), 1000, 1e-6);
  EXPECT_NEAR(ledger_difference(1000, [](int probes, int) { return probes == 1; }), 1000, 1e-6);
  EXPECT_NEAR(
      ledger_difference(1000, [](int probes, int measured) { return probes == 0 && measured > 0; }),
      1000, 1e-6);
}

// Where a round costs many calls (here ten; a 4-byte all-reduce's round on a CPU takes what a
// few of its calls take), probes still flow, several to a window, and the ledger, charged every
// round's price, stays within the budget.
TEST(Learner, WhereRoundsCostManyCallsTheLedgerStaysWithinTheBudget) {
  auto cat = catalog_of(4);
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 100, 101, 102})};
  d.round_cost_us = 1000;
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 4);
  d.run(ctx, 1000 * kRound);
  const StateStats st = state_stats(l, 0);
  ASSERT_TRUE(converged(st));
  int probed_windows = 0, probes = 0;
  // From the warm-up's end (the default has its costs) to convergence.
  for (size_t w = 8; w < st.converged_at_call / kRound; ++w) {
    int window_probes = 0;
    for (size_t i = w * kRound; i < (w + 1) * kRound; ++i) {
      window_probes += d.log[i].probe;
    }
    probes += window_probes;
    probed_windows += window_probes > 0;
  }
  ASSERT_GT(probed_windows, 0);
  EXPECT_GE(probes, 2 * probed_windows);
  EXPECT_LE(st.extra_us, st.budget_us);
}

// Where a round costs nothing (NCCL: the round's all-reduce runs on the host while the GPU works,
// and blocks nothing), measuring is free: while probes flow, every incumbent call is measured
// beside them, not only those in the windows that carry a probe.
TEST(Learner, WhereRoundsAreFreeTheIncumbentIsMeasuredBesideEveryProbe) {
  std::array<double, 2> measured_share{};
  for (const int priced : {0, 1}) {
    auto cat = catalog_of(4);
    Learner l(bulk_config(), cat);
    Driver d{l, fixed({100, 100, 101, 102})};
    d.round_cost_us = priced ? 1000 : 0;
    d.run(make_ctx(Role::kDataParallel, 4), 1000 * kRound);
    const StateStats st = state_stats(l, 0);
    ASSERT_TRUE(converged(st)) << priced;
    int incumbent = 0, measured = 0;
    for (size_t i = 8; i < st.converged_at_call; ++i) {  // from the warm-up's end
      if (d.log[i].probe) continue;
      ++incumbent;
      measured += d.log[i].measure;
    }
    ASSERT_GT(incumbent, 0) << priced;
    measured_share[priced] = static_cast<double>(measured) / incumbent;
  }
  // Free: 149 of 149 measured, converged at call 192. At 1,000 µs a round: 118 of 16,052, and the
  // budget the rounds take paces the probes (converged at call 16,096).
  EXPECT_GE(measured_share[0], 0.9);
  EXPECT_LE(measured_share[1], 0.1);
}

TEST(Learner, StepTimeRegressionFreezesExploration) {
  auto cat = catalog_of(5);
  LearnerConfig cfg = bulk_config();
  for (HeadConfig& h : cfg.heads) h.warmup_calls = 2 * kRound;  // two default-only rounds
  Learner l(cfg, cat);
  Driver d{l, fixed({100, 70, 90, 95, 110})};
  // Non-default arms are cheaper per call but slow the step down (e.g. they steal SMs).
  d.signals = [](RoundResult& r, const std::vector<Decision>& w) {
    const bool other = ran_another_arm(w);
    r.step_time_us = other ? 1300.0 : 1000.0;
  };
  const CollectiveContext a = make_ctx(Role::kDataParallel, 1 << 20);
  const CollectiveContext b = make_ctx(Role::kDataParallel, 1 << 10);
  for (int i = 0; i < 3000; ++i) d.step(i % 2 ? a : b);
  const std::vector<StateStats> st = l.stats();
  ASSERT_EQ(st.size(), 2u);
  for (const StateStats& s : st) {
    EXPECT_TRUE(s.frozen);
    EXPECT_EQ(s.phase, "frozen");
  }
  // Frozen: never probes again and runs the best known arm (lowest mean with enough samples).
  const size_t before = d.log.size();
  for (int i = 0; i < 2000; ++i) d.step(i % 2 ? a : b);
  for (size_t i = before; i < d.log.size(); ++i) {
    EXPECT_FALSE(d.log[i].probe);
    EXPECT_EQ(d.log[i].arm, st[d.log[i].state_id].incumbent);
  }
  for (const StateStats& s : st) {
    double best = INFINITY;
    uint16_t best_arm = kDefaultArm;
    for (size_t a = 0; a < s.arms.size(); ++a) {
      if (s.arms[a].samples >= 6 && s.arms[a].mean_us < best) {
        best = s.arms[a].mean_us;
        best_arm = static_cast<uint16_t>(a);
      }
    }
    EXPECT_EQ(s.incumbent, best_arm);
  }
  // A state first seen after the freeze is frozen on the default.
  const Decision late = l.decide(make_ctx(Role::kTensorParallel, 1 << 12));
  EXPECT_EQ(late.arm, kDefaultArm);
  EXPECT_TRUE(l.stats().at(late.state_id).frozen);
}

// The guard fires because the job's own step time says learning hurts: an incumbent that now
// beats the default per call by less than the switch margin is not kept (the WAN run where a 1%
// "gain" came with a 14% slower step); one that beats it by more is.
TEST(Learner, AGuardKeepsAnArmOnlyIfItBeatsTheDefaultByTheMargin) {
  for (const double later : {99.0, 70.0}) {
    auto cat = catalog_of(3);
    Learner l(bulk_config(), cat);
    // Arm 1 wins clearly, then drifts to `later`; the step slows down from call 6000 on.
    Driver d{l, [later](uint64_t call, const CollectiveContext&, uint16_t arm) {
               const double costs[] = {100, call < 3000 ? 80.0 : later, 130};
               return costs[arm];
             }};
    d.signals = [&d](RoundResult& r, const std::vector<Decision>& w) {
      const bool other = ran_another_arm(w);
      r.step_time_us = d.calls > 6000 && other ? 1300.0 : 1000.0;
    };
    d.run(make_ctx(Role::kDataParallel, 1 << 20), 3000);
    ASSERT_EQ(state_stats(l, 0).incumbent, 1);
    d.run(make_ctx(Role::kDataParallel, 1 << 20), 9000);
    const StateStats st = state_stats(l, 0);
    ASSERT_TRUE(st.frozen) << later;
    EXPECT_EQ(st.incumbent, later < 97.0 ? 1 : kDefaultArm) << later;
  }
}

TEST(Learner, StepTimeWithoutRegressionDoesNotFreeze) {
  auto cat = catalog_of(5);
  LearnerConfig cfg = bulk_config();
  for (HeadConfig& h : cfg.heads) h.warmup_calls = 2 * kRound;
  Learner l(cfg, cat);
  Driver d{l, fixed({100, 70, 90, 95, 110})};
  d.signals = [](RoundResult& r, const std::vector<Decision>&) { r.step_time_us = 1000.0; };
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 3000);
  EXPECT_FALSE(state_stats(l, 0).frozen);
  EXPECT_EQ(state_stats(l, 0).incumbent, 1);
}

// The step-time baseline is not one round: a lucky first round (the only one before probing
// began) froze the main job's states at step 20, on the default's steps, 1.7x the tuned ones.
TEST(Learner, ALuckyFirstRoundDoesNotFreezeExplorationThatCostsNoMoreThanItsNoise) {
  auto cat = catalog_of(5);
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 70, 90, 95, 110})};
  int rounds = 0;
  // Steps of 1000 µs on the default, 5% more in rounds that probe; the first round 15% less.
  d.signals = [&rounds](RoundResult& r, const std::vector<Decision>& w) {
    const bool other = ran_another_arm(w);
    r.step_time_us = rounds++ == 0 ? 850.0 : other ? 1050.0 : 1000.0;
  };
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 3000);
  EXPECT_FALSE(state_stats(l, 0).frozen);
  EXPECT_EQ(state_stats(l, 0).incumbent, 1);
}

// Rounds whose step time spreads 12% (a busy shared machine) while probes cost 5%, over 40 seeds:
// the guard seldom takes the noise for a regression (the 10% bar alone did in 31 of 40) and
// always freezes on a regression of 60%. Prints how many jobs froze per regression, the figures
// docs/learner.md ("Guards") quotes.
TEST(Learner, TheStepTimeGuardLooksBeyondTheStepTimesNoise) {
  constexpr int kSeeds = 40;
  for (const double regression : {1.0, 1.3, 1.4, 1.6}) {
    int frozen = 0;
    for (int seed = 1; seed <= kSeeds; ++seed) {
      auto cat = catalog_of(5);
      Learner l(bulk_config(), cat);
      Driver d{l, fixed({100, 70, 90, 95, 110})};
      std::mt19937 rng(seed);
      std::normal_distribution<double> gauss(0.0, 1.0);
      d.signals = [&](RoundResult& r, const std::vector<Decision>& w) {
        const double slower = ran_another_arm(w) ? (d.calls > 1500 ? regression : 1.05) : 1.0;
        r.step_time_us = 1000.0 * slower * (1.0 + 0.12 * gauss(rng));
      };
      d.run(make_ctx(Role::kDataParallel, 1 << 20), 3000);
      frozen += state_stats(l, 0).frozen ? 1 : 0;
    }
    std::printf("step time x%.1f while learning: %d of %d jobs frozen\n", regression, frozen,
                kSeeds);
    if (regression == 1.0) EXPECT_LE(frozen, kSeeds / 10);
    if (regression == 1.6) EXPECT_EQ(frozen, kSeeds);
  }
}

// Jobs (of 40) whose states the step-time guard froze, with step times of 1000 us, 5% noise and,
// in one round in ten, an exponential tail of the step's mean, and `regression` x the step while
// another arm runs after the first 1500 calls (1.05 before).
int jobs_frozen_beside_a_tail(StepSource source, double regression) {
  int frozen = 0;
  for (int seed = 1; seed <= 40; ++seed) {
    Learner l(bulk_config(), catalog_of(5));
    l.set_step_source(source);
    Driver d{l, fixed({100, 70, 90, 95, 110})};
    std::mt19937 rng(seed);
    std::normal_distribution<double> gauss(0.0, 1.0);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::exponential_distribution<double> tail(1.0);
    d.signals = [&](RoundResult& r, const std::vector<Decision>& w) {
      const double slower = ran_another_arm(w) ? (d.calls > 1500 ? regression : 1.05) : 1.0;
      const double slow_round = uniform(rng) < 0.1 ? 1000.0 * tail(rng) : 0.0;
      r.step_time_us = 1000.0 * slower * (1.0 + 0.05 * gauss(rng)) + slow_round;
    };
    d.run(make_ctx(Role::kDataParallel, 1 << 20), 3000);
    frozen += state_stats(l, 0).frozen ? 1 : 0;
  }
  return frozen;
}

TEST(Learner, TheGuardOnRoundsAsStepsLooksBeyondTheirTail) {
  // Where the group marks no steps its rounds are the steps, and rounds of a few calls on shared
  // cores are heavy-tailed: the guard there waits for three regressed rounds in a row, not two.
  const int marked_idle = jobs_frozen_beside_a_tail(StepSource::kMarked, 1.0);
  const int rounds_idle = jobs_frozen_beside_a_tail(StepSource::kRoundsJudged, 1.0);
  const int rounds_regressed = jobs_frozen_beside_a_tail(StepSource::kRoundsJudged, 1.6);
  std::printf("frozen of 40 with no regression: marked steps %d, rounds as steps %d; "
              "rounds as steps x1.6 while learning: %d\n",
              marked_idle, rounds_idle, rounds_regressed);
  EXPECT_GE(marked_idle, 8);  // two in a row: the tail alone freezes many
  EXPECT_LE(rounds_idle, 2);
  EXPECT_GE(rounds_regressed, 30);
}

TEST(Learner, LossStallDuringExplorationFreezes) {
  auto cat = catalog_of(8);
  LearnerConfig cfg = bulk_config();
  cfg.loss_stall_rounds = 5;
  for (HeadConfig& h : cfg.heads) h.min_samples = 20;  // keep it probing for many rounds
  Learner l(cfg, cat);
  Driver d{l, fixed({100, 98, 97, 99, 101, 102, 96, 100})};
  d.signals = [](RoundResult& r, const std::vector<Decision>&) { r.loss = 2.0; };
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 20 * kRound);
  const StateStats st = state_stats(l, 0);
  EXPECT_TRUE(st.frozen);
  const uint64_t probes = st.probes;
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 50 * kRound);
  EXPECT_EQ(state_stats(l, 0).probes, probes);
}

TEST(Learner, ImprovingLossDoesNotFreeze) {
  auto cat = catalog_of(8);
  LearnerConfig cfg = bulk_config();
  cfg.loss_stall_rounds = 5;
  for (HeadConfig& h : cfg.heads) h.min_samples = 20;
  Learner l(cfg, cat);
  Driver d{l, fixed({100, 98, 97, 99, 101, 102, 96, 100})};
  double loss = 10.0;
  d.signals = [&](RoundResult& r, const std::vector<Decision>&) { r.loss = loss *= 0.99; };
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 100 * kRound);
  EXPECT_FALSE(state_stats(l, 0).frozen);
}

// Calls decided with `arm` in a decision log, from index `from` on.
int count_arm(const std::vector<Decision>& log, uint16_t arm, size_t from = 0) {
  int n = 0;
  for (size_t i = from; i < log.size(); ++i) n += log[i].arm == arm;
  return n;
}

TEST(Learner, PriorCutOffLeavesOutArmsPricedFarBeyondTheBest) {
  // Arms 3-5 are priced 40x the best prior and beyond (a ring at 100,000 ranks): with room for 16
  // candidates they are still never tried.
  auto cat = std::make_shared<FakeCatalog>(std::vector<double>{10, 11, 12, 400, 600, 700});
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 90, 95, 1e6, 1e6, 1e6})};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, 2000);
  for (const Decision& dec : d.log) ASSERT_LT(dec.arm, 3);
  EXPECT_EQ(state_stats(l, 0).arms.size(), 3u);
  EXPECT_EQ(state_stats(l, 0).incumbent, 1);

  // The two best challengers by prior are kept as candidates even beyond the cut (the prior is a
  // model, and a state must have something to learn), but priced 50x the default a first probe
  // is not worth its expected cost for a long while: none is taken in 2000 calls.
  auto far = std::make_shared<FakeCatalog>(std::vector<double>{10, 500, 600, 700});
  Learner m(bulk_config(), far);
  Driver e{m, fixed({100, 60, 300, 1e6})};
  e.run(ctx, 2000);
  EXPECT_EQ(count_arm(e.log, 3), 0);
  EXPECT_EQ(state_stats(m, 0).arms.size(), 3u);
  EXPECT_EQ(count_arm(e.log, 1) + count_arm(e.log, 2), 0);
  EXPECT_EQ(state_stats(m, 0).incumbent, 0);
}

// Probes come one at a time (budget 5%, a round every 32 calls): each arm's first cost is back
// before its second probe, so early elimination can act on it.
LearnerConfig one_probe_at_a_time() {
  LearnerConfig cfg = bulk_config();
  for (HeadConfig& h : cfg.heads) {
    h.probe_budget = 0.05;
    h.converged_budget = 0.01;
  }
  return cfg;
}

// Each of `arms` was probed at most `max_probes` times and is eliminated (so probed at least once).
void expect_dropped_within(const Learner& l, const std::vector<Decision>& log,
                           std::initializer_list<uint16_t> arms, int max_probes) {
  const StateStats st = state_stats(l, 0);
  for (uint16_t a : arms) {
    EXPECT_LE(count_arm(log, a), max_probes) << "arm" << a;
    EXPECT_TRUE(st.arms[a].eliminated) << "arm" << a;
  }
}

TEST(Learner, HopelessArmsAreDroppedAfterTheirFirstCost) {
  // arm2 costs 10x the default and arm3 1.5x (far beyond the 5% noise): each is probed once,
  // where min_samples (6) would be spent without early elimination.
  Learner l(one_probe_at_a_time(), catalog_of(4));
  Driver d{l, fixed({100, 80, 1000, 150})};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, 3000);
  expect_dropped_within(l, d.log, {2, 3}, 1);
  EXPECT_EQ(state_stats(l, 0).incumbent, 1);
  EXPECT_EQ(state_stats(l, 0).alarms, 0u);

  // An arm the prior prices above twice the best gets a single probe before its first cost is
  // back, even when the budget would allow a burst of them: here its cost confirms the prior.
  auto cat = std::make_shared<FakeCatalog>(std::vector<double>{10, 10, 30, 10});
  Learner g(bulk_config(), cat);
  Driver e{g, fixed({100, 90, 1000, 95})};
  e.run(ctx, 3000);
  EXPECT_EQ(count_arm(e.log, 2), 1);
  EXPECT_TRUE(state_stats(g, 0).arms[2].eliminated);
  EXPECT_EQ(state_stats(g, 0).incumbent, 1);
}

TEST(Learner, TheIncumbentsOwnTailDoesNotKeepHopelessArmsAlive) {
  // The default costs 100 with one call in 12 at 350 (a slow call on some rank), 20% noise on
  // every cost: each window of its recent costs holds a few of those. arm1 and arm2 cost 4x and
  // 10x; the tail rate asks for three costs each before an early elimination (update_tail).
  // Compared with the incumbent's worst recent cost outliers included, arm1 would be probed
  // until confidently worse (6 probes here) instead.
  Learner l(one_probe_at_a_time(), catalog_of(3));
  Driver d{l, [](uint64_t call, const CollectiveContext&, uint16_t arm) {
             if (arm == 0) return call % 12 == 7 ? 350.0 : 100.0;
             return arm == 1 ? 400.0 : 1000.0;
           }};
  d.noise = 0.2;
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, 3000);
  expect_dropped_within(l, d.log, {1, 2}, 3);
  EXPECT_EQ(state_stats(l, 0).incumbent, 0);
}

// A prior that states its confidence (as a learned one does): each arm's prior cost and sigma of
// its log ratio to the default's (NaN: unsaid).
class ConfidentCatalog : public FakeCatalog {
 public:
  ConfidentCatalog(std::vector<double> priors, std::vector<double> sigmas)
      : FakeCatalog(priors), priors_(std::move(priors)), sigmas_(std::move(sigmas)) {}
  std::vector<ArmPrior> priors(const CollectiveContext&) const override {
    std::vector<ArmPrior> out(priors_.size());
    for (size_t a = 0; a < out.size(); ++a) out[a] = {priors_[a], sigmas_[a]};
    return out;
  }

 private:
  std::vector<double> priors_, sigmas_;
};

TEST(Learner, AConfidentPriorStandsInForRepeatProbesOfAnArmThatCannotWin) {
  // arm1 is a twin of the default (what the engine picks anyway) and arm3 costs what the default
  // costs; arm2 is 20% cheaper. Without a stated confidence both ties are probed until resolved.
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  const std::vector<double> truth{100, 100, 80, 100};
  Learner plain(bulk_config(), std::make_shared<FakeCatalog>(std::vector<double>{10, 10, 8, 10}));
  Driver p{plain, fixed(truth)};
  p.run(ctx, 4000);
  EXPECT_GE(count_arm(p.log, 1), 4);
  EXPECT_EQ(state_stats(plain, 0).incumbent, 2);

  // The model is sure arm1 ties the default (sigma 0.01: it cannot beat it by the 3% margin):
  // not one probe. arm3's prior says nothing: probed as before. arm2 still wins on its costs.
  Learner sure(bulk_config(),
               std::make_shared<ConfidentCatalog>(std::vector<double>{10, 10, 8, 10},
                                                  std::vector<double>{0, 0.01, 0.05, NAN}));
  Driver d{sure, fixed(truth)};
  d.run(ctx, 4000);
  EXPECT_EQ(count_arm(d.log, 1), 0);
  EXPECT_GE(count_arm(d.log, 3), 4);
  EXPECT_EQ(state_stats(sure, 0).incumbent, 2);
}

TEST(Learner, CostsThatContradictAConfidentPriorStillWin) {
  // The model says arm1 ties the default (sigma 0.03: not sure enough to skip it) but it is 20%
  // cheaper on this cluster: its first costs pull the estimate below the margin, it is probed to
  // its full count and takes over. A confident prior only stops probing; costs decide switches.
  Learner l(bulk_config(), std::make_shared<ConfidentCatalog>(std::vector<double>{10, 10, 10},
                                                              std::vector<double>{0, 0.03, NAN}));
  Driver d{l, fixed({100, 80, 100})};
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 4000);
  EXPECT_EQ(state_stats(l, 0).incumbent, 1);
  EXPECT_TRUE(converged(state_stats(l, 0)));
}

// Calls from `from` until a window of 8 consecutive calls averages within 5% of `best` (the
// simulator's recovery metric), or -1.
int64_t calls_to_recover(const std::vector<Decision>& log, size_t from,
                         const std::vector<double>& costs, double best) {
  double sum = 0;
  for (size_t i = from; i < log.size(); ++i) {
    sum += costs[log[i].arm] / best;
    if (i >= from + 8) sum -= costs[log[i - 8].arm] / best;
    if (i + 1 >= from + 8 && sum <= 1.05 * 8) return static_cast<int64_t>(i + 1 - 8 - from);
  }
  return -1;
}

TEST(Learner, RecoversFastAfterAShiftByReprobingOnlyTheBestArms) {
  // The shipped heads (dp: 8 candidates, min_samples 4, budget 50%). The incumbent arm1 triples
  // its cost mid-round (congestion); arm2, the runner-up before, is now the best.
  auto cat = catalog_of(8);
  Learner l(LearnerConfig{}, cat);
  const std::vector<double> before = {100, 60, 64, 70, 120, 130, 140, 150};
  std::vector<double> after = before;
  after[1] = 180;
  const uint64_t shift_at = 3000 + 7;
  Driver d{l, [&](uint64_t call, const CollectiveContext&, uint16_t arm) {
             return call < shift_at ? before[arm] : after[arm];
           }};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, static_cast<int>(shift_at));
  StateStats st = state_stats(l, 0);
  ASSERT_EQ(st.incumbent, 1);
  ASSERT_TRUE(converged(st));
  ASSERT_EQ(st.alarms, 0u);
  const double default_before = st.arms.at(0).center_us;
  // The default is parked too (100 against 64 and 70). Until a settled state's check measures
  // it again, its stats say it has no cost since the re-open, and the ledger still reckons
  // against the last centre it had.
  bool seen_parked = false;
  for (int n = 0; n < 2000; n += kRound) {
    d.run(ctx, kRound);
    const StateStats now = state_stats(l, 0);
    const ArmStats& def = now.arms.at(0);
    ASSERT_EQ(def.arm, 0);
    if (now.alarms == 0 || count_arm(d.log, 0, shift_at) > 0) continue;
    seen_parked = true;
    EXPECT_EQ(def.regime_samples, 0u);
    EXPECT_GT(def.samples, 0u);
    EXPECT_EQ(def.center_us, 0.0);
    EXPECT_NEAR(now.reference_us, default_before, 0.02 * default_before);
  }
  EXPECT_TRUE(seen_parked);
  st = state_stats(l, 0);
  EXPECT_EQ(st.alarms, 1u);
  EXPECT_EQ(st.incumbent, 2);
  EXPECT_TRUE(converged(st));
  // Detection at the first round after the shift, arm2 provisionally at once, the other
  // re-probed arm at the exploring budget: back within 5% of the best in at most 50 calls (the
  // issue's target; re-learning every arm from scratch took hundreds).
  const int64_t recovery = calls_to_recover(d.log, shift_at, after, 64);
  EXPECT_GE(recovery, 0);
  EXPECT_LE(recovery, 50);
  EXPECT_LE(st.converged_at_call, shift_at + 4 * kRound);
  // The arms that were far behind before the shift stay parked: never probed again.
  for (uint16_t arm = 4; arm < 8; ++arm) EXPECT_EQ(count_arm(d.log, arm, shift_at), 0) << arm;
  // The new incumbent's costs from before the re-open are not its regime's.
  EXPECT_GT(st.arms.at(2).regime_samples, 0u);
  EXPECT_LT(st.arms.at(2).regime_samples, st.arms.at(2).samples);
}

TEST(Learner, AnArmMeasuredCheaperThanTheDefaultIsProbedOnAfterADisasterSpentTheBudget) {
  // Seen on a GPU over NCCL's socket transport: tree, cheaper than the default in its first
  // cost or two, was not probed again once one probe of ring/LL (18-51x the default) had spent
  // the do-no-harm budget many times over. Here arm1 is 0.8x the default and arm2 50x; arm2's
  // probe comes with arm1's first cost (or, with a few probes a round, its third). Cheaper by
  // more than the default's noise, arm1 repays: it is probed on, and wins.
  for (auto [probe_budget, arm2_prior] : {std::pair{0.25, 13.0}, std::pair{0.1, 13.3}}) {
    auto cat = std::make_shared<FakeCatalog>(std::vector<double>{10, 9, arm2_prior});
    LearnerConfig cfg = bulk_config();
    for (HeadConfig& h : cfg.heads) h.probe_budget = probe_budget;
    Learner l(cfg, cat);
    Driver d{l, fixed({100, 80, 5000})};
    d.run(make_ctx(Role::kDataParallel, 1 << 20), 2000);
    ASSERT_EQ(count_arm(d.log, 2), 1) << probe_budget;
    EXPECT_EQ(state_stats(l, 0).incumbent, 1) << probe_budget;
  }
}

TEST(Learner, ADeferredChallengerThatReopensTheStateIsProbedThen) {
  // Arm1 (0.65x the default) is priced 1.48x, so its first probe is deferred until the state has
  // seen a few calls; the state converges on the default without it, and its runner-up probes
  // then show it cheaper, which re-opens the state. Another state of the group (a larger size)
  // shifts the rounds so that those costs arrive before the deferred arms are woken. Before, the
  // re-open left arm1 deferred: the state re-converged at once, re-opened at the next re-check,
  // and so on for good (3000 calls on the default, 372 probes).
  auto cat = std::make_shared<FakeCatalog>(std::vector<double>{10, 14.8, 18.6});
  Learner l(LearnerConfig{}, cat);
  const CollectiveContext small = make_ctx(Role::kDataParallel, 1 << 20);
  const CollectiveContext large = make_ctx(Role::kDataParallel, 64u << 20);
  Driver d{l, [&](uint64_t, const CollectiveContext& ctx, uint16_t arm) {
             return ctx.effective_bytes == small.effective_bytes
                        ? std::vector<double>{100, 65, 2000}.at(arm)
                        : std::vector<double>{10000, 100, 10000}.at(arm);
           }};
  for (int k = 0; k < 3000; ++k) {
    d.step(small);
    if (k % 3 == 0) d.step(large);
  }
  const StateStats st = state_stats(l, d.log[0].state_id);
  EXPECT_EQ(st.incumbent, 1);
  EXPECT_LT(st.probes, 100u);
}

TEST(Learner, NoFalseAlarmsUnderHeavyTailedNoiseYetAShiftIsCaught) {
  // 3% Gaussian noise plus 10% of the calls 3-10x slower, whatever arm runs (a shared host).
  auto cat = catalog_of(3);
  Learner l(LearnerConfig{}, cat);
  std::vector<double> costs = {100, 80, 90};
  Driver d{l, [&](uint64_t, const CollectiveContext&, uint16_t arm) { return costs[arm]; }};
  d.noise = 0.03;
  d.outlier_rate = 0.10;
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, 60000);
  StateStats st = state_stats(l, 0);
  EXPECT_EQ(st.incumbent, 1);
  EXPECT_EQ(st.alarms, 0u);
  // The incumbent doubles: the same detector, under the same tail, sees it within a few rounds.
  costs[1] = 160;
  d.run(ctx, 6 * kRound);
  st = state_stats(l, 0);
  EXPECT_EQ(st.alarms, 1u);
  EXPECT_EQ(st.incumbent, 2);
}

TEST(Learner, RobustCentrePicksTheCheaperArmUnderHeavyTails) {
  // arm1 is 15% cheaper than the default, arm2 15% dearer; 10% of all calls are 3-10x outliers,
  // so a mean over a handful of costs is decided by how many outliers it caught. Across seeds
  // the learner settles on arm1 and spends the calls after convergence there.
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    Learner l(LearnerConfig{}, catalog_of(3));
    Driver d{l, fixed({100, 85, 115})};
    d.rng.seed(seed);
    d.noise = 0.03;
    d.outlier_rate = 0.10;
    const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
    d.run(ctx, 4000);
    const StateStats st = state_stats(l, 0);
    EXPECT_EQ(st.incumbent, 1) << "seed " << seed;
    EXPECT_TRUE(converged(st)) << "seed " << seed;
    EXPECT_GE(count_arm(d.log, 1, 2000), 1900) << "seed " << seed;
  }
}

TEST(Learner, AnOutlierOnAGoodArmsFirstCostDoesNotMakeItHopeless) {
  // Heavy-tailed costs (5% of calls 3-10x slower, and two such outliers among the default's
  // first calls, so the tail shows early); arm1 (the best) draws an 8x outlier on its very first
  // probe. Because the state's costs show such a tail, one expensive cost is not taken for a slow
  // arm: early elimination waits for more costs.
  auto cat = catalog_of(3);
  LearnerConfig cfg;
  for (HeadConfig& h : cfg.heads) h.probe_budget = 0.05;  // one probe at a time
  Learner l(cfg, cat);
  int default_costs = 0, arm1_costs = 0;
  Driver d{l, [&](uint64_t, const CollectiveContext&, uint16_t arm) {
             if (arm == 0 && (++default_costs == 3 || default_costs == 6)) return 6 * 100.0;
             if (arm == 1 && arm1_costs++ == 0) return 8 * 70.0;
             return arm == 0 ? 100.0 : arm == 1 ? 70.0 : 110.0;
           }};
  d.noise = 0.03;
  d.outlier_rate = 0.05;
  // Never eliminated, not even for a while: a wrong elimination undone later by the converged
  // state's confirmation probe would still end on arm1.
  for (int chunk = 0; chunk < 100; ++chunk) {
    d.run(make_ctx(Role::kDataParallel, 1 << 20), 40);
    ASSERT_FALSE(state_stats(l, 0).arms[1].eliminated) << "after call " << 40 * (chunk + 1);
  }
  EXPECT_EQ(state_stats(l, 0).incumbent, 1);
}

TEST(Learner, UnavailableArmIsNeverChosenAgain) {
  auto cat = catalog_of(4);
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 80, 60, 90})};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, 3000 - 3000 % kRound);
  ASSERT_EQ(state_stats(l, 0).incumbent, 2);
  RoundResult r;
  r.unavailable.push_back({0, 2});
  l.apply_round(r);
  // The incumbent fell back to the default, and in the same round the state took the arm its
  // statistics already show to be confidently cheaper than the default.
  EXPECT_EQ(state_stats(l, 0).incumbent, 1);
  EXPECT_TRUE(state_stats(l, 0).arms[2].eliminated);
  const size_t from = d.log.size();
  d.run(ctx, 8000);
  for (size_t i = from; i < d.log.size(); ++i) ASSERT_NE(d.log[i].arm, 2);
  EXPECT_EQ(state_stats(l, 0).incumbent, 1);
}

TEST(Learner, UnavailableIncumbentFallsBackToTheDefault) {
  auto cat = catalog_of(4);
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 120, 60, 130})};  // without arm2, the default is best
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, 3000 - 3000 % kRound);
  ASSERT_EQ(state_stats(l, 0).incumbent, 2);
  RoundResult r;
  r.unavailable.push_back({0, 2});
  l.apply_round(r);
  EXPECT_EQ(state_stats(l, 0).incumbent, kDefaultArm);
  const Decision next = l.decide(ctx);
  EXPECT_NE(next.arm, 2);
  if (!next.probe) {
    EXPECT_EQ(next.arm, kDefaultArm);
  }
  const size_t from = d.log.size();
  d.run(ctx, 8000);
  for (size_t i = from; i < d.log.size(); ++i) ASSERT_NE(d.log[i].arm, 2);
  EXPECT_EQ(state_stats(l, 0).incumbent, kDefaultArm);
  EXPECT_TRUE(converged(state_stats(l, 0)));
}

TEST(Learner, UnavailableBeforeItWasProbedIsNeverProbed) {
  auto cat = std::make_shared<FakeCatalog>(std::vector<double>{10, 1, 2, 3});
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 50, 90, 95})};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  l.decide(ctx);  // creates state 0
  RoundResult r;
  r.unavailable.push_back({0, 1});
  r.unavailable.push_back({0, kDefaultArm});  // the engine default cannot be dropped: ignored
  r.unavailable.push_back({7, 1});            // unknown state: ignored
  l.apply_round(r);
  d.run(ctx, 3000);
  for (const Decision& dec : d.log) ASSERT_NE(dec.arm, 1);
  EXPECT_EQ(state_stats(l, 0).incumbent, 2);  // the best of the arms that remain
  EXPECT_TRUE(state_stats(l, 0).arms[1].eliminated);
}

// A workload of several roles, ops and sizes, chosen by a seeded generator.
std::vector<CollectiveContext> workload(int n) {
  std::mt19937 g(777);
  const Role roles[] = {Role::kDataParallel, Role::kFsdpAllGather};
  const OpKind ops[] = {OpKind::kAllReduce, OpKind::kAllGather};
  std::vector<CollectiveContext> w;
  for (int i = 0; i < n; ++i) {  // 12 states
    w.push_back(make_ctx(roles[g() % 2], uint64_t{1} << (12 + 4 * (g() % 3)), ops[g() % 2]));
  }
  return w;
}

double true_cost(const CollectiveContext& c, uint16_t arm) {
  return 20.0 + static_cast<double>(c.effective_bytes) / 1000.0 *
                    (1.0 + 0.1 * ((arm * 5 + static_cast<int>(c.op)) % 7));
}

// Two ranks with different local timings (their own noise, their own clocks) agree on each
// round's rank-reduced costs (minimum over ranks); only those reach their learners.
std::vector<std::vector<Decision>> run_ranks(int ranks, uint32_t cost_seed, bool peek) {
  auto cat = catalog_of(8);
  std::vector<std::unique_ptr<Learner>> learners;
  for (int r = 0; r < ranks; ++r)
    learners.push_back(std::make_unique<Learner>(LearnerConfig{}, cat));
  std::vector<std::vector<CollectiveContext>> work;
  for (int r = 0; r < ranks; ++r) work.push_back(workload(12000));
  std::vector<std::mt19937> local;
  for (int r = 0; r < ranks; ++r) local.emplace_back(cost_seed + 1000 * r);
  std::vector<std::vector<Decision>> logs(ranks);
  std::vector<std::vector<std::vector<float>>> pending(ranks);
  std::deque<RoundResult> in_flight;
  std::vector<CallOutcome> window;
  std::normal_distribution<double> gauss(0.0, 1.0);
  for (size_t i = 0; i < work[0].size(); ++i) {
    float reduced = INFINITY;
    for (int r = 0; r < ranks; ++r) {
      const Decision dec = learners[r]->decide(work[r][i]);
      logs[r].push_back(dec);
      if (peek && r == 1 && i % 97 == 0) {  // read-only calls on one rank only
        (void)learners[r]->stats();
        (void)learners[r]->snapshot();
      }
      const double local_cost = true_cost(work[r][i], dec.arm) * (1.0 + 0.1 * gauss(local[r]));
      reduced = std::min(reduced, static_cast<float>(std::max(local_cost, 0.5)));
    }
    window.push_back({logs[0].back().state_id, logs[0].back().arm, reduced});
    if ((i + 1) % kRound == 0) {
      for (int r = 0; r < ranks; ++r) learners[r]->close_window();
      RoundResult rr;
      rr.calls = std::move(window);
      window.clear();
      rr.step_time_us = 1000.0;
      in_flight.push_back(std::move(rr));
      if (in_flight.size() > 1) {  // applied one round later, at the same call on every rank
        for (int r = 0; r < ranks; ++r) learners[r]->apply_round(in_flight.front());
        in_flight.pop_front();
      }
    }
  }
  return logs;
}

bool same(const Decision& a, const Decision& b) {
  return a.state_id == b.state_id && a.arm == b.arm && a.probe == b.probe && a.epoch == b.epoch &&
         a.action.algo == b.action.algo && a.action.proto == b.action.proto &&
         a.action.channels == b.action.channels;
}

TEST(Learner, RanksFedTheSameRoundsDecideIdentically) {
  const auto logs = run_ranks(2, 42, /*peek=*/true);
  ASSERT_EQ(logs[0].size(), logs[1].size());
  int non_default = 0;
  for (size_t i = 0; i < logs[0].size(); ++i) {
    ASSERT_TRUE(same(logs[0][i], logs[1][i])) << "call " << i;
    non_default += logs[0][i].arm != kDefaultArm;
  }
  EXPECT_GT(non_default, 0);
  // The same workload with other costs gives another sequence: the rounds do drive decide.
  const auto other = run_ranks(2, 4242, false);
  bool differs = false;
  for (size_t i = 0; i < other[0].size() && !differs; ++i) {
    differs = !same(other[0][i], logs[0][i]);
  }
  EXPECT_TRUE(differs);
  // And a rerun, without the read-only calls, reproduces it exactly.
  const auto again = run_ranks(2, 42, false);
  for (size_t i = 0; i < again[0].size(); ++i) ASSERT_TRUE(same(again[0][i], logs[0][i]));
}

TEST(Learner, StateIdsFollowFirstSeenOrderAndSizeBins) {
  auto cat = catalog_of(3);
  Learner l(bulk_config(), cat);
  EXPECT_EQ(l.decide(make_ctx(Role::kDataParallel, 1024)).state_id, 0u);
  EXPECT_EQ(l.decide(make_ctx(Role::kDataParallel, 2047)).state_id, 0u);  // same bin
  EXPECT_EQ(l.decide(make_ctx(Role::kDataParallel, 2048)).state_id, 1u);
  EXPECT_EQ(l.decide(make_ctx(Role::kTensorParallel, 1024)).state_id, 2u);
  EXPECT_EQ(l.decide(make_ctx(Role::kDataParallel, 1024, OpKind::kAllGather)).state_id, 3u);
  EXPECT_EQ(l.decide(make_ctx(Role::kDataParallel, 0)).state_id, 4u);
  EXPECT_EQ(l.decide(make_ctx(Role::kDataParallel, 1)).state_id, 4u);
  EXPECT_EQ(l.decide(make_ctx(Role::kDataParallel, uint64_t{1} << 62)).state_id, 5u);
  EXPECT_EQ(l.decide(make_ctx(Role::kDataParallel, uint64_t{1} << 47)).state_id, 5u);  // capped
  const std::vector<StateStats> st = l.stats();
  ASSERT_EQ(st.size(), 6u);
  for (uint32_t i = 0; i < st.size(); ++i) EXPECT_EQ(st[i].state_id, i);
  EXPECT_EQ(st[0].size_bin, size_bin(1024));
  EXPECT_EQ(st[1].size_bin, size_bin(2048));
  EXPECT_EQ(st[5].size_bin, size_bin(uint64_t{1} << 62));
  EXPECT_EQ(st[2].role, Role::kTensorParallel);
  EXPECT_EQ(st[3].op, OpKind::kAllGather);
  CollectiveContext bad = make_ctx(Role::kDataParallel, 1024);
  bad.op = OpKind::kCount;
  EXPECT_THROW(l.decide(bad), std::invalid_argument);
}

TEST(Learner, CandidatesAreTheDefaultPlusTheBestByPriorProbedInPriorOrder) {
  // Priors: arm4 best, then arm2; the others are never candidates with max_candidates = 3.
  auto cat = std::make_shared<FakeCatalog>(std::vector<double>{10, 8, 3, 9, 1, 7});
  LearnerConfig cfg = bulk_config();
  for (HeadConfig& h : cfg.heads) h.max_candidates = 3;
  Learner l(cfg, cat);
  Driver d{l, fixed({100, 10, 90, 95, 80, 20})};  // arm1 and arm5 would be best: not candidates
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 3000);
  std::vector<uint16_t> first_probes;
  for (const Decision& dec : d.log) {
    ASSERT_TRUE(dec.arm == 0 || dec.arm == 2 || dec.arm == 4) << dec.arm;
    if (dec.probe && first_probes.size() < 2) first_probes.push_back(dec.arm);
  }
  ASSERT_EQ(first_probes.size(), 2u);
  EXPECT_EQ(first_probes[0], 4);
  EXPECT_EQ(first_probes[1], 2);
  EXPECT_EQ(state_stats(l, 0).incumbent, 4);
  EXPECT_EQ(state_stats(l, 0).arms.size(), 3u);
  // The decision carries the catalog arm's action.
  for (const Decision& dec : d.log) EXPECT_EQ(dec.action.algo, dec.arm == 0 ? -1 : dec.arm);
}

TEST(Learner, WarmupRunsTheDefault) {
  auto cat = catalog_of(4);
  Learner l(bulk_config(), cat);
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  for (int i = 0; i < HeadConfig{}.warmup_calls; ++i) {
    const Decision dec = l.decide(ctx);
    EXPECT_EQ(dec.arm, kDefaultArm);
    EXPECT_FALSE(dec.probe);
  }
  EXPECT_EQ(state_stats(l, 0).phase, "warmup");
  // Probing starts once the default's costs (the baseline probes are charged against) are in.
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(l.decide(ctx).probe);
  EXPECT_EQ(state_stats(l, 0).phase, "probing");
  RoundResult r;
  for (int i = 0; i < 16; ++i) r.calls.push_back({0, kDefaultArm, 100.f, false});
  l.apply_round(r);
  for (int i = 0; i < 8; ++i) l.decide(ctx);
  EXPECT_GT(state_stats(l, 0).probes, 0u);
}

// Snapshots list states in first-seen order; compare them by (role, op, size bin).
PolicySnapshot by_key(PolicySnapshot s) {
  std::sort(s.states.begin(), s.states.end(), [](const StateSnapshot& x, const StateSnapshot& y) {
    return std::tie(x.role, x.op, x.size_bin) < std::tie(y.role, y.op, y.size_bin);
  });
  return s;
}

bool same_snapshot(PolicySnapshot a, PolicySnapshot b) {
  a = by_key(std::move(a));
  b = by_key(std::move(b));
  if (a.states.size() != b.states.size()) return false;
  for (size_t i = 0; i < a.states.size(); ++i) {
    const StateSnapshot& x = a.states[i];
    const StateSnapshot& y = b.states[i];
    if (x.role != y.role || x.op != y.op || x.size_bin != y.size_bin ||
        x.incumbent != y.incumbent || x.converged != y.converged ||
        x.arms.size() != y.arms.size()) {
      return false;
    }
    for (size_t k = 0; k < x.arms.size(); ++k) {
      const ArmSnapshot& p = x.arms[k];
      const ArmSnapshot& q = y.arms[k];
      if (p.name != q.name || p.samples != q.samples || p.mean_us != q.mean_us || p.m2 != q.m2 ||
          p.eliminated != q.eliminated) {
        return false;
      }
    }
  }
  return true;
}

TEST(Learner, SnapshotRestoreRoundTripStartsWarm) {
  auto cat = catalog_of(5);
  Learner a(bulk_config(), cat);
  Driver d{a, fixed({100, 80, 60, 90, 70})};
  const CollectiveContext big = make_ctx(Role::kDataParallel, 1 << 20);
  const CollectiveContext small = make_ctx(Role::kTensorParallel, 1 << 12);
  for (int i = 0; i < 6000; ++i) d.step(i % 2 ? small : big);
  const PolicySnapshot snap = a.snapshot();
  ASSERT_EQ(snap.states.size(), 2u);
  for (const StateSnapshot& s : snap.states) {
    EXPECT_TRUE(s.converged);
    EXPECT_EQ(s.incumbent, "arm2");
  }

  Learner b(bulk_config(), cat);
  b.restore(snap);
  EXPECT_TRUE(b.stats().empty());                  // states are created lazily...
  EXPECT_TRUE(same_snapshot(b.snapshot(), snap));  // ...but nothing restored is lost meanwhile
  // First seen in the other order: matched by (role, op, size bin), not by id.
  const Decision first = b.decide(small);
  EXPECT_EQ(first.arm, 2);  // no warm-up: exploits at once
  EXPECT_FALSE(first.probe);
  EXPECT_EQ(b.decide(big).arm, 2);
  const std::vector<StateStats> st = b.stats();
  EXPECT_EQ(st[0].role, Role::kTensorParallel);
  EXPECT_TRUE(converged(st[0]));
  EXPECT_TRUE(same_snapshot(b.snapshot(), snap));
}

TEST(Learner, RestoreIgnoresUnknownArmsAndRejectsBadSnapshots) {
  auto cat = catalog_of(3);
  Learner l(bulk_config(), cat);
  PolicySnapshot snap;
  StateSnapshot s;
  s.role = Role::kDataParallel;
  s.op = OpKind::kAllReduce;
  s.size_bin = size_bin(1 << 20);
  s.incumbent = "arm1";
  s.converged = true;
  s.arms.push_back({"arm1", 10, 50.0, 90.0, false});
  s.arms.push_back({"ring/LL128/c8", 10, 5.0, 1.0, false});  // not in this catalog
  snap.states.push_back(s);

  PolicySnapshot bad = snap;
  bad.states.push_back(s);  // duplicate state
  EXPECT_THROW(l.restore(bad), std::invalid_argument);
  bad = snap;
  bad.states[0].size_bin = kNumSizeBins;
  EXPECT_THROW(l.restore(bad), std::invalid_argument);
  bad = snap;
  bad.states[0].arms[0].mean_us = NAN;
  EXPECT_THROW(l.restore(bad), std::invalid_argument);
  EXPECT_TRUE(l.snapshot().states.empty());  // a rejected snapshot changed nothing

  l.restore(snap);
  const Decision dec = l.decide(make_ctx(Role::kDataParallel, 1 << 20));
  EXPECT_EQ(dec.arm, 1);
  const PolicySnapshot out = l.snapshot();
  ASSERT_EQ(out.states.size(), 1u);
  ASSERT_EQ(out.states[0].arms.size(), 3u);  // the catalog's candidates only
  EXPECT_EQ(out.states[0].arms[1].name, "arm1");
  EXPECT_EQ(out.states[0].arms[1].samples, 10u);
  EXPECT_EQ(out.states[0].arms[1].m2, 90.0);
  EXPECT_EQ(out.states[0].arms[0].samples, 0u);
}

TEST(Learner, FrozenModeNeverProbes) {
  auto cat = catalog_of(4);
  LearnerConfig cfg = bulk_config();
  cfg.mode = Mode::kFrozen;
  Learner cold(cfg, cat);
  Driver d{cold, fixed({100, 80, 60, 90})};
  d.run(make_ctx(Role::kDataParallel, 1 << 20), 3000);
  for (const Decision& dec : d.log) {
    ASSERT_FALSE(dec.probe);
    ASSERT_EQ(dec.arm, kDefaultArm);
  }

  Learner warm(bulk_config(), cat);
  Driver w{warm, fixed({100, 80, 60, 90})};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  w.run(ctx, 3000);
  ASSERT_EQ(state_stats(warm, 0).incumbent, 2);
  const uint32_t alarms = state_stats(warm, 0).alarms;
  warm.set_mode(Mode::kFrozen);
  EXPECT_EQ(warm.mode(), Mode::kFrozen);
  const size_t from = w.log.size();
  w.cost = fixed({100, 80, 300, 90});  // not even a shift re-opens probing when frozen
  w.run(ctx, 5000);
  for (size_t i = from; i < w.log.size(); ++i) {
    ASSERT_FALSE(w.log[i].probe);
    ASSERT_EQ(w.log[i].arm, 2);
  }
  EXPECT_EQ(state_stats(warm, 0).alarms, alarms);
}

TEST(Learner, OffModeAlwaysRunsTheDefault) {
  auto cat = catalog_of(4);
  Learner l(bulk_config(), cat);
  Driver d{l, fixed({100, 80, 60, 90})};
  const CollectiveContext ctx = make_ctx(Role::kDataParallel, 1 << 20);
  d.run(ctx, 3000);
  l.set_mode(Mode::kOff);
  const size_t from = d.log.size();
  d.run(ctx, 1000);
  for (size_t i = from; i < d.log.size(); ++i) {
    ASSERT_EQ(d.log[i].arm, kDefaultArm);
    ASSERT_FALSE(d.log[i].probe);
    ASSERT_TRUE(d.log[i].action.is_default());
  }
}

TEST(Learner, EpochCountsRounds) {
  auto cat = catalog_of(2);
  Learner l(bulk_config(), cat);
  EXPECT_EQ(l.epoch(), 0u);
  l.apply_round(RoundResult{});
  l.apply_round(RoundResult{});
  EXPECT_EQ(l.epoch(), 2u);
  EXPECT_EQ(l.decide(make_ctx(Role::kDefault, 64)).epoch, 2u);
}

TEST(Learner, IgnoresMalformedOutcomes) {
  auto cat = catalog_of(3);
  Learner l(bulk_config(), cat);
  l.decide(make_ctx(Role::kDefault, 64));
  RoundResult r;
  r.calls = {{0, 0, -1.f}, {0, 0, NAN}, {0, 9, 5.f}, {3, 0, 5.f}, {0, 0, 5.f}};
  l.apply_round(r);
  EXPECT_EQ(state_stats(l, 0).arms[0].samples, 1u);
  EXPECT_DOUBLE_EQ(state_stats(l, 0).arms[0].mean_us, 5.0);
}

TEST(ModeNames, ParseAndNameRoundTrip) {
  for (Mode m : {Mode::kLearn, Mode::kFrozen, Mode::kOff}) {
    Mode parsed = Mode::kOff;
    ASSERT_TRUE(parse_mode(mode_name(m), &parsed));
    EXPECT_EQ(parsed, m);
  }
  EXPECT_STREQ(mode_name(Mode::kLearn), "learn");
  EXPECT_STREQ(mode_name(Mode::kFrozen), "frozen");
  EXPECT_STREQ(mode_name(Mode::kOff), "off");
}

TEST(ModeNames, RejectsUnknownNames) {
  for (const char* bad : {"", "Learn", "LEARN", "on", "frozen ", "learning", "0"}) {
    Mode m = Mode::kFrozen;
    EXPECT_FALSE(parse_mode(bad, &m)) << bad;
    EXPECT_EQ(m, Mode::kFrozen) << "untouched on failure";
  }
}

TEST(LearnerConfigTest, DefaultHeadsExploreLessOnLatencyCriticalRoles) {
  const auto heads = LearnerConfig::default_heads();
  const auto h = [&](Role r) { return heads[static_cast<int>(r)]; };
  for (Role bulk : {Role::kDefault, Role::kDataParallel, Role::kFsdpReduceScatter}) {
    EXPECT_DOUBLE_EQ(h(bulk).probe_budget, 0.5);
    EXPECT_EQ(h(bulk).max_candidates, 8);
    for (Role crit : {Role::kTensorParallel, Role::kPipeline, Role::kContextParallel,
                      Role::kExpertParallel, Role::kFsdpAllGather}) {
      EXPECT_LE(h(crit).probe_budget, 0.3);
      EXPECT_LT(h(crit).probe_budget, h(bulk).probe_budget);
      EXPECT_LE(h(crit).max_candidates, h(bulk).max_candidates);
      EXPECT_GT(h(crit).switch_margin, h(bulk).switch_margin);
    }
  }
  // Latency-critical point-to-point and sharded traffic explores least.
  for (Role crit :
       {Role::kTensorParallel, Role::kPipeline, Role::kContextParallel, Role::kExpertParallel}) {
    EXPECT_LE(h(crit).probe_budget, 0.2);
    EXPECT_LT(h(crit).probe_budget, h(Role::kFsdpAllGather).probe_budget);
  }
  // The statistics are the same for every role.
  for (const HeadConfig& x : heads) {
    EXPECT_EQ(x.min_samples, 4);
    EXPECT_EQ(x.warmup_calls, 8);
    EXPECT_DOUBLE_EQ(x.cusum_threshold, 8.0);
    EXPECT_DOUBLE_EQ(x.cusum_drift, 0.5);
    EXPECT_LE(x.converged_budget, x.probe_budget);
  }
  EXPECT_NO_THROW(Learner(LearnerConfig{}, catalog_of(2)));
}

TEST(LearnerConfigTest, InvalidConfigFailsFastNamingTheValue) {
  const auto message_of = [](const LearnerConfig& cfg) -> std::string {
    try {
      Learner l(cfg, catalog_of(2));
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  LearnerConfig cfg;
  cfg.heads[static_cast<int>(Role::kTensorParallel)].probe_budget = 1.5;
  EXPECT_NE(message_of(cfg).find("heads[tp].probe_budget=1.5"), std::string::npos);
  cfg = LearnerConfig{};
  cfg.heads[0].min_samples = 1;
  EXPECT_NE(message_of(cfg).find("min_samples=1"), std::string::npos);
  cfg = LearnerConfig{};
  cfg.heads[0].converged_budget = cfg.heads[0].probe_budget + 0.1;
  EXPECT_NE(message_of(cfg).find("converged_budget"), std::string::npos);
  cfg = LearnerConfig{};
  cfg.step_regression = NAN;
  EXPECT_NE(message_of(cfg).find("step_regression"), std::string::npos);
  cfg = LearnerConfig{};
  cfg.loss_stall_rounds = 0;
  EXPECT_NE(message_of(cfg).find("loss_stall_rounds=0"), std::string::npos);
  EXPECT_THROW(Learner(LearnerConfig{}, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace dynamiccl
