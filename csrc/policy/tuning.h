// Every tuning threshold of the learner, in one table, each with its one-line reason. Where a
// rule of policy/rules.h owns a constant, the rule is named; the longer story of each (what was
// seen without it) is told where it is used. Math constants (kMadToSigma, kMedianSeRatio), units
// (kPpmOne) and buffer sizes are not tuning and live with their code.
#pragma once

#include <cstdint>

namespace dynamiccl {

// --- Evidence: robust statistics of an arm's costs (arm_slot.h) --------------------------------
constexpr double kConfidenceZ = 2.0;     // ~95% two-sided intervals to eliminate, switch, re-check
constexpr double kClipSpreads = 3.0;     // winsorize costs beyond this many robust spreads
constexpr double kMinRelSpread = 0.01;   // spread floor, relative: near-noiseless costs still clip
constexpr int kMinRobustWindow = 3;      // costs before the robust spread is trusted
constexpr double kOutlierSpreads = 6.0;  // a heavy-tail event: ~1 normal cost in a billion
constexpr int kMinOutlierWindow = 8;     // costs before outliers are counted
// --- Probing (policy_state.h) ------------------------------------------------------------------
constexpr double kResolveZ = 1.645;      // one-sided 95%: "cannot beat the margin" stops probing
constexpr int kProbeCapFactor = 4;       // an undecided near-tie: at most 4 x min_samples probes
constexpr int kConvergedDecayShift = 4;  // budget decays 1/16 a call: ~2 runner-up re-checks
constexpr double kPriorCutoff = 8.0;     // prior_cutoff: candidates within 8x the best prior
constexpr int kMinChallengers = 2;       // prior_cutoff: the 2 best by prior always stay
constexpr uint8_t kMaxWaitRounds = 2;    // first_probe_gate: a lost first cost waited 2 rounds
constexpr double kPriorSigma = 1.0;      // worth_probing: log-normal spread of a prior's ratio
constexpr double kHopelessRatio = 2.0;   // hopeless: one cost beyond 2x the incumbent suffices
constexpr uint64_t kHopelessMinReference = 3;  // hopeless: incumbent costs the bound rests on
constexpr double kHopelessFalseRate = 0.001;   // hopeless: P(all its costs were outliers)
constexpr uint32_t kMaxHopelessNeed = 4;       // hopeless: costs it needs, at most
// --- Measuring (policy_state.h) -----------------------------------------------------------------
constexpr double kLearningOverhead = 0.005;       // measuring may cost 0.5% of time while learning
constexpr double kWatchOverhead = 0.001;          // and 0.1% once settled
constexpr double kMinWatchFraction = 1.0 / 4096;  // the CUSUM still sees 1 call in 4096
constexpr uint32_t kMinCheckPpm = 250;            // rollback checks: at least 1 in 4000 measured
// --- Change (policy_state.h, policy_recovery.cpp, cusum.h) --------------------------------------
constexpr uint64_t kCusumMinReference = 32;  // CUSUM watches once the centre rests on 32 costs
constexpr double kCusumMaxStep = 3.0;        // one cost moves a CUSUM sum by 3 spreads at most
constexpr double kCusumDownFactor = 1.5;     // a cheaper incumbent costs nothing unnoticed: 1.5x
constexpr int kRecoveryArms = 3;             // focused_reopen: the incumbent and the 2 best others
constexpr double kProvisionalShift = 0.2;    // provisional_switch: a rise beyond 20% switches now
constexpr double kFarBeyondRatio = 10.0;     // an arm beyond 10x keeps its word through a re-open
constexpr double kSkewRatio = 1.5;           // skew_skip: a probe 1.5x the incumbent skews ranks
// --- Evidence shared between states (arm_evidence.h) -------------------------------------------
constexpr double kEvidenceFactor = 1.5;  // cap_pricing: a word beyond the prior's own error
constexpr double kMinCapShare = 0.25;    // min_cap_share: caps under 1/4 of NCCL's channels go
// --- Step trials (policy_trials.cpp, step_trial_board.h) ---------------------------------------
constexpr double kStepTrialMargin = 0.005;      // step_trials: adopt a 0.5% shorter step
constexpr double kTrialZ = 3.0;                 // step_trials: ~5% false verdicts over 40 looks
constexpr double kFirstLookPairs = 4;           // step_trials: fewer pairs' spread says little
constexpr uint64_t kMaxTrialStepsPerPair = 16;  // a trial without its pairs stops after 16x
constexpr double kFutilityLook = 1.0 / 3;       // futility: looked at from a third of the pairs
constexpr double kFootprintStep = 0.75;         // footprint_descent: a rung holds <= 3/4
constexpr double kFootprintMaxSlowdown = 1.5;   // footprint_descent: a rung <= 1.5x per call
constexpr uint64_t kLastRungPairsScale = 2;     // rung_shorter_on_average: the last runs on 2x
constexpr double kProbedPairTolerance = 0.1;    // probed_pairs: steps within 10% count
constexpr double kProbedPairZ = 3.0;            // probed_pairs: or within 3 sd of the pairs' mean
constexpr int kTrialLanes = 2;                  // two_lanes: lag 1 and 2 (a third would need lag 4)
constexpr double kPairClipZ = 5.0;  // pair_clip: a step beyond 5 spreads holds other work
// --- Guards (learner.cpp) ---------------------------------------------------------------------
constexpr int kFirstRounds = 3;               // step baseline: median of the first 3 rounds
constexpr int kRegressionRounds = 2;          // one slow round (a checkpoint) does not freeze
constexpr int kRegressionRoundsUnmarked = 3;  // rounds as steps are heavier-tailed: 3 in a row
constexpr double kGuardZ = 2.0;               // regressed beyond 2 sd of the step's own noise
constexpr int kNoiseRounds = 16;              // that noise over the last 16 rounds

}  // namespace dynamiccl
