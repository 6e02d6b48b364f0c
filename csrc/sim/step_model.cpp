#include "sim/step_model.h"

#include <algorithm>
#include <limits>

#include "nccl_model/cost_model.h"

namespace dynamiccl {
namespace sim {

double interference(const ComputeSpec& c, int channels, int proto, uint64_t bytes, double cost_us) {
  double traffic = 1.0;  // Simple
  if (proto == kProtoLL128) traffic = 128.0 / 120.0;
  else if (proto == kProtoLL) traffic = 2.0;
  const double rate_GBps = cost_us > 0 ? static_cast<double>(bytes) / (1000.0 * cost_us) : 0.0;
  const double hbm_share = std::min(1.0, kHbmPasses * traffic * rate_GBps / c.hbm_GBps);
  return c.sm_weight * channels / c.sms + c.mem_weight * hbm_share;
}

StepModel::StepModel(const ComputeSpec& compute, int microbatches, int groups)
    : microbatches_(microbatches), groups_(groups) {
  for (int mb = 0; mb < microbatches; ++mb) {
    work_.push_back(compute.fwd_us);
    work_.push_back(compute.bwd_us);
  }
  work_.push_back(compute.post_us);
}

int StepModel::segment(int mb, int phase) const {
  return phase >= 2 ? 2 * microbatches_ : 2 * mb + phase;
}

StepModel::State StepModel::start() const {
  State s;
  s.comm_free.assign(groups_, 0.0);
  return s;
}

void StepModel::advance(State& s, double work) const {
  while (work > 0) {
    double slow = 0;
    double next = std::numeric_limits<double>::infinity();  // the next change of rate
    for (const State::Running& r : s.running) {
      if (r.end <= s.t) continue;
      if (r.start <= s.t) {
        slow += r.slow;
        next = std::min(next, r.end);
      } else {
        next = std::min(next, r.start);
      }
    }
    const double need = work * (1.0 + slow);  // wall time to finish at this rate
    if (s.t + need <= next) {
      s.t += need;
      break;
    }
    work -= (next - s.t) / (1.0 + slow);
    s.t = next;
  }
}

void StepModel::sync(State& s, std::vector<Wait>* waits) const {
  std::sort(s.running.begin(), s.running.end(),
            [](const State::Running& a, const State::Running& b) { return a.end < b.end; });
  double at = s.t;
  for (const State::Running& r : s.running) {
    const double wait = std::max(0.0, r.end - at);
    at = std::max(at, r.end);
    if (waits && wait > 0) waits->push_back({r.call, wait});
  }
  s.t = at;
  s.running.clear();
}

void StepModel::end_segment(State& s, std::vector<Wait>* waits) const {
  advance(s, (1.0 - s.done) * work_[s.seg]);
  s.done = 1.0;
  if (!s.synced) {
    // Calls issued at the very end of the segment (synced already) run into the next one.
    sync(s, waits);
  }
}

void StepModel::move_to(State& s, int seg, double pos, std::vector<Wait>* waits) const {
  while (s.seg < seg) {
    end_segment(s, waits);
    ++s.seg;
    s.done = 0;
    s.synced = false;
  }
  if (pos >= 1.0) {
    if (!s.synced) {
      end_segment(s, waits);
      s.synced = true;
    }
    return;
  }
  if (pos > s.done) {
    advance(s, (pos - s.done) * work_[s.seg]);
    s.done = pos;
  }
}

double StepModel::issue(State& s, const StepCall& c, int index, double cost_us, double slow,
                        std::vector<Wait>* waits) const {
  move_to(s, c.segment, c.pos, waits);
  const double issued = s.t;
  const double begin = std::max(issued, s.comm_free[c.group]);
  const double end = begin + cost_us;
  s.comm_free[c.group] = end;
  if (c.overlapped) {
    s.running.push_back({begin, end, slow, index});
    return 0.0;
  }
  s.t = end;
  return end - issued;
}

double StepModel::project(State s) const {
  advance(s, (1.0 - s.done) * work_[s.seg]);
  sync(s, nullptr);
  return s.t;
}

double StepModel::finish(State& s, std::vector<Wait>* waits) const {
  move_to(s, segments() - 1, 0.0, waits);
  end_segment(s, waits);
  sync(s, waits);
  for (double f : s.comm_free) s.t = std::max(s.t, f);
  return s.t;
}

}  // namespace sim
}  // namespace dynamiccl
