// The backend's dispatch path and consensus bookkeeping, through null engines on one rank: what
// is logged and counted per call, when consensus rounds apply, and that engine errors keep their
// class.
#include <gtest/gtest.h>

#include "backend/consensus.h"
#include "backend/null_engine.h"
#include "backend/process_group_dynamiccl.h"

namespace dynamiccl {
namespace {

using testing::NullEngine;

struct Group {
  c10::intrusive_ptr<NullEngine> gloo = c10::make_intrusive<NullEngine>();
  c10::intrusive_ptr<ProcessGroupDynamicCCL> pg;

  explicit Group(BackendConfig cfg) {
    pg = c10::make_intrusive<ProcessGroupDynamicCCL>(
        0, 1, ProcessGroupDynamicCCL::Engines{gloo, {}}, std::move(cfg), std::chrono::seconds(10));
  }
  int rounds() const { return static_cast<int>(pg->rounds_started()); }
  void allreduce(int64_t numel) {
    std::vector<at::Tensor> t{at::ones({numel})};
    pg->allreduce(t, c10d::AllreduceOptions())->wait();
  }
};

BackendConfig config(Mode mode, int round_calls = 4) {
  BackendConfig c;
  c.mode = mode;
  c.round_calls = round_calls;
  return c;
}

TEST(Dispatch, OffPassesThroughWithoutDecisions) {
  Group g(config(Mode::kOff));
  for (int i = 0; i < 10; ++i) g.allreduce(4);
  EXPECT_EQ(g.gloo->allreduces, 10);
  EXPECT_EQ(g.rounds(), 0);  // no consensus rounds
  EXPECT_EQ(g.pg->telemetry().decisions_logged(), 0u);
  EXPECT_EQ(g.pg->learned_calls(), 0u);
  const SummaryCell& cell = g.pg->telemetry().summary(EngineKind::kCpu, OpKind::kAllReduce, 4);
  EXPECT_EQ(cell.calls.load(), 10u);
  EXPECT_EQ(cell.timed.load(), 10u);  // completed works are timed at once
}

// Rounds close every K learned calls and apply one round later, at the same call index on every
// rank: after n calls, floor(n / K) all-reduces have started and one fewer has been applied.
// (Every call is measured here: in warm-up, the state measures the default's every call.)
TEST(Dispatch, ConsensusRoundsApplyOneRoundLater) {
  BackendConfig cfg = config(Mode::kLearn, 4);
  for (HeadConfig& h : cfg.learner.heads) h.warmup_calls = 1000;
  Group g(cfg);
  for (int n = 1; n <= 22; ++n) {
    g.allreduce(256);
    const uint64_t started = n / 4;
    EXPECT_EQ(g.rounds(), static_cast<int>(started)) << "after call " << n;
    EXPECT_EQ(g.pg->rounds_applied(), started > 0 ? started - 1 : 0) << "after call " << n;
    EXPECT_EQ(g.pg->learner(EngineKind::kCpu)->epoch(), g.pg->rounds_applied());
  }
  EXPECT_EQ(g.pg->learned_calls(), 22u);
  // Every learned call is in the decision log, in order.
  const auto log = g.pg->telemetry().decision_log();
  ASSERT_EQ(log.size(), 22u);
  for (size_t i = 0; i < log.size(); ++i) EXPECT_EQ(log[i].seq, i);
}

// Applied costs reach the learner: with K = 4, 40 calls apply 9 rounds of 4 costs. (In warm-up
// every call runs the engine default, which the null engine completes at once.)
TEST(Dispatch, AppliedCostsReachTheLearner) {
  BackendConfig cfg = config(Mode::kLearn, 4);
  for (HeadConfig& h : cfg.learner.heads) h.warmup_calls = 1000;
  Group g(cfg);
  for (int i = 0; i < 40; ++i) g.allreduce(256);
  uint64_t samples = 0;
  for (const StateStats& st : g.pg->learner(EngineKind::kCpu)->stats()) {
    for (const ArmStats& a : st.arms) samples += a.samples;
  }
  EXPECT_EQ(samples, 9u * 4u);
}

TEST(Dispatch, EngineErrorsKeepTheirClass) {
  for (Mode mode : {Mode::kOff, Mode::kLearn}) {
    Group g(config(mode));
    g.gloo->fail = [] { C10_THROW_ERROR(DistNetworkError, "peer closed the connection"); };
    try {
      g.allreduce(4);
      FAIL() << "no error";
    } catch (const c10::DistNetworkError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("peer closed the connection"), std::string::npos) << what;
      EXPECT_NE(what.find("dynamiccl: allreduce in the cpu engine"), std::string::npos) << what;
    }
  }
}

// An engine may run a call synchronously and return no Work (ProcessGroupNCCL does for
// async_op=False since torch 2.8): the caller gets no Work either, in every mode, and the call
// is still counted.
TEST(Dispatch, AnEngineThatReturnsNoWorkGivesNoWork) {
  for (Mode mode : {Mode::kOff, Mode::kLearn}) {
    Group g(config(mode));
    g.gloo->synchronous = true;
    std::vector<at::Tensor> t{at::ones({4})};
    for (int i = 0; i < 10; ++i) {
      EXPECT_FALSE(g.pg->allreduce(t, c10d::AllreduceOptions()).defined()) << mode_name(mode);
    }
    const SummaryCell& cell = g.pg->telemetry().summary(EngineKind::kCpu, OpKind::kAllReduce,
                                                        size_bin(16));
    EXPECT_EQ(cell.calls.load(), 10u) << mode_name(mode);
    EXPECT_EQ(cell.timed.load(), 0u) << mode_name(mode);  // nothing to time
  }
}

TEST(Dispatch, UnknownForcedArmIsAValueErrorListingTheArms) {
  BackendConfig cfg = config(Mode::kLearn);
  cfg.force = {{"allreduce", "warp"}};
  try {
    Group g(cfg);
    FAIL() << "no error";
  } catch (const c10::ValueError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'warp'"), std::string::npos) << what;
    EXPECT_NE(what.find("ring_s4"), std::string::npos) << what;
  }
  cfg.force = {{"allreduse", "ring"}};
  EXPECT_THROW(Group{cfg}, c10::ValueError);
}

// A settled state stops asking for costs: once every state of the group has settled, rounds
// carry nothing and are skipped, so consensus goes quiet (what `frozen` costs).
TEST(Dispatch, SettledStatesMakeRoundsStop) {
  BackendConfig cfg = config(Mode::kLearn, 4);
  for (HeadConfig& h : cfg.learner.heads) {
    h.settle_calls = 16;
    h.max_candidates = 1;  // only the default: nothing to probe, converges at once
    // The costs are this host's wall clock: a preempted call must not read as a shift.
    h.cusum_threshold = 1e6;
  }
  Group g(cfg);
  // Before settling a state measures what keeps measuring within its overhead budget, judged
  // by this host's round cost: under load that is a call in thousands, and the state is only
  // evaluated (and settles) at a round.
  const auto phase = [&] { return g.pg->learner(EngineKind::kCpu)->stats().at(0).phase; };
  for (int i = 0; i < 400 || (phase() != "settled" && i < 40000); ++i) g.allreduce(256);
  const int rounds = g.rounds();
  const StateStats st = g.pg->learner(EngineKind::kCpu)->stats().at(0);
  std::string events;
  for (const StateEvent& e : st.events) events += " " + std::to_string(e.call) + ":" + e.what;
  ASSERT_EQ(st.phase, "settled") << "calls " << st.calls << ", measured " << st.measured_calls
                                 << ", events" << events;
  for (int i = 0; i < 400; ++i) g.allreduce(256);
  // A settled state measures a fraction of its calls (the null engine's rounds cost ~nothing,
  // so that fraction is high): far fewer rounds than one per K calls.
  EXPECT_LT(g.rounds() - rounds, 400 / 4);
  EXPECT_LT(g.pg->learner(EngineKind::kCpu)->stats().at(0).measured_calls, st.calls + 400);
}

// Consensus of one rank whose round all-reduce adds what the other ranks would: `others`
// rewrites the payload as the reduced result.
struct TwoFacedRounds {
  std::function<void(at::Tensor&)> others;
  int started = 0;
  RoundTransport transport() {
    RoundTransport t;
    t.min_allreduce = [this](const at::Tensor& payload) {
      ++started;
      at::Tensor p = payload;
      if (others) others(p);
      auto f = c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()));
      f->markCompleted(c10::IValue(std::vector<at::Tensor>{payload}));
      return f;
    };
    t.allgather = [](const at::Tensor& mine) { return std::vector<at::Tensor>{mine, mine}; };
    return t;
  }
};

