// A learned prior model: a TorchScript module trained by `python -m dynamiccl_pg prior train`,
// loaded in C++ (no Python at decision time). This is the one place that knows the file format;
// moving to torch.export / AOTInductor means another implementation of this class.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <torch/script.h>

#include "prior/features.h"

namespace dynamiccl {
namespace prior {

// What the model says of one (state, arm): how far log(arm's cost / default's) departs from the
// analytic prior's log ratio, as a normal (mean, log of its sigma).
struct Estimate {
  double log_ratio = 0;
  double log_sigma = 0;
};

struct Metadata {
  std::string format;
  int64_t schema_version = 0;
  std::string catalog;
  std::vector<std::string> feature_names;
  std::vector<std::string> roles;
  std::string data_fingerprint;  // of the training data
};

class Model {
 public:
  // Loads and checks `path`: the file, its format, schema and catalog versions, its roles and a
  // forward pass over every op and role with finite outputs. Throws c10::ValueError naming the
  // file and the problem.
  static std::shared_ptr<const Model> load(const std::string& path);

  // `rows`: n x feature_count() features (append_features), `roles`: n role indices. Float64 on
  // the CPU; the outputs are rounded (log ratio to 1/64, log sigma to 1/16) so that ranks agree
  // bit for bit unless a value lies within rounding error of a step. NaN stays NaN.
  std::vector<Estimate> predict(const std::vector<double>& rows,
                                const std::vector<int64_t>& roles) const;
  const Metadata& metadata() const { return meta_; }
  const std::string& path() const { return path_; }

 private:
  Model(std::string path, torch::jit::Module module, Metadata meta);
  std::string path_;
  mutable std::mutex mu_;  // a Module's forward is not documented as thread-safe
  mutable torch::jit::Module module_;
  Metadata meta_;
};

}  // namespace prior
}  // namespace dynamiccl
