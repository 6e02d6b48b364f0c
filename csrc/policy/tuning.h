// Every tuning threshold of the learner, in one table, each with its one-line reason. Where a
// rule of policy/rules.h owns a constant, the rule is named; the longer story of each (what was
// seen without it) is told where it is used. Math constants (kMadToSigma, kMedianSeRatio), units
// (kPpmOne) and buffer sizes are not tuning and live with their code.
#pragma once

#include <cstdint>

namespace dynamiccl {

// --- Evidence: robust statistics of an arm's costs (arm_slot.h) --------------------------------
constexpr double kConfidenceZ = 2.0;     // ~95% two-sided: eliminate, switch, re-check, guards
constexpr double kClipSpreads = 3.0;     // winsorize costs (and CUSUM inputs) at 3 robust spreads
constexpr double kMinRelSpread = 0.01;   // spread floor, relative: near-noiseless costs still clip
constexpr int kMinRobustWindow = 3;      // samples before a robust statistic is trusted: an arm's
                                         // spread and outliers, hopeless, the guards' step
                                         // baseline (a median), a step trial's first look
constexpr double kOutlierSpreads = 6.0;  // a heavy-tail event: ~1 normal cost in a billion;
                                         // pair_clip: a step beyond it holds other work
// --- Probing (policy_state.h) ------------------------------------------------------------------
constexpr double kResolveZ = 1.645;      // one-sided 95%: "cannot beat the margin" stops probing
constexpr int kProbeCapFactor = 4;       // an undecided near-tie: at most 4 x min_samples probes
constexpr int kConvergedDecayShift = 4;  // budget decays 1/16 a call: ~2 runner-up re-checks
constexpr double kPriorCutoff = 8.0;     // prior_cutoff: candidates within 8x the best prior;
                                         // a measured arm beyond 8x stays out through re-opens
constexpr int kChallengers = 2;          // prior_cutoff: the 2 best by prior always stay;
                                         // focused_reopen: the incumbent and its 2 best re-probed
constexpr double kPriorSigma = 1.0;      // worth_probing: log-normal spread of a prior's ratio
constexpr double kHopelessRatio = 1.5;   // hopeless: one cost beyond 1.5x the incumbent suffices;
                                         // footprint_descent: no rung slower than that per call
constexpr double kHopelessFalseRate = 0.001;  // hopeless: P(all its costs were outliers)
// --- Measuring (policy_state.h) -----------------------------------------------------------------
constexpr double kLearningOverhead = 0.005;       // measuring may cost 0.5% of time while learning
constexpr double kWatchOverhead = 0.001;          // and 0.1% once settled
constexpr double kMinWatchFraction = 1.0 / 4096;  // the CUSUM and rollback checks: 1 call in 4096
// --- Change (policy_state.h, policy_recovery.cpp, cusum.h) --------------------------------------
constexpr double kProvisionalShift = 0.2;  // provisional_switch: a rise beyond 20% switches now
// --- Evidence shared between states (arm_evidence.h) -------------------------------------------
constexpr double kEvidenceFactor = 1.5;  // cap_pricing: a word beyond the prior's own error
constexpr double kMinCapShare = 0.25;    // min_cap_share: caps under 1/4 of NCCL's channels go
// --- Step trials (policy_trials.cpp, step_trial_board.h) ---------------------------------------
constexpr double kStepTrialMargin = 0.005;      // step_trials: adopt a 0.5% shorter step
constexpr double kTrialZ = 3.0;                 // step_trials: ~5% false verdicts over 40 looks;
                                                // probed_pairs: a probed pair within 3 sd counts
constexpr uint64_t kMaxTrialStepsPerPair = 16;  // a trial without its pairs stops after 16x
constexpr double kFutilityLook = 1.0 / 3;       // futility: looked at from a third of the pairs
constexpr uint64_t kLastRungPairsScale = 2;     // footprint_descent: the last rung runs on 2x
constexpr double kProbedPairTolerance = 0.1;    // probed_pairs: steps within 10% count
constexpr int kTrialLanes = 2;                  // two_lanes: lag 1 and 2 (a third would need lag 4)
// --- Guards (learner.cpp) ---------------------------------------------------------------------
constexpr int kRegressionRounds = 2;          // one slow round (a checkpoint) does not freeze
constexpr int kRegressionRoundsUnmarked = 3;  // rounds as steps are heavier-tailed: 3 in a row

}  // namespace dynamiccl
