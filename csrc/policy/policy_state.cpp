#include "policy/policy_state.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace dynamiccl {

namespace {

uint32_t to_ppm(double fraction) {
  // Floor, so the integer budget never exceeds the configured fraction.
  return static_cast<uint32_t>(std::clamp(fraction, 0.0, 1.0) * kPpmOne);
}

// CUSUM spread: the incumbent's own standard deviation, but never below the switch margin
// (at least 1%) of its mean. Without the floor a near-noiseless cost would alarm on shifts far
// too small to change which arm is best.
double cusum_sigma(const RunningStats& s, double switch_margin) {
  const double floor = std::max(switch_margin, 0.01) * std::fabs(s.mean());
  return std::max({s.stddev(), floor, 1e-9});
}

}  // namespace

PolicyState::PolicyState(uint32_t id, Role role, OpKind op, int size_bin, const HeadConfig& head,
                         const ArmCatalog& catalog, uint64_t effective_bytes, int group_size)
    : id_(id),
      role_(role),
      op_(op),
      size_bin_(size_bin),
      head_(head),
      warmup_calls_(static_cast<uint64_t>(std::max(head.warmup_calls, 0))),
      probe_ppm_(to_ppm(head.probe_budget)),
      converged_ppm_(std::min(to_ppm(head.converged_budget), to_ppm(head.probe_budget))),
      budget_ppm_(probe_ppm_) {
  const std::vector<Arm>& arms = catalog.arms(op);
  if (arms.empty() || arms.size() > static_cast<size_t>(std::numeric_limits<int16_t>::max())) {
    throw std::logic_error(std::string("arm catalog returned ") + std::to_string(arms.size()) +
                           " arms for op " + op_name(op) + " (accepted: 1..32767)");
  }
  struct Ranked {
    double prior;
    uint16_t arm;
  };
  const auto prior_of = [&](uint16_t arm) {
    const double p = catalog.prior_cost_us(op, arm, effective_bytes, group_size);
    return std::isnan(p) ? INFINITY : p;  // an arm without an estimate is tried last
  };
  const auto by_prior = [](const Ranked& a, const Ranked& b) {
    return a.prior < b.prior || (a.prior == b.prior && a.arm < b.arm);
  };
  std::vector<Ranked> ranked;
  ranked.reserve(arms.size());
  for (size_t a = 1; a < arms.size(); ++a) {
    ranked.push_back({prior_of(static_cast<uint16_t>(a)), static_cast<uint16_t>(a)});
  }
  std::sort(ranked.begin(), ranked.end(), by_prior);
  const size_t others = static_cast<size_t>(std::max(head.max_candidates - 1, 0));
  if (ranked.size() > others) ranked.resize(others);
  ranked.push_back({prior_of(kDefaultArm), kDefaultArm});
  std::sort(ranked.begin(), ranked.end(), by_prior);

  slot_of_arm_.assign(arms.size(), -1);
  slots_.reserve(ranked.size());
  for (const Ranked& r : ranked) {
    ArmSlot s;
    s.arm = r.arm;
    s.action = arms[r.arm].action;
    s.prior_us = r.prior;
    slot_of_arm_[r.arm] = static_cast<int16_t>(slots_.size());
    if (r.arm == kDefaultArm) default_slot_ = static_cast<int>(slots_.size());
    slots_.push_back(s);
  }
  incumbent_ = default_slot_;
  cusum_.configure(head.cusum_threshold, head.cusum_drift);
  if (warmup_calls_ == 0) phase_ = LearnPhase::kProbing;
}

int PolicyState::probe_target() {
  const int n = num_slots();
  const uint32_t min_samples = static_cast<uint32_t>(head_.min_samples);
  for (int k = 0; k < n; ++k) {
    int i = rr_cursor_ + k;
    if (i >= n) i -= n;
    const ArmSlot& a = slots_[i];
    if (i == incumbent_ || !a.probeable() || a.issued >= min_samples) continue;
    rr_cursor_ = i + 1 == n ? 0 : i + 1;
    return i;
  }
  // Every live candidate has its min_samples calls. Probe the one whose confidence interval
  // will still be widest once its costs in flight arrive: variance / issued, compared by
  // cross-multiplication (no division on the hot path). Candidates whose costs have not arrived
  // yet (fewer than two samples) are waited for, not probed again.
  const uint32_t cap = min_samples * kProbeCapFactor;
  int best = -1;
  for (int i = 0; i < n; ++i) {
    const ArmSlot& a = slots_[i];
    if (i == incumbent_ || !a.probeable() || a.stats.count() < 2 || a.issued >= cap) continue;
    if (best < 0 || a.variance * slots_[best].issued > slots_[best].variance * a.issued) best = i;
  }
  return best;
}

