#include "sim/runner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "engines/nccl/arm_catalog.h"
#include "policy/learner.h"
#include "policy/round_scheduler.h"
#include "sim/step_model.h"
#include "sim/workload.h"
#include "truth/rng.h"
#include "truth/truth.h"

namespace dynamiccl {
namespace sim {

namespace {

constexpr double kRecoveryTolerance = 1.05;  // "back within 5% of the oracle"
constexpr int kRecoveryWindow = 8;           // ... averaged over this many calls of the state
constexpr double kAffected = 0.05;           // an episode changed a call's costs by more
constexpr int kMaxPollInterval = 64;         // rounds between convergence polls, at most

LearnerConfig learner_config(const ScenarioSpec& spec, RuleSet rules) {
  LearnerConfig cfg;
  cfg.mode = Mode::kLearn;
  cfg.rules = rules;
  const auto apply = [](HeadConfig& h, const std::map<std::string, double>& values) {
    for (const auto& [key, value] : values) set_head_setting(h, key, value);
  };
  for (const HeadOverrides& o : spec.heads) {
    if (o.role == kEveryRole) {
      for (HeadConfig& h : cfg.heads) apply(h, o.values);
      continue;
    }
    Role r;
    if (!parse_role(o.role, &r))
      throw std::invalid_argument("learner: unknown role '" + o.role + "' (accepted: " +
                                  kEveryRole + ", " + role_names().joined() + ")");
    apply(cfg.heads[static_cast<int>(r)], o.values);
  }
  return cfg;
}

void add(CostTotals& t, double def, double learned, double oracle, bool probe) {
  t.default_us += def;
  t.learned_us += learned;
  t.oracle_us += oracle;
  t.calls += 1;
  t.probes += probe ? 1 : 0;
}

// What the simulator follows per learner state.
struct StateTrack {
  bool seen = false;
  Role role = Role::kDefault;
  OpKind op = OpKind::kAllReduce;
  int size_bin = 0;
  int arms = 0;
  int last_site = -1;
  int64_t first_converged = -1;
  CostTotals totals, after;
  // Recovery after a congestion episode began: a sliding window of cost ratios.
  int recovery = -1;  // index into recoveries, -1 = not tracking
  int64_t recovery_calls = 0;
  double window[kRecoveryWindow] = {};
  int window_n = 0;
  double window_sum = 0;
};

// One position in the step's call sequence, with its truth table for the current links.
struct Site {
  int group = 0;
  CollectiveContext ctx;
  std::vector<double> truth;  // per arm, without noise
  // Per arm: the real communicator cannot run it (its catalog came from a described topology);
  // NCCL then runs its own choice in its place and the plugin reports the arm unavailable.
  std::vector<bool> unavailable;
  // Per arm: the channels the real communicator runs the call on, which NCCL >= 2.30 tells the
  // tuner (getChunkSize) and the backend passes on with the call's cost.
  std::vector<uint16_t> channels;
  double oracle = 0;
  uint16_t oracle_arm = 0;
  uint32_t state_id = 0;
  bool state_known = false;
  // With compute: the call in the step model and each arm's compute slowdown when overlapped.
  StepCall step;
  std::vector<double> slow;
  double paid = 1;  // this step's noise draw
};

struct Group {
  explicit Group(int round_calls) : rounds(round_calls) {}
  GroupInfo info;
  std::shared_ptr<GroupWorld> world;
  std::shared_ptr<NcclArmCatalog> catalog;  // the product's, for this group
  std::unique_ptr<Learner> learner;
  int ranks_sampled = 1;
  RoundScheduler rounds;  // the product's: measured costs apply one round later
  RoundResult current, pending;
  double round_us = 0;      // what a round's all-reduce takes over the group (round_exchanges)
  double window_us = 0;     // the group's calls since the round in flight started
  double round_price = 0;   // what the last applied round cost the job (the learner's price)
  double prev_cost_us = 0;  // the group's previous call (overlapping calls queue behind it)
  std::vector<StateTrack> states;  // by state id
  int unconverged = 0;             // states seen, with something to learn, not yet converged
  int poll_interval = 1;
  int poll_countdown = 1;
};

}  // namespace

struct SimRunner::Impl {
  ScenarioSpec spec;
  Topology topo;
  TruthFactors truth;
  Workload workload;
  std::vector<Group> groups;
  std::vector<Site> sites;
  Rng rng;
  NoiseSpec noise;  // each sampled rank's, per call
  int step = 0;
  LinkScale scale;
  SimResult res;
  bool compute = false;  // the step model runs (the scenario has compute)
  std::unique_ptr<StepModel> model;
  StepModel::State learned_step;

