// The learner of one process group: the state table, the consensus round, the guards, and the
// snapshots. Per-state learning is PolicyState (policy_state.h and the parts it names).
//
// No randomness is needed: probe order comes from the prior (ties by arm index) and every other
// tie is broken by that order. Not thread-safe: the caller serializes decide/apply_round of one
// group (they follow the group's call order anyway).
#include "policy/learner.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "policy/policy_state.h"

namespace dynamiccl {

namespace {

constexpr int kNumKeys = kNumRoles * kNumOps * kNumSizeBins * kNumExposures * 2;
// The guard's and the step trials' thresholds are in tuning.h; why each, in docs/learner.md
// ("Guards", "Step trials").

inline int state_key(int role, int op, int bin, Exposure exposure, bool fused) {
  return (((role * kNumOps + op) * kNumSizeBins + bin) * kNumExposures +
          static_cast<int>(exposure)) *
             2 +
         (fused ? 1 : 0);
}

template <typename T>
std::string str(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

void require(bool ok, const std::string& what, const std::string& accepted) {
  if (!ok) {
    throw std::invalid_argument("dynamiccl learner: " + what + " (accepted: " + accepted + ")");
  }
}

void validate(const LearnerConfig& c) {
  const int mode = static_cast<int>(c.mode);
  require(mode < static_cast<int>(Mode::kCount), "mode=" + str(mode), mode_names().joined());
  for (int r = 0; r < kNumRoles; ++r) {
    const HeadConfig& h = c.heads[r];
    const std::string who = std::string("heads[") + role_name(static_cast<Role>(r)) + "].";
    for (const HeadSetting& setting : head_settings()) {
      const double v = setting.get(h);
      require(std::isfinite(v) && setting.accepts(v), who + setting.name + "=" + str(v),
              setting.range());
    }
    require(h.max_trial_pairs >= h.trial_pairs, who + "max_trial_pairs=" + str(h.max_trial_pairs),
            ">= trial_pairs");
    require(h.converged_budget <= h.probe_budget,
            who + "converged_budget=" + str(h.converged_budget), "<= probe_budget");
  }
  require(c.step_regression > 0 && std::isfinite(c.step_regression),
          "step_regression=" + str(c.step_regression), "> 0");
  require(c.loss_stall_rounds >= 1, "loss_stall_rounds=" + str(c.loss_stall_rounds), ">= 1");
}

[[noreturn]] __attribute__((noinline)) void bad_context(const CollectiveContext& ctx) {
  throw std::invalid_argument(
      "dynamiccl learner: context with role=" + str(static_cast<int>(ctx.role)) +
      " op=" + str(static_cast<int>(ctx.op)) + " exposure=" + str(static_cast<int>(ctx.exposure)) +
      " (accepted: a Role, an OpKind and an Exposure below their kCount)");
}

}  // namespace

struct Learner::Impl {
  LearnerConfig config;
  std::shared_ptr<const ArmCatalog> catalog;
  Mode mode;
  uint32_t epoch = 0;

  std::array<int32_t, kNumKeys> index;  // state_key() -> state id, -1 = not seen yet
  std::vector<PolicyState> states;      // by id = first-seen order, the same on every rank
  // The group's do-no-harm budget, shared by its states (stable address: states point to it).
  std::unique_ptr<RegretBudget> budget = std::make_unique<RegretBudget>();
  std::unique_ptr<StepTrialBoard> trials = std::make_unique<StepTrialBoard>();
  std::unique_ptr<ArmEvidenceBoard> evidence = std::make_unique<ArmEvidenceBoard>();
  MeasureCost measure;      // the last known cost of measuring
  bool last_probe = false;  // the group's previous decision was a probe

  // Restored snapshots of states not seen yet; applied when the state is created.
  std::array<int32_t, kNumKeys> pending_index;  // key -> index into pending, -1 = none
  std::vector<StateSnapshot> pending;