bool PolicyState::fold(uint16_t arm, float cost_us, bool learning) {
  const int i = slot_of(arm);
  if (i < 0) return false;
  ArmSlot& a = slots_[i];
  if (a.unavailable) return false;  // whatever ran in its place says nothing about the arm
  // The CUSUM residual is predictive: the cost against the incumbent's statistics before it.
  // The reference thus sharpens as samples accumulate (a poorly estimated reference is what
  // makes CUSUM raise false alarms), while a sudden shift still stands out against a long
  // history.
  bool alarm = false;
  if (learning && !frozen_ && phase_ == LearnPhase::kExploit && i == incumbent_ &&
      a.stats.count() >= kCusumMinReference) {
    alarm = cusum_.add(cost_us, a.stats.mean(), cusum_sigma(a.stats, head_.switch_margin));
  }
  if (alarm) {
    ++alarms_;
    reopen();  // the alarming cost belongs to the new regime
  }
  a.stats.add(cost_us);
  a.variance = a.stats.variance();
  a.window.push(cost_us);
  ++a.samples;
  ++a.fresh;
  return alarm;
}

// Comparisons use the mean cost of the current regime with a normal confidence interval. The
// mean (not the median) is what a step pays on average, and the rank-reduced cost (minimum over
// ranks) already removes the worst outliers (waiting for late peers); the median window serves
// the runner-up re-check and reporting.
//
// Reward view: reward = -cost. The two penalties of DESIGN.md §4 enter as constraints rather
// than as terms added to the cost:
//   - switching: a challenger takes over only if its expected reward beats the incumbent's by
//     switch_margin * incumbent cost, confidently (its upper bound below the incumbent's lower
//     bound). The margin is the price a switch has to pay back (hysteresis);
//   - probing: probe calls are capped by the head's budget (a credit counter), and an undecided
//     near-tie stops being probed after kProbeCapFactor * min_samples calls, because the reward it
//     could still win is below the margin while each probe may cost.
void PolicyState::evaluate() {
  if (frozen_ || phase_ == LearnPhase::kWarmup) return;
  const uint64_t min_samples = static_cast<uint64_t>(head_.min_samples);
  const double keep = 1.0 - head_.switch_margin;

  if (phase_ == LearnPhase::kProbing) {
    const ArmSlot* inc = &slots_[incumbent_];
    const bool inc_ready = inc->stats.count() >= min_samples;
    if (inc_ready) {  // switch to the confidently cheapest challenger, if any
      const double inc_lcb = inc->stats.mean() - inc->stats.half_width(kConfidenceZ);
      int best = -1;
      for (int i = 0; i < num_slots(); ++i) {
        const ArmSlot& c = slots_[i];
        if (i == incumbent_ || c.unavailable || c.stats.count() < min_samples) continue;
        const double m = c.stats.mean();
        if (m < inc->stats.mean() * keep && m + c.stats.half_width(kConfidenceZ) < inc_lcb &&
            (best < 0 || m < slots_[best].stats.mean())) {
          best = i;
        }
      }
      if (best >= 0) {
        incumbent_ = best;
        slots_[best].eliminated = false;
        inc = &slots_[best];
      }
    }
    const double inc_mean = inc->stats.mean();
    const double inc_ucb = inc_mean + inc->stats.half_width(kConfidenceZ);
    const uint32_t cap = static_cast<uint32_t>(min_samples) * kProbeCapFactor;
    bool all_resolved = true;
    for (int i = 0; i < num_slots(); ++i) {
      ArmSlot& c = slots_[i];
      c.resolved = false;
      if (i == incumbent_ || c.unavailable) continue;
      const bool ready = inc_ready && c.stats.count() >= min_samples;
      const double c_lcb = c.stats.mean() - c.stats.half_width(kConfidenceZ);
      if (ready && c_lcb > inc_ucb) c.eliminated = true;
      // Resolved: confidently worse, or confidently unable to beat the incumbent by the margin,
      // or probed up to the cap without a verdict.
      c.resolved = c.eliminated || c.issued >= cap || (ready && c_lcb >= inc_mean * keep);
      all_resolved = all_resolved && c.resolved;
    }
    if (all_resolved && inc_ready) converge();
  } else {
    // Runner-up re-check: its recent costs (received since convergence) against the incumbent.
    // The median's standard error is ~1.25 s/sqrt(k); only a confident gain beyond the margin
    // re-opens probing, so a near-equal runner-up does not make the state flap.
    if (runner_up_ >= 0) {
      const ArmSlot& r = slots_[runner_up_];
      const ArmSlot& inc = slots_[incumbent_];
      const uint32_t need =
          std::min<uint32_t>(static_cast<uint32_t>(min_samples), SampleWindow::kCapacity);
      if (r.fresh >= need && inc.stats.count() >= min_samples) {
        const int k = static_cast<int>(std::min<uint32_t>(r.fresh, SampleWindow::kCapacity));
        const double sd = std::max(r.stats.stddev(), inc.stats.stddev());
        const double ucb = r.window.median_recent(k) + kConfidenceZ * 1.2533 * sd / std::sqrt(k);
        if (ucb < inc.stats.mean() * keep) reopen();
      }
    }
  }
  runner_up_ = phase_ == LearnPhase::kExploit ? pick_runner_up() : -1;
}