  Impl(const ScenarioSpec& s, const CatalogWrapper& wrap, RuleSet rules) : spec(s), rng(s.seed) {
    validate_spec(spec);
    topo = resolve_topology(spec.topology);
    const Topology prior_topo = spec.prior == "described"
                                    ? resolve_topology(described_topology(
                                          topo.nodes, topo.gpus_per_node, topo.compcap,
                                          topo.intra == LinkType::kPcie))
                                    : topo;
    truth = TruthFactors::from_entries(spec.truth);
    workload = build_workload(spec);
    noise = spec.cluster().noise;
    const LearnerConfig cfg = learner_config(spec, rules);
    groups.reserve(workload.groups.size());
    for (size_t i = 0; i < workload.groups.size(); ++i) {
      groups.emplace_back(spec.round_calls);
      Group& g = groups.back();
      g.info = workload.groups[i];
      g.world = std::make_shared<GroupWorld>(topo, g.info.shape, truth, spec.channel_model);
      g.catalog = std::make_shared<NcclArmCatalog>(
          nccl_catalog_for(prior_topo, g.info.shape, spec.channel_caps, spec.derive_channel_caps));
      g.learner = std::make_unique<Learner>(cfg, wrap ? wrap(g.catalog, g.info.shape) : g.catalog);
      g.ranks_sampled = std::min(spec.ranks_sampled, g.info.shape.ranks());
      g.round_us = round_exchanges(g.info.shape.ranks()) * spec.hop_us;
      g.current.calls.reserve(spec.round_calls);
      g.pending.calls.reserve(spec.round_calls);
      res.groups.push_back(g.info.name + ": " + std::to_string(g.info.shape.nodes) + " x " +
                           std::to_string(g.info.shape.gpus_per_node) + ", " +
                           std::to_string(g.world->nominal().graph_channels(kAlgoRing)) +
                           " channels");
    }
    sites.resize(workload.calls.size());
    for (size_t i = 0; i < sites.size(); ++i) {
      sites[i].group = workload.calls[i].group;
      sites[i].ctx = workload.calls[i].ctx;
      const size_t arms = groups[sites[i].group].catalog->arms(sites[i].ctx.op).size();
      sites[i].truth.resize(arms);
      sites[i].unavailable.resize(arms);
      sites[i].channels.resize(arms);
    }
    compute = spec.compute.active();
    if (compute) {
      model = std::make_unique<StepModel>(spec.compute, spec.microbatches,
                                          static_cast<int>(groups.size()));
      for (size_t i = 0; i < sites.size(); ++i) {
        const CallSite& c = workload.calls[i];
        sites[i].step = StepCall{c.group, model->segment(c.mb, c.phase), c.pos,
                                 c.ctx.exposure == Exposure::kOverlapped};
        sites[i].slow.resize(sites[i].truth.size());
      }
    }
    res.name = spec.name;
    refresh_tables();
  }

  LinkScale scale_at(int s) const {
    LinkScale out;
    for (const CongestionSpec& c : spec.congestion) {
      if (s < c.from_step || s >= c.to_step) continue;
      if (c.link == kIntraLinks) {
        out.intra_bw *= c.bw_factor;
        out.intra_lat *= c.lat_factor;
      } else {
        out.inter_bw *= c.bw_factor;
        out.inter_lat *= c.lat_factor;
      }
    }
    return out;
  }