  // Guards. A round's window = the calls decided since the previous apply_round.
  bool guard_frozen = false;
  uint64_t window_nondefault = 0;  // non-default decisions in the current window
  double baseline_sum = 0;         // step times of default-only rounds
  int baseline_rounds = 0;
  std::array<double, kMinRobustWindow> first_times{};  // step times of the job's first rounds
  int first_rounds = 0;
  double last_step_time = 0;      // the previous round's
  SampleWindow step_differences;  // |difference| of successive rounds' step times
  double last_step_us = NAN;      // the previous step's time (each step, not a round's mean)
  uint64_t last_step = 0;         // and its number
  SampleWindow successive_steps;  // |difference| of successive steps' times
  int regressed_rounds = 0;       // consecutive
  double best_loss = INFINITY;
  int stalled_rounds = 0;  // rounds without a new best loss while some state probed

  Impl(LearnerConfig c, std::shared_ptr<const ArmCatalog> cat)
      : config(std::move(c)), catalog(std::move(cat)), mode(config.mode) {
    index.fill(-1);
    pending_index.fill(-1);
    states.reserve(64);
  }

  // Cold path (allocates): a context never seen before gets the next state id.
  __attribute__((noinline)) int32_t create_state(const CollectiveContext& ctx, int key, int bin) {
    const uint32_t id = static_cast<uint32_t>(states.size());
    const int role = static_cast<int>(ctx.role);
    states.emplace_back(id, ctx, bin, config.heads[role], *catalog, budget.get(), trials.get(),
                        evidence.get(), config.rules);
    index[key] = static_cast<int32_t>(id);
    PolicyState& s = states.back();
    if (pending_index[key] >= 0) {
      s.restore(pending[pending_index[key]], catalog->arms(ctx.op));
      pending_index[key] = -1;
    }
    if (guard_frozen) s.freeze();
    return static_cast<int32_t>(id);
  }

  // The step times of the round: each pair of a trial's steps (incumbent, then challenger, its
  // lane's lag apart) gives its state one paired difference. Steps without the state's calls pair
  // with nothing.
  void take_step_times(const RoundResult& r) {
    StepTrialBoard& t = *trials;
    for (size_t i = 0; i < r.step_times_us.size(); ++i) {
      const uint64_t step = r.first_step + i;
      const double us = r.step_times_us[i];
      if (std::isfinite(us)) {
        if (std::isfinite(last_step_us) && last_step + 1 == step) {
          successive_steps.push(static_cast<float>(std::fabs(us - last_step_us)));
        }
        last_step_us = us;
        last_step = step;
      }
      while (!t.marks.empty() && t.marks.front().step < step) t.marks.pop_front();
      if (t.marks.empty() || t.marks.front().step != step) continue;
      const StepTrialBoard::Mark mark = t.marks.front();
      t.marks.pop_front();
      for (int j = 0; j < kTrialLanes; ++j) {
        // The step's time without what its exposed probes' own calls added to it.
        const double extra = config.rules.on(Rule::kProbedPairs) ? mark.probe_extra_us : 0.0;
        if (mark.used[j]) take_lane_step(t.lanes[j], step, us - extra, mark.probed);
      }
    }
  }

  void take_lane_step(TrialLane& lane, uint64_t step, double us, bool probed) {
    TrialLane::Pending& incumbent = lane.pending[(step - lane.start) % lane.lag];
    if (lane.owner < 0 || !std::isfinite(us)) {
      incumbent = {};
    } else if (!lane.challenger_at(step)) {
      incumbent = {us, step, probed};
    } else if (std::isfinite(incumbent.us) && incumbent.step + lane.lag == step) {
      PolicyState& owner = states[lane.owner];
      const bool probed_pair = probed || incumbent.probed;
      if (!probed_pair ||
          (config.rules.on(Rule::kProbedPairs) && owner.keeps_probed_pair(incumbent.us, us))) {
        // Winsorized (pair_clip): the longer step is brought within `limit` of the other, the
        // shorter step or kOutlierSpreads spreads of successive steps' difference, whichever is
        // wider: a step that holds other work (a checkpoint, another group's calls) is no arm's
        // doing.
        const double spread = kOutlierSpreads * kMadToSigma *
                              successive_steps.median_recent(SampleWindow::kCapacity);
        const double limit = config.rules.on(Rule::kPairClip)
                                 ? std::max(spread, std::min(incumbent.us, us))
                                 : INFINITY;
        owner.add_trial_pair(std::min(incumbent.us, us + limit),
                             std::min(us, incumbent.us + limit));
      }
      incumbent = {};
    }
  }

