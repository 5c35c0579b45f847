#include "core/models/tutorial/run_metadata.h"

#include <charconv>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace twinps::tutorial {
namespace {

constexpr char kPrefix[] = "tutorial.";

// One table of the recorded fields, read and written alike.
template <class Visit>
void for_each_field(Config& c, Visit&& visit) {
  visit("num_examples", c.num_examples);
  visit("batch_size", c.batch_size);
  visit("shuffle_buffer", c.shuffle_buffer);
  visit("epochs", c.epochs);
  visit("steps_per_epoch", c.steps_per_epoch);
  visit("steps_per_execution", c.steps_per_execution);
  visit("learning_rate", c.learning_rate);
  visit("embedding_dim", c.embedding_dim);
  visit("num_shards", c.num_shards);
  visit("mask_token", c.mask_token);
  visit("data_seed", c.data_seed);
  visit("init_seed", c.init_seed);
  visit("eval_examples", c.eval_examples);
  visit("eval_steps", c.eval_steps);
}

template <class T>
std::string text(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else {
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // doubles: the shortest text that reads back exactly
    return ec == std::errc() ? std::string(buf, end) : std::string();
  }
}

template <class T>
bool read(std::string_view s, T& out) {
  if constexpr (std::is_same_v<T, bool>) {
    if (s == "true" || s == "false") {
      out = s == "true";
      return true;
    }
    return false;
  } else {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  }
}

}  // namespace

std::map<std::string, std::string> run_metadata(const Config& config) {
  std::map<std::string, std::string> out;
  out["model"] = "tutorial";
  Config c = config;
  for_each_field(c, [&](const char* name, const auto& v) { out[std::string(kPrefix) + name] = text(v); });
  return out;
}

StatusOr<Config> config_from_metadata(const std::map<std::string, std::string>& metadata) {
  auto model = metadata.find("model");
  if (model == metadata.end())
    return absl::InvalidArgumentError(
        "records no training configuration (metadata \"model\" missing: saved by an older twinps, or not by "
        "twinps train)");
  if (model->second != "tutorial")
    return absl::InvalidArgumentError("holds model \"" + model->second + "\", not the tutorial model");
  Config c;
  Status status;
  for_each_field(c, [&](const char* name, auto& v) {
    if (!status.ok()) return;
    const std::string key = std::string(kPrefix) + name;
    auto it = metadata.find(key);
    if (it == metadata.end()) {
      status = absl::InvalidArgumentError("metadata \"" + key + "\" is missing");
    } else if (!read(it->second, v)) {
      status = absl::InvalidArgumentError("metadata \"" + key + "\" is malformed: \"" + it->second + "\"");
    }
  });
  if (!status.ok()) return status;
  return c;
}

}  // namespace twinps::tutorial