  void refresh_tables() {
    for (Site& s : sites) {
      const Group& g = groups[s.group];
      const std::vector<Arm>& arms = g.catalog->arms(s.ctx.op);
      s.oracle = std::numeric_limits<double>::infinity();
      for (size_t a = 0; a < arms.size(); ++a) {
        s.truth[a] = g.world->truth_us(s.ctx.op, arms[a].action, s.ctx.effective_bytes);
        s.unavailable[a] = a > 0 && !std::isfinite(s.truth[a]);
        if (s.unavailable[a]) s.truth[a] = s.truth[0];
        if (s.truth[a] < s.oracle) {
          s.oracle = s.truth[a];
          s.oracle_arm = static_cast<uint16_t>(a);
        }
      }
      for (size_t a = 0; a < arms.size(); ++a) {
        const Action& runs = s.unavailable[a] ? arms[0].action : arms[a].action;
        int proto = kProtoSimple, channels = kP2pChannels;
        real_channels(g, s, runs, &proto, &channels);
        // NCCL's tuner never sees a send: no report.
        s.channels[a] = func_of(s.ctx.op) < 0 ? 0 : static_cast<uint16_t>(channels);
        if (compute)
          s.slow[a] = interference(spec.compute, channels, proto, s.ctx.effective_bytes,
                                   s.truth[a]);
      }
    }
  }

  // The protocol and channels the real communicator runs the site's call on with `action` (a
  // send: Simple on kP2pChannels).
  void real_channels(const Group& g, const Site& s, const Action& action, int* proto,
                     int* channels) const {
    if (func_of(s.ctx.op) < 0) return;
    int algo = action.algo;
    *proto = action.proto;
    if (action.is_default() || algo < 0 || *proto < 0)
      g.world->default_pick(s.ctx.op, s.ctx.effective_bytes, &algo, proto);
    const NcclCostModel& m = g.world->nominal();
    const int cap = action.channels > 0 ? action.channels : m.graph_channels(algo);
    *channels = m.channels_used(algo, *proto, s.ctx.effective_bytes, cap);
  }

  // Links changed: new truth tables; if an episode begins now, follow the states it hits.
  void begin_step() {
    const LinkScale next = scale_at(step);
    if (next != scale) {
      std::vector<double> old_oracle(sites.size());
      std::vector<uint16_t> old_arm(sites.size());
      for (size_t i = 0; i < sites.size(); ++i) {
        old_oracle[i] = sites[i].oracle;
        old_arm[i] = sites[i].oracle_arm;
      }
      scale = next;
      for (Group& g : groups) g.world->set_link_scale(scale);
      refresh_tables();
      for (size_t e = 0; e < spec.congestion.size(); ++e)
        if (spec.congestion[e].from_step == step)
          start_recovery(static_cast<int>(e), old_oracle, old_arm);
    }
    for (size_t e = 0; e < spec.congestion.size(); ++e)
      if (spec.congestion[e].to_step == step) stop_recovery(static_cast<int>(e));
    res.step_default_us.push_back(0);
    res.step_learned_us.push_back(0);
    res.step_oracle_us.push_back(0);
    if (compute) learned_step = model->start();
  }

  // A whole step on the same noise draws with one arm per call given by `pick` (or, with
  // `greedy`, the arm whose call ends the current phase earliest).
  template <typename Pick>
  double plan_step(Pick pick, bool greedy) const {
    StepModel::State st = model->start();
    for (size_t i = 0; i < sites.size(); ++i) {
      const Site& s = sites[i];
      size_t arm = pick(s);
      if (greedy) {
        double best = std::numeric_limits<double>::infinity();
        for (size_t a = 0; a < s.truth.size(); ++a) {
          StepModel::State trial = st;
          model->issue(trial, s.step, static_cast<int>(i), s.truth[a] * s.paid, s.slow[a], nullptr);
          const double end = model->project(trial);
          if (end < best) {
            best = end;
            arm = a;
          }
        }
      }
      model->issue(st, s.step, static_cast<int>(i), s.truth[arm] * s.paid, s.slow[arm], nullptr);
    }
    return model->finish(st, nullptr);
  }