  bool exploring() const {
    for (const PolicyState& s : states) {
      if (!s.frozen() && s.phase() == LearnPhase::kProbing) return true;
    }
    return false;
  }

  void freeze_all() {
    guard_frozen = true;
    for (PolicyState& s : states) s.freeze();
  }

  // The median of the first rounds, so that one slowed by set-up or a stray pause does not set it.
  double step_baseline() const {
    if (baseline_rounds >= kMinRobustWindow) return baseline_sum / baseline_rounds;
    std::array<double, kMinRobustWindow> t = first_times;
    std::nth_element(t.begin(), t.begin() + kMinRobustWindow / 2, t.end());
    return t[kMinRobustWindow / 2];
  }

  // Round-to-round standard deviation of the step time, from the median absolute difference of
  // successive rounds: robust to slow drifts (the step shortening as learning converges) and to
  // a minority of outlier rounds.
  double step_noise() const {
    return kMadToSigma * step_differences.median_recent(SampleWindow::kCapacity) / std::sqrt(2.0);
  }

  // What a round's step time must exceed to count as regressed.
  double regression_bar() const {
    const int n = std::max(baseline_rounds, kMinRobustWindow);  // rounds behind the baseline
    return step_baseline() * (1.0 + config.step_regression) +
           kConfidenceZ * step_noise() * std::sqrt(1.0 + 1.0 / n);
  }