void PolicyState::converge() {
  phase_ = LearnPhase::kExploit;
  converged_at_call_ = calls_;
  for (ArmSlot& a : slots_) a.fresh = 0;
  cusum_.reset();
}

// Re-open exploration after a change: the costs measured before it describe another regime, so
// every arm starts over (eliminations forgotten, statistics cleared); the incumbent keeps running
// between probes until a challenger confidently beats it.
void PolicyState::reopen() {
  for (ArmSlot& a : slots_) {
    a.stats.reset();
    a.variance = 0;
    a.window.clear();
    a.issued = 0;
    a.fresh = 0;
    a.eliminated = false;
    a.resolved = false;
  }
  phase_ = LearnPhase::kProbing;
  budget_ppm_ = probe_ppm_;
  rr_cursor_ = 0;
  runner_up_ = -1;
  cusum_.reset();
}

// The best available non-incumbent arm by mean (eliminated ones included: the re-check is how
// an arm that became cheaper gets a second chance); before any costs, the next one by prior.
int PolicyState::pick_runner_up() const {
  int best = -1;
  int first = -1;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (i == incumbent_ || a.unavailable) continue;
    if (first < 0) first = i;
    if (a.stats.count() == 0) continue;
    if (best < 0 || a.stats.mean() < slots_[best].stats.mean()) best = i;
  }
  return best >= 0 ? best : first;
}

// Lowest mean among available arms with min_samples costs; the default when none has them.
int PolicyState::best_known() const {
  const uint64_t min_samples = static_cast<uint64_t>(head_.min_samples);
  int best = -1;
  for (int i = 0; i < num_slots(); ++i) {
    const ArmSlot& a = slots_[i];
    if (a.unavailable || a.stats.count() < min_samples) continue;
    if (best < 0 || a.stats.mean() < slots_[best].stats.mean()) best = i;
  }
  return best >= 0 ? best : default_slot_;
}

void PolicyState::drop_arm(uint16_t arm) {
  const int i = slot_of(arm);
  // The engine default is "let the engine choose": it cannot be unavailable.
  if (i < 0 || i == default_slot_) return;
  ArmSlot& a = slots_[i];
  a.unavailable = true;
  a.resolved = false;
  if (runner_up_ == i) runner_up_ = -1;
  if (incumbent_ != i) return;
  incumbent_ = default_slot_;
  cusum_.reset();
  // A converged state lost its choice: probe again from the default, keeping the statistics,
  // so an arm already known to be confidently cheaper takes over at the next round.
  if (!frozen_ && phase_ == LearnPhase::kExploit) {
    phase_ = LearnPhase::kProbing;
    budget_ppm_ = probe_ppm_;
    rr_cursor_ = 0;
  }
}