  void end_step() {
    if (!compute) return;
    const double learned = model->finish(learned_step, nullptr);
    const double def = plan_step([](const Site&) { return size_t{0}; }, false);
    const double fastest = plan_step([](const Site& s) { return size_t{s.oracle_arm}; }, false);
    const double greedy = plan_step([](const Site&) { return size_t{0}; }, true);
    res.step_time_default_us.push_back(def);
    res.step_time_learned_us.push_back(learned);
    res.step_time_oracle_us.push_back(std::min({def, fastest, greedy}));
    // The step's wall time reaches each group's learner with its next round's costs.
    if (!spec.compute.mark_steps) return;
    for (Group& g : groups) {
      if (g.current.step_times_us.empty()) g.current.first_step = static_cast<uint64_t>(step);
      g.current.step_times_us.push_back(learned);
      g.learner->mark_step();
    }
  }

  void start_recovery(int episode, const std::vector<double>& old_oracle,
                      const std::vector<uint16_t>& old_arm) {
    for (size_t i = 0; i < sites.size(); ++i) {
      const Site& s = sites[i];
      if (!s.state_known) continue;
      const bool changed = std::fabs(s.oracle / old_oracle[i] - 1.0) > kAffected;
      const bool needs_switch = s.truth[old_arm[i]] > kRecoveryTolerance * s.oracle;
      if (!changed && !needs_switch) continue;
      Group& g = groups[s.group];
      StateTrack& t = g.states[s.state_id];
      if (t.recovery >= 0 && res.recoveries[t.recovery].episode == episode) {
        res.recoveries[t.recovery].needs_switch |= needs_switch;
        continue;
      }
      RecoveryResult r;
      r.episode = episode;
      r.step = step;
      r.group = g.info.name;
      r.role = t.role;
      r.op = t.op;
      r.size_bin = t.size_bin;
      r.needs_switch = needs_switch;
      res.recoveries.push_back(r);
      t.recovery = static_cast<int>(res.recoveries.size() - 1);
      t.recovery_calls = 0;
      t.window_n = 0;
      t.window_sum = 0;
    }
  }

  void stop_recovery(int episode) {
    for (Group& g : groups)
      for (StateTrack& t : g.states)
        if (t.recovery >= 0 && res.recoveries[t.recovery].episode == episode) t.recovery = -1;
  }

  void track_recovery(StateTrack& t, double ratio) {
    RecoveryResult& r = res.recoveries[t.recovery];
    if (t.recovery_calls == 0) r.ratio_at_start = ratio;
    const int slot = static_cast<int>(t.recovery_calls % kRecoveryWindow);
    if (t.window_n == kRecoveryWindow) t.window_sum -= t.window[slot];
    else ++t.window_n;
    t.window[slot] = ratio;
    t.window_sum += ratio;
    ++t.recovery_calls;
    if (t.window_n == kRecoveryWindow && t.window_sum <= kRecoveryTolerance * kRecoveryWindow) {
      r.calls = t.recovery_calls - kRecoveryWindow;
      t.recovery = -1;
    }
  }

  void poll_convergence(Group& g) {
    if (g.unconverged <= 0 || --g.poll_countdown > 0) return;
    bool found = false;
    for (const StateStats& st : g.learner->stats()) {
      if (st.state_id >= g.states.size()) continue;
      StateTrack& t = g.states[st.state_id];
      if (!t.seen || t.first_converged >= 0 || st.converged_at_call == 0) continue;
      t.first_converged = static_cast<int64_t>(st.converged_at_call);
      if (t.arms > 1) --g.unconverged;
      found = true;
    }
    g.poll_interval = found ? 1 : std::min(kMaxPollInterval, g.poll_interval * 2);
    g.poll_countdown = g.poll_interval;
  }

  // The round in flight is applied: it cost the job what of its all-reduce the group's calls
  // since it started did not cover (the boundary waits for it), or the scenario's fixed price.
  void apply(Group& g, RoundResult& round) {
    g.round_price = spec.round_cost_us >= 0 ? spec.round_cost_us
                                            : std::max(0.0, g.round_us - g.window_us);
    res.total.learned_us += g.round_price;
    res.total.rounds_us += g.round_price;
    res.step_learned_us.back() += g.round_price;
    if (compute && g.round_price > 0) model->block(learned_step, g.round_price);
    round.round_cost_us = g.round_price;
    round.round_calls = spec.round_calls;
    g.learner->apply_round(round);
    round.calls.clear();
    round.unavailable.clear();
    round.step_times_us.clear();
    poll_convergence(g);
  }

