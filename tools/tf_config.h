#pragma once
// Where a task learns the cluster: --tf-config JSON, else the TF_CONFIG
// environment variable (TensorFlow's format).
#include <cstdlib>
#include <string>

#include "core/cluster/cluster_spec.h"

namespace twinps::cli {

inline StatusOr<TfConfig> load_tf_config(const std::string& flag_value) {
  if (!flag_value.empty()) return parse_tf_config(flag_value, "--tf-config");
  const char* env = std::getenv("TF_CONFIG");
  if (!env || !*env)
    return absl::InvalidArgumentError("no cluster given: set TF_CONFIG or pass --tf-config (TensorFlow's JSON format)");
  return parse_tf_config(env, "TF_CONFIG");
}

inline std::function<std::string(const TaskId&)> resolver(const ClusterSpec& spec) {
  return [spec](const TaskId& t) {
    auto a = spec.address(t);
    return a.ok() ? *a : std::string();
  };
}

}  // namespace twinps::cli
