// Per-group configuration of the backend. Built and validated in Python (dynamiccl_pg/config.py)
// from DYNAMICCL_* environment variables and pg_options, identical on every rank. The defaults
// here (and the learner's) are the only ones: _C.backend_defaults() gives them to config.py.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/types.h"
#include "nccl_model/topology.h"
#include "policy/learner.h"

namespace dynamiccl {

struct BackendConfig {
  Mode mode = Mode::kLearn;
  int round_calls = 16;  // K: learned calls between consensus rounds (same on all ranks)
  CostReduce cost_reduce = CostReduce::kAuto;
  std::map<std::string, std::string> force;  // op name -> arm name (DYNAMICCL_FORCE)
  std::map<std::string, Role> role_map;      // group description -> role
  LearnerConfig learner;
  size_t decision_log_capacity = 1 << 16;  // entries kept for decision_log(); 0 = off
  bool trace = false;                      // keep per-call records for DYNAMICCL_TRACE
  bool check_calls = false;                // compare every call's shape across ranks first
  bool nccl_tuning = true;  // false: NCCL decides alone (plugin not ours, NCCL_ALGO set)
  // The cluster as the ranks agreed to describe it, and this group's shape on it: NCCL's cost
  // model of this communicator, which gives the NCCL arms and their prior.
  nccl::TopologySpec nccl_topology;
  nccl::GroupShape nccl_group{1, 1};
  // The NCCL engine's release (NCCL_VERSION_CODE, 23000 = 2.30.0; 0 = unknown or none): the
  // emulated release for the emulated NCCL, else torch's NCCL. Chunk-size arms need 2.30.
  int nccl_version = 0;
  // The NCCL engine is the emulated NCCL (DYNAMICCL_EMULATE_NCCL): CPU tensors take the NCCL
  // branch, so that it runs end to end without a GPU.
  bool nccl_emulated = false;
  // Tests only: a CPU schedule ("*": every one of ours; "" = none) and microseconds.
  struct TestArmEffect {
    std::string arm;
    int us = 0;
  };
  // DYNAMICCL_TEST_SLOW_ARM: every call on the schedule takes this much longer, so that tests can
  // show the learner never adopts a bad arm.
  TestArmEffect test_slow_arm;
  // DYNAMICCL_TEST_BUSY_ARM: every call on the schedule slows the caller's compute by this much,
  // unseen in the call's own duration, so that tests can show an arm faster per call but slower
  // for the step is not adopted.
  TestArmEffect test_busy_arm;
  // init_process_group(enable_reconfigure=True): the engines connect at the first reconfigure;
  // until then nothing runs over them and calls pass through.
  bool connect_at_reconfigure = false;
  // A learned prior model (DYNAMICCL_PRIOR; csrc/prior/): orders and prunes the arms each new
  // state probes, in place of the engines' analytic priors. "" = the analytic priors.
  std::string prior_path;
};

}  // namespace dynamiccl