  void call(int site_index) {
    Site& s = sites[site_index];
    Group& g = groups[s.group];
    const Decision d = g.learner->decide(s.ctx);
    if (d.arm >= s.truth.size())
      throw std::logic_error("learner chose arm " + std::to_string(d.arm) + " of " +
                             std::to_string(s.truth.size()));
    if (d.state_id >= g.states.size()) g.states.resize(d.state_id + 1);
    StateTrack& t = g.states[d.state_id];
    if (!t.seen) {
      t.seen = true;
      t.role = s.ctx.role;
      t.op = s.ctx.op;
      t.size_bin = size_bin(s.ctx.effective_bytes);
      t.arms = static_cast<int>(s.truth.size());
      if (t.arms > 1) ++g.unconverged;
    }
    t.last_site = site_index;
    s.state_id = d.state_id;
    s.state_known = true;

    const double chosen = s.truth[d.arm];
    // The job pays one draw (common to every policy); the learner hears the product's measure.
    const double paid = rank_noise();
    const double learned = chosen * paid, def = s.truth[0] * paid, oracle = s.oracle * paid;
    s.paid = paid;
    if (compute) model->issue(learned_step, s.step, site_index, learned, s.slow[d.arm], nullptr);
    add(res.total, def, learned, oracle, d.probe);
    add(res.roles[static_cast<int>(s.ctx.role)], def, learned, oracle, d.probe);
    add(t.totals, def, learned, oracle, d.probe);
    if (t.first_converged >= 0) {
      add(t.after, def, learned, oracle, d.probe);
      add(res.after_convergence, def, learned, oracle, d.probe);
    }
    res.step_default_us.back() += def;
    res.step_learned_us.back() += learned;
    res.step_oracle_us.back() += oracle;
    if (t.recovery >= 0) track_recovery(t, chosen / s.oracle);

    if (d.measure) {
      g.current.calls.push_back(CallOutcome{d.state_id, d.arm,
                                            static_cast<float>(measured_cost(g, chosen)), d.probe,
                                            d.after_probe, s.channels[d.arm]});
      if (s.unavailable[d.arm]) g.current.unavailable.emplace_back(d.state_id, d.arm);
    }
    g.prev_cost_us = chosen * paid;
    g.window_us += learned;
    g.rounds.add_call(d.measure);
    const RoundScheduler::Boundary b = g.rounds.end_call();
    if (b.at) g.learner->close_window();
    if (b.apply) apply(g, g.pending);
    if (b.start) {
      // Only learning runs rounds; the job pays for each when it is applied.
      ++res.total.rounds;
      g.window_us = 0;
      std::swap(g.current, g.pending);  // in flight until the next boundary
      g.current.calls.clear();
      g.current.unavailable.clear();
      g.current.step_times_us.clear();
    }
  }

  // One rank's multiplicative noise: log-normal, times the outlier factor now and then.
  double rank_noise() { return noise.sample(rng); }

  // What the backend would report for a call of true cost `cost_us`: each sampled rank's kernel
  // time (waiting for the last rank to arrive, queued behind the group's previous call, with its
  // own noise), reduced across ranks as the product reduces NCCL kernel times (the minimum).
  double measured_cost(const Group& g, double cost_us) {
    double arrival[64];
    double last = 0;
    for (int r = 0; r < g.ranks_sampled; ++r) {
      arrival[r] = spec.arrival_skew_us > 0 ? spec.arrival_skew_us * rng.uniform() : 0.0;
      last = std::max(last, arrival[r]);
    }
    const double queued = spec.overlap * g.prev_cost_us;
    const bool by_max = reduces_by_max(CostReduce::kAuto, EngineKind::kNccl);
    double reduced = by_max ? 0.0 : std::numeric_limits<double>::infinity();
    for (int r = 0; r < g.ranks_sampled; ++r) {
      const double d = (last - arrival[r]) + queued + cost_us * rank_noise();
      reduced = by_max ? std::max(reduced, d) : std::min(reduced, d);
    }
    return reduced;
  }