CallRecord learned_call(uint64_t seq, bool measured) {
  CallRecord call;
  call.seq = seq;
  call.learned = true;
  call.measured = measured;
  call.start_ns = 1000;
  return call;
}

// Another rank decided differently (its decision hash differs): the round that shows it fails
// with a DistBackendError, and every later boundary fails the same way.
TEST(Consensus, RanksThatDecideDifferentlyFailTheGroup) {
  TwoFacedRounds rounds;
  rounds.others = [](at::Tensor& t) {
    t.data_ptr<double>()[2 * 4 + 1] -= 1;  // after the 2K per-call words, the hash's negated
                                           // maximum: larger elsewhere
  };
  Consensus consensus(4, CostReduce::kMin, rounds.transport());
  bool failed = false;
  for (uint64_t i = 0; i < 12 && !failed; ++i) {
    consensus.add_call(learned_call(i, true));
    try {
      consensus.end_call({nullptr, nullptr});
    } catch (const c10::DistBackendError& e) {
      failed = true;
      EXPECT_NE(std::string(e.what()).find("decided differently"), std::string::npos) << e.what();
    }
  }
  ASSERT_TRUE(failed);
  EXPECT_THROW(consensus.end_call({nullptr, nullptr}), c10::DistBackendError);
  EXPECT_FALSE(consensus.failure().empty());
}