  // Guards (docs/learner.md, "Guards"), fed only by the rank-reduced signals of the round:
  //  - step time (step_baseline()): after the first kMinRobustWindow rounds, kRegressionRounds
  //    (kRegressionRoundsUnmarked where rounds are the steps) consecutive rounds slower than
  //    baseline * (1 + step_regression), and beyond the step time's noise (regression_bar()), while
  //    non-default arms ran (a non-default decision or cost in the window) freeze exploration;
  //  - loss: rounds in which the loss set no new minimum are counted while some state is probing
  //    (a new minimum resets the count); loss_stall_rounds of them freeze exploration.
  // Freezing is for the rest of the run: every state, and every state created later, runs its
  // best known arm (lowest centre with the costs a comparison needs, provided the default has as
  // many in the same regime; else the default) and never probes.
  void check_guards(const RoundResult& r, bool nondefault_used) {
    const double st = r.step_time_us;
    if (std::isfinite(st) && st > 0) {
      if (last_step_time > 0) {
        step_differences.push(static_cast<float>(std::fabs(st - last_step_time)));
      }
      last_step_time = st;
      if (first_rounds < kMinRobustWindow) {
        first_times[first_rounds++] = st;
      } else if (nondefault_used) {
        if (st > regression_bar()) {
          const bool marked = trials->source == StepSource::kMarked;
          if (++regressed_rounds >= (marked ? kRegressionRounds : kRegressionRoundsUnmarked)) {
            freeze_all();
            return;
          }
        } else {
          regressed_rounds = 0;
        }
      }
      if (!nondefault_used) {
        baseline_sum += st;
        ++baseline_rounds;
        regressed_rounds = 0;
      }
    }
    const double loss = r.loss;
    if (std::isfinite(loss)) {
      if (loss < best_loss) {
        best_loss = loss;
        stalled_rounds = 0;
      } else if (exploring() && ++stalled_rounds >= config.loss_stall_rounds) {
        freeze_all();
      }
    }
  }
};

Learner::Learner(LearnerConfig config, std::shared_ptr<const ArmCatalog> catalog) {
  if (catalog == nullptr) throw std::invalid_argument("dynamiccl learner: null arm catalog");
  validate(config);
  impl_ = std::make_unique<Impl>(std::move(config), std::move(catalog));
}

Learner::~Learner() = default;

Decision Learner::decide(const CollectiveContext& ctx) {
  Impl& m = *impl_;
  const unsigned role = static_cast<unsigned>(ctx.role);
  const unsigned op = static_cast<unsigned>(ctx.op);
  const unsigned exposure = static_cast<unsigned>(ctx.exposure);
  if (role >= static_cast<unsigned>(kNumRoles) || op >= static_cast<unsigned>(kNumOps) ||
      exposure >= static_cast<unsigned>(kNumExposures)) {
    bad_context(ctx);
  }
  // effective_bytes, not bytes: it is the same on every rank (uneven all-to-all splits are not).
  const int bin = size_bin(ctx.effective_bytes);
  const int key = state_key(static_cast<int>(role), static_cast<int>(op), bin, ctx.exposure,
                            ctx.fused);
  int32_t id = m.index[key];
  if (id < 0) id = m.create_state(ctx, key, bin);
  PolicyState& s = m.states[id];
  bool probe = false, measure = false;
  ArmSlot& a = s.slot(s.choose(m.mode, &probe, &measure));
  if (probe) {
    m.trials->note_probe(static_cast<uint32_t>(id));
    m.budget->window_probed = true;  // this window's round runs: its further probes share it
  }
  ++a.calls;
  ++a.issued;
  m.window_nondefault += a.arm != kDefaultArm;
  Decision d;
  d.state_id = static_cast<uint32_t>(id);
  d.arm = a.arm;
  d.probe = probe;
  d.measure = measure;
  d.after_probe = m.last_probe && !probe;
  m.last_probe = probe;
  d.epoch = m.epoch;
  d.action = a.action;
  return d;
}

void Learner::apply_round(const RoundResult& round) {
  Impl& m = *impl_;
  const size_t n = m.states.size();
  for (const auto& [state_id, arm] : round.unavailable) {
    if (state_id < n) m.states[state_id].drop_arm(arm);
  }
  const bool learning = m.mode == Mode::kLearn;
  bool nondefault_used = m.window_nondefault > 0;
  // A round runs because something in its window was measured, so its price is learning's cost:
  // its probes share it where it carries any (they brought it about), else its measured calls.
  int probes = 0, measured = 0;
  for (const CallOutcome& c : round.calls) {
    if (c.state_id >= n) continue;
    probes += c.probe;
    ++measured;
  }
  const int payers = probes > 0 ? probes : measured;
  const double round_share_us = learning && payers > 0 ? round.round_cost_us / payers : 0.0;
  for (const CallOutcome& c : round.calls) {
    if (c.state_id >= n) continue;
    PolicyState& s = m.states[c.state_id];
    if (round_share_us > 0 && (c.probe || probes == 0)) s.charge_round(round_share_us);
    if (c.channels > 0 && c.arm == kDefaultArm) s.note_default_channels(c.channels);
    const bool timed = c.cost_us > 0 && std::isfinite(c.cost_us);
    // Untimed, it added nothing its step can be cleared of; taken all the same, so that the costs
    // that follow pair with their own probes.
    if (c.probe) {
      m.trials->take_probe_cost(c.state_id, timed ? s.probe_step_extra_us(c.arm, c.cost_us) : 0.0);
    }
    if (!timed) {
      if (c.probe) s.release_probe(c.arm);  // no rank could time it: it will never arrive
      continue;
    }
    nondefault_used = nondefault_used || c.arm != kDefaultArm;
    s.fold(c.arm, c.cost_us, c.probe, learning);
  }
  m.take_step_times(round);
  if (learning) {
    m.measure = {round.round_cost_us, round.round_calls};
    for (PolicyState& s : m.states) s.evaluate(m.measure);
    if (!m.guard_frozen) m.check_guards(round, nondefault_used);
  }
  m.window_nondefault = 0;
  ++m.epoch;
}

void Learner::close_window() { impl_->budget->window_probed = false; }

void Learner::mark_step() { impl_->trials->end_step(); }

void Learner::set_step_source(StepSource source) { impl_->trials->source = source; }

uint32_t Learner::epoch() const { return impl_->epoch; }

Mode Learner::mode() const { return impl_->mode; }

void Learner::set_mode(Mode m) {
  require(m < Mode::kCount, "mode=" + str(static_cast<int>(m)), mode_names().joined());
  impl_->mode = m;
}

std::vector<StateStats> Learner::stats() const {
  std::vector<StateStats> out;
  out.reserve(impl_->states.size());
  for (const PolicyState& s : impl_->states) out.push_back(s.stats(impl_->catalog->arms(s.op())));
  return out;
}

// States in id order, then restored states not seen yet in key order: saving after a warm start
// loses nothing that was loaded.
PolicySnapshot Learner::snapshot() const {
  const Impl& m = *impl_;
  PolicySnapshot snap;
  for (const PolicyState& s : m.states) snap.states.push_back(s.snapshot(m.catalog->arms(s.op())));
  for (int key = 0; key < kNumKeys; ++key) {
    if (m.pending_index[key] >= 0) snap.states.push_back(m.pending[m.pending_index[key]]);
  }
  return snap;
}

void Learner::restore(const PolicySnapshot& snap) {
  Impl& m = *impl_;
  // Validate everything first, so a bad snapshot changes nothing.
  namespace k = policy_key;
  const std::string at = "snapshot ";
  std::vector<char> seen(kNumKeys, 0);
  for (const StateSnapshot& st : snap.states) {
    const int role = static_cast<int>(st.role);
    const int op = static_cast<int>(st.op);
    require(role >= 0 && role < kNumRoles, at + k::kRole + "=" + str(role), "a Role value");
    require(op >= 0 && op < kNumOps, at + k::kOp + "=" + str(op), "an OpKind value");
    require(st.size_bin >= 0 && st.size_bin < kNumSizeBins,
            at + k::kSizeBin + "=" + str(st.size_bin), "0.." + str(kNumSizeBins - 1));
    const int exposure = static_cast<int>(st.exposure);
    require(exposure >= 0 && exposure < kNumExposures, at + k::kExposure + "=" + str(exposure),
            exposure_names().joined());
    const int key = state_key(role, op, st.size_bin, st.exposure, st.fused);
    require(!seen[key],
            at + "state (" + role_name(st.role) + ", " + op_name(st.op) + ", " + str(st.size_bin) +
                ", " + exposure_name(st.exposure) + (st.fused ? ", fused" : "") + ") listed twice",
            std::string("each (") + k::kRole + ", " + k::kOp + ", " + k::kSizeBin + ", " +
                k::kExposure + ", " + k::kFused + ") once");
    seen[key] = 1;
    for (const ArmSnapshot& a : st.arms) {
      require(std::isfinite(a.mean_us) && a.mean_us >= 0 && std::isfinite(a.m2) && a.m2 >= 0,
              at + "arm '" + a.name + "' " + k::kMeanUs + "=" + str(a.mean_us) + " " + k::kM2 +
                  "=" + str(a.m2),
              "finite, >= 0");
    }
  }
  for (const StateSnapshot& st : snap.states) {
    const int key = state_key(static_cast<int>(st.role), static_cast<int>(st.op), st.size_bin,
                              st.exposure, st.fused);
    if (m.index[key] >= 0) {
      m.states[m.index[key]].restore(st, m.catalog->arms(st.op));
    } else if (m.pending_index[key] >= 0) {
      m.pending[m.pending_index[key]] = st;
    } else {
      m.pending_index[key] = static_cast<int32_t>(m.pending.size());
      m.pending.push_back(st);
    }
  }
}

}  // namespace dynamiccl