  void run_steps(int n) {
    const int n_calls = static_cast<int>(sites.size());
    for (int k = 0; k < n; ++k) {
      begin_step();
      for (int i = 0; i < n_calls; ++i) call(i);
      end_step();
      ++step;
    }
  }

  SimResult result() const {
    SimResult out = res;
    out.steps = step;
    for (const Group& g : groups) {
      out.policies.push_back(GroupPolicy{g.info.name, g.info.shape.ranks(), g.info.shape.nodes,
                                         g.learner->snapshot()});
      const std::vector<StateStats> stats = g.learner->stats();
      for (size_t id = 0; id < g.states.size(); ++id) {
        const StateTrack& t = g.states[id];
        if (!t.seen) continue;
        StateResult r;
        r.group = g.info.name;
        r.role = t.role;
        r.op = t.op;
        r.size_bin = t.size_bin;
        r.arms = t.arms;
        r.calls_to_converge = t.first_converged;
        r.totals = t.totals;
        r.after_convergence = t.after;
        const std::vector<Arm>& arms = g.catalog->arms(t.op);
        for (const StateStats& st : stats) {
          if (st.state_id != id) continue;
          if (r.calls_to_converge < 0 && st.converged_at_call > 0)
            r.calls_to_converge = static_cast<int64_t>(st.converged_at_call);
          auto name = [&arms](uint16_t a) { return a < arms.size() ? arms[a].name : "?"; };
          r.incumbent = name(st.incumbent);
          r.alarms = st.alarms;
          for (const StateEvent& e : st.events) {
            r.events.push_back({e.call, e.step, e.what, name(e.from_arm), name(e.to_arm)});
          }
        }
        if (t.last_site >= 0) {
          const Site& s = sites[t.last_site];
          r.oracle_arm = arms[s.oracle_arm].name;
          int a, p;
          r.default_arm = g.world->default_pick(t.op, s.ctx.effective_bytes, &a, &p)
                              ? nccl_arm_name(a, p, 0)
                              : "default";
        }
        out.states.push_back(std::move(r));
      }
    }
    return out;
  }
};

SimRunner::SimRunner(const ScenarioSpec& spec, CatalogWrapper wrap, RuleSet rules)
    : impl_(std::make_unique<Impl>(spec, wrap, rules)) {}
SimRunner::~SimRunner() = default;

void SimRunner::run() {
  if (impl_->step < impl_->spec.steps) impl_->run_steps(impl_->spec.steps - impl_->step);
}
void SimRunner::run_steps(int n) { impl_->run_steps(n); }
uint64_t SimRunner::calls() const { return impl_->res.total.calls; }
int SimRunner::calls_per_step() const { return static_cast<int>(impl_->sites.size()); }
SimResult SimRunner::result() const { return impl_->result(); }

const ArmCatalog& SimRunner::catalog(const std::string& group) const {
  for (const Group& g : impl_->groups) {
    if (g.info.name == group) return *g.catalog;
  }
  throw std::invalid_argument("no group named '" + group + "' in this scenario");
}

std::vector<ArmCost> SimRunner::arm_costs(const std::string& group, OpKind op,
                                          uint64_t effective_bytes, int step) const {
  for (const Group& g : impl_->groups) {
    if (g.info.name != group) continue;
    GroupWorld world = *g.world;
    world.set_link_scale(impl_->scale_at(step));
    std::vector<ArmCost> out;
    const std::vector<Arm>& arms = g.catalog->arms(op);
    for (size_t a = 0; a < arms.size(); ++a) {
      ArmCost c;
      c.name = arms[a].name;
      c.prior_us = g.catalog->prior_cost_us(op, static_cast<uint16_t>(a), effective_bytes,
                                            g.info.shape.ranks());
      c.truth_us = world.truth_us(op, arms[a].action, effective_bytes);
      out.push_back(c);
    }
    return out;
  }
  throw std::invalid_argument("no group named '" + group + "' in this scenario");
}

SimResult run_scenario(const ScenarioSpec& spec, CatalogWrapper wrap, RuleSet rules) {
  SimRunner r(spec, std::move(wrap), rules);
  r.run();
  return r.result();
}

}  // namespace sim
}  // namespace dynamiccl