// Nothing measured (frozen: decisions come from the loaded policy, no costs are asked for) still
// leaves one round per kAgreementCalls learned calls, carrying the decision hash, so ranks that
// decide differently are caught in frozen mode too.
TEST(Consensus, UnmeasuredCallsStillCheckAgreement) {
  constexpr int kCalls = static_cast<int>(RoundScheduler::kAgreementCalls);
  TwoFacedRounds quiet_rounds;
  Consensus quiet(4, CostReduce::kMin, quiet_rounds.transport());
  for (int i = 0; i < 3 * kCalls; ++i) {
    quiet.add_call(learned_call(i, false));
    quiet.end_call({nullptr, nullptr});
  }
  EXPECT_EQ(quiet_rounds.started, 3);

  TwoFacedRounds rounds;
  rounds.others = [](at::Tensor& t) { t.data_ptr<double>()[2 * 4 + 1] -= 1; };
  Consensus consensus(4, CostReduce::kMin, rounds.transport());
  int failed_at = -1;
  for (int i = 0; i < 3 * kCalls && failed_at < 0; ++i) {
    consensus.add_call(learned_call(i, false));
    try {
      consensus.end_call({nullptr, nullptr});
    } catch (const c10::DistBackendError& e) {
      failed_at = i;
      EXPECT_NE(std::string(e.what()).find("decided differently"), std::string::npos) << e.what();
    }
  }
  // The first agreement round closes at call kCalls and is applied one round (4 calls) later.
  EXPECT_EQ(failed_at, kCalls + 4 - 1);
}

// Frozen groups (no learner asks for costs) go through the same path in the backend: a round per
// kAgreementCalls learned calls.
TEST(Dispatch, FrozenGroupsRunAgreementRoundsOnly) {
  constexpr int kCalls = static_cast<int>(RoundScheduler::kAgreementCalls);
  Group quiet(config(Mode::kFrozen, 4));
  for (int i = 0; i < 3 * kCalls; ++i) quiet.allreduce(256);
  EXPECT_EQ(quiet.rounds(), 3);
}

// A completion that arrives after its slot was reused by a later call is ignored: it never
// passes for the later call's cost.
TEST(Consensus, LateCompletionOfAReusedSlotIsIgnored) {
  TwoFacedRounds rounds;
  Consensus consensus(2, CostReduce::kMin, rounds.transport());  // 2K = 4 slots
  SummaryCell cell;
  CallRecord call;
  call.start_ns = 1000;
  call.learned = call.measured = true;
  for (int i = 0; i < 5; ++i) {
    consensus.slot(consensus.add_call(call)).cell.store(&cell);
    consensus.end_call({nullptr, nullptr});
  }
  // Call 0's slot now belongs to call 4.
  consensus.complete(0, 5000);
  EXPECT_EQ(cell.timed.load(), 0u);
  consensus.complete(4, 5000);
  EXPECT_EQ(cell.timed.load(), 1u);
  EXPECT_EQ(cell.sum_ns.load(), 4000u);
}

}  // namespace
}  // namespace dynamiccl