void PolicyState::freeze() {
  frozen_ = true;
  incumbent_ = best_known();
  runner_up_ = -1;
  cusum_.reset();
}

void PolicyState::restore(const StateSnapshot& snap, const std::vector<Arm>& arms) {
  for (ArmSlot& a : slots_) {
    const ArmSnapshot* found = nullptr;
    for (const ArmSnapshot& s : snap.arms) {
      if (s.name == arms[a.arm].name) {
        found = &s;
        break;
      }
    }
    if (found != nullptr) {
      a.stats.assign(found->samples, found->mean_us, found->m2);
      a.eliminated = found->eliminated;
    } else {
      a.stats.reset();
      a.eliminated = false;
    }
    a.variance = a.stats.variance();
    a.issued = static_cast<uint32_t>(std::min<uint64_t>(a.stats.count(), UINT32_MAX));
    a.window.clear();
    a.fresh = 0;
    a.resolved = false;
  }
  incumbent_ = default_slot_;
  for (int i = 0; i < num_slots(); ++i) {
    if (!slots_[i].unavailable && arms[slots_[i].arm].name == snap.incumbent) incumbent_ = i;
  }
  slots_[incumbent_].eliminated = false;
  // A warm start exploits at once: no warm-up, the converged budget, CUSUM against the restored
  // incumbent cost (a changed cluster then shows up as an alarm and re-opens probing).
  phase_ = LearnPhase::kExploit;
  converged_at_call_ = calls_;
  budget_ppm_ = converged_ppm_;
  rr_cursor_ = 0;
  cusum_.reset();
  runner_up_ = frozen_ ? -1 : pick_runner_up();  // frozen: the restored incumbent, nothing else
}

// Unavailable arms are reported as eliminated: they are out of the competition for good.
StateStats PolicyState::stats(const std::vector<Arm>& arms) const {
  StateStats st;
  st.state_id = id_;
  st.role = role_;
  st.op = op_;
  st.size_bin = size_bin_;
  st.incumbent = slots_[incumbent_].arm;
  st.phase = frozen_                       ? "frozen"
             : phase_ == LearnPhase::kWarmup  ? "warmup"
             : phase_ == LearnPhase::kProbing ? "probing"
                                         : "exploit";
  st.calls = calls_;
  st.probes = probes_;
  st.alarms = alarms_;
  st.frozen = frozen_;
  st.converged_at_call = converged_at_call_;
  for (size_t arm = 0; arm < slot_of_arm_.size(); ++arm) {  // arm index order
    if (slot_of_arm_[arm] < 0) continue;
    const ArmSlot& a = slots_[slot_of_arm_[arm]];
    ArmStats as;
    as.name = arms[arm].name;
    as.calls = a.calls;
    as.samples = a.samples;
    as.mean_us = a.stats.mean();
    as.median_us = a.window.median_recent(a.window.size());
    as.eliminated = a.eliminated || a.unavailable;
    st.arms.push_back(std::move(as));
  }
  return st;
}

StateSnapshot PolicyState::snapshot(const std::vector<Arm>& arms) const {
  StateSnapshot snap;
  snap.role = role_;
  snap.op = op_;
  snap.size_bin = size_bin_;
  snap.incumbent = arms[slots_[incumbent_].arm].name;
  snap.converged = frozen_ || phase_ == LearnPhase::kExploit;
  for (size_t arm = 0; arm < slot_of_arm_.size(); ++arm) {
    if (slot_of_arm_[arm] < 0) continue;
    const ArmSlot& a = slots_[slot_of_arm_[arm]];
    ArmSnapshot as;
    as.name = arms[arm].name;
    as.samples = a.stats.count();
    as.mean_us = a.stats.mean();
    as.m2 = a.stats.m2();
    as.eliminated = a.eliminated || a.unavailable;
    snap.arms.push_back(std::move(as));
  }
  return snap;
}

}  // namespace dynamiccl
