#include "core/cluster/cluster_spec.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

namespace twinps {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// TF_CONFIG is three levels deep; anything far deeper is not a TF_CONFIG, and
// refusing it early keeps a hostile input from exhausting memory or stack.
constexpr std::size_t kMaxJsonDepth = 16;

Status invalid(std::string_view source, const std::string& message) {
  return absl::InvalidArgumentError(std::string(source) + ": " + message);
}

// A user-written string, quoted and escaped as JSON so that control
// characters and quotes stay readable in the message.
std::string json_quoted(std::string_view s) {
  return Json(std::string(s)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// "string \"1\"", "array [1,2]", "null": the type and (a prefix of) the value.
std::string describe_value(const Json& v) {
  if (v.is_null()) return "null";
  std::string text = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 40) {
    std::size_t cut = 37;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // keep UTF-8 whole
    text = text.substr(0, cut) + "...";
  }
  return std::string(v.type_name()) + " " + text;
}

std::string known_jobs() {
  std::string out;
  for (Job j : kAllJobs) out += (out.empty() ? "" : ", ") + std::string(job_name(j));
  return out;
}

// Thrown by KeyWatcher to stop the parse at the first problem it sees.
struct Rejected {
  std::string message;
};

// The DOM keeps only the last of two equal keys, which would silently drop
// half of e.g. two "worker" lists, so the parser callback watches for repeats
// (and for absurd nesting) while the document is read.
class KeyWatcher {
 public:
  bool operator()(int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        std::string path = child_path();
        if (frames_.size() >= kMaxJsonDepth)
          throw Rejected{"nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at " + where(path)};
        frames_.push_back({event == Json::parse_event_t::object_start, std::move(path), {}, {}, 0});
        return true;
      }
      case Json::parse_event_t::key: {
        Frame& top = frames_.back();
        top.last_key = parsed.get<std::string>();
        if (!top.keys.insert(top.last_key).second)
          throw Rejected{"key " + json_quoted(top.last_key) + " appears more than once in " + where(top.path)};
        return true;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        frames_.pop_back();
        if (!frames_.empty()) ++frames_.back().next_index;
        return true;
      case Json::parse_event_t::value:
        if (!frames_.empty()) ++frames_.back().next_index;
        return true;
    }
    return true;
  }

 private:
  struct Frame {
    bool is_object;
    std::string path;  // "" for the document, else "cluster", "cluster.worker[2]", ...
    std::set<std::string> keys;
    std::string last_key;
    std::size_t next_index;
  };

  std::string child_path() const {
    if (frames_.empty()) return "";
    const Frame& top = frames_.back();
    if (top.is_object) return top.path.empty() ? top.last_key : top.path + "." + top.last_key;
    return top.path + "[" + std::to_string(top.next_index) + "]";
  }
  static std::string where(const std::string& path) { return path.empty() ? "the top-level object" : json_quoted(path); }

  std::vector<Frame> frames_;
};

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// The inside of "[...]": hex groups, ':' and '.', then an optional zone ("%eth0").
bool valid_ipv6(std::string_view inner) {
  std::string_view zone;
  if (auto percent = inner.find('%'); percent != std::string_view::npos) {
    zone = inner.substr(percent + 1);
    inner = inner.substr(0, percent);
  }
  return !inner.empty() &&
         std::all_of(inner.begin(), inner.end(), [](char c) { return is_hex_digit(c) || c == ':' || c == '.'; }) &&
         std::all_of(zone.begin(), zone.end(), [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// "[json.exception.parse_error.101] parse error at line 1, column 5: syntax error ..."
// -> "syntax error ...": the byte offset is reported separately.
// The detail quotes raw input bytes ("last read: ..."); bytes that are not
// printable ASCII are shown as \xNN so that the message stays readable text.
std::string parse_error_detail(const Json::parse_error& e) {
  std::string what = e.what();
  auto colon = what.find(": ");
  if (colon != std::string::npos) what = what.substr(colon + 2);
  std::string out;
  for (char c : what) {
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += {'\\', 'x', kHex[u >> 4], kHex[u & 0xf]};
    }
  }
  return out;
}

std::string cluster_field(Job job, std::size_t i) {
  return "cluster." + std::string(job_name(job)) + "[" + std::to_string(i) + "]";
}

Status parse_cluster(const Json& cluster, std::string_view source, ClusterSpec* out) {
  if (!cluster.is_object())
    return invalid(source, "\"cluster\" must be an object mapping job names to lists of \"host:port\", got " +
                               describe_value(cluster));
  for (const auto& [key, value] : cluster.items()) {
    if (!parse_job(key))
      return invalid(source, "cluster has unknown job " + json_quoted(key) + " (known jobs: " + known_jobs() + ")");
  }
  // Jobs in a fixed order so that the same input always gives the same error.
  for (Job job : kAllJobs) {
    auto it = cluster.find(std::string(job_name(job)));
    if (it == cluster.end()) continue;
    const std::string field = "cluster." + std::string(job_name(job));
    if (!it->is_array())
      return invalid(source, field + " must be a list of \"host:port\" strings, got " + describe_value(*it));
    if (it->empty())
      return invalid(source, field + " is an empty list; list at least one \"host:port\" or leave the job out");
    std::vector<std::string> addresses;
    for (std::size_t i = 0; i < it->size(); ++i) {
      const Json& a = (*it)[i];
      if (!a.is_string())
        return invalid(source, cluster_field(job, i) + " must be a \"host:port\" string, got " + describe_value(a));
      const auto& s = a.get_ref<const std::string&>();
      TWINPS_RETURN_IF_ERROR(check_host_port(s, cluster_field(job, i), source));
      addresses.push_back(s);
    }
    out->set_job(job, std::move(addresses));
  }

  std::map<std::string, std::string> seen;  // address -> field that used it first
  for (Job job : kAllJobs) {
    const auto& addresses = out->addresses(job);
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      auto [it, inserted] = seen.emplace(addresses[i], cluster_field(job, i));
      if (!inserted)
        return invalid(source, cluster_field(job, i) + " " + json_quoted(addresses[i]) + " duplicates " + it->second);
    }
  }
  for (Job job : {Job::kChief, Job::kEvaluator}) {
    int n = out->num_tasks(job);
    if (n > 1)
      return invalid(source, "cluster." + std::string(job_name(job)) + " has " + std::to_string(n) +
                                 " tasks; at most one is allowed");
  }
  return absl::OkStatus();
}

Status parse_task(const Json& task, std::string_view source, TaskId* out) {
  if (!task.is_object())
    return invalid(source, "\"task\" must be an object like {\"type\": \"worker\", \"index\": 0}, got " +
                               describe_value(task));
  for (const auto& [key, value] : task.items()) {
    if (key != "type" && key != "index")
      return invalid(source, "\"task\" has unknown key " + json_quoted(key) + " (expected \"type\" and \"index\")");
  }
  auto type = task.find("type");
  if (type == task.end()) return invalid(source, "\"task.type\" is missing (one of " + known_jobs() + ")");
  if (!type->is_string()) return invalid(source, "\"task.type\" must be a string, got " + describe_value(*type));
  auto job = parse_job(type->get_ref<const std::string&>());
  if (!job)
    return invalid(source, "\"task.type\" is " + json_quoted(type->get_ref<const std::string&>()) +
                               ", not one of " + known_jobs());

  auto index = task.find("index");
  if (index == task.end()) return invalid(source, "\"task.index\" is missing");
  if (!index->is_number_integer())
    return invalid(source, "\"task.index\" must be a non-negative integer, got " + describe_value(*index));
  if (!index->is_number_unsigned())
    return invalid(source, "\"task.index\" is " + index->dump() + "; it must not be negative");
  std::uint64_t i = index->get<std::uint64_t>();
  // Indices that cannot be a task are range-checked against the cluster later;
  // cap here only so that the value fits TaskId.
  if (i > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    return invalid(source, "\"task.index\" is " + std::to_string(i) + ", which is not a plausible task index");
  *out = TaskId{*job, static_cast<int>(i)};
  return absl::OkStatus();
}

Status check_task_in_cluster(const TaskId& task, bool has_cluster, const ClusterSpec& cluster,
                             std::string_view source) {
  const std::string job = json_quoted(job_name(task.job));
  int n = cluster.num_tasks(task.job);
  if (n == 0) {
    // The evaluator runs beside the training cluster and need not be listed.
    if (task.job == Job::kEvaluator) return absl::OkStatus();
    if (!has_cluster)
      return invalid(source, "\"cluster\" is missing; only an evaluator task may leave it out");
    return invalid(source, "\"task.type\" is " + job + " but the cluster has no " + job + " job");
  }
  if (task.index >= n)
    return invalid(source, "\"task.index\" is " + std::to_string(task.index) + " but job " + job + " has " +
                               std::to_string(n) + (n == 1 ? " task (0)" : " tasks (0.." + std::to_string(n - 1) + ")"));
  return absl::OkStatus();
}

}  // namespace

void ClusterSpec::set_job(Job job, std::vector<std::string> addresses) { jobs_[index(job)] = std::move(addresses); }

bool ClusterSpec::has_task(const TaskId& task) const { return task.index >= 0 && task.index < num_tasks(task.job); }

bool ClusterSpec::empty() const {
  return std::all_of(jobs_.begin(), jobs_.end(), [](const auto& a) { return a.empty(); });
}

std::vector<TaskId> ClusterSpec::tasks(Job job) const {
  std::vector<TaskId> out;
  for (int i = 0; i < num_tasks(job); ++i) out.push_back(TaskId{job, i});
  return out;
}

StatusOr<std::string> ClusterSpec::address(const TaskId& task) const {
  if (!has_task(task))
    return absl::InvalidArgumentError("task " + task.short_name() + " is not in the cluster (job \"" +
                                      std::string(job_name(task.job)) + "\" has " +
                                      std::to_string(num_tasks(task.job)) + " tasks)");
  return jobs_[index(task.job)][static_cast<std::size_t>(task.index)];
}

namespace {
OrderedJson cluster_json(const ClusterSpec& spec) {
  OrderedJson out = OrderedJson::object();
  for (Job job : kAllJobs)
    if (spec.num_tasks(job) > 0) out[std::string(job_name(job))] = spec.addresses(job);
  return out;
}
}  // namespace

std::string ClusterSpec::to_json() const {
  return cluster_json(*this).dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string TfConfig::to_json() const {
  OrderedJson out = OrderedJson::object();
  if (!cluster.empty()) out["cluster"] = cluster_json(cluster);
  if (task) out["task"] = OrderedJson{{"type", std::string(job_name(task->job))}, {"index", task->index}};
  return out.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

StatusOr<TfConfig> parse_tf_config(std::string_view json, std::string_view source) {
  if (json.find_first_not_of(" \t\r\n") == std::string_view::npos)
    return invalid(source, "is empty; expected a JSON object with \"cluster\" and \"task\"");

  Json root;
  KeyWatcher watcher;
  try {
    root = Json::parse(json.begin(), json.end(), std::ref(watcher));
  } catch (const Rejected& r) {
    return invalid(source, r.message);
  } catch (const Json::parse_error& e) {
    return invalid(source, "not valid JSON (byte " + std::to_string(e.byte) + "): " + parse_error_detail(e));
  } catch (const Json::exception& e) {
    return invalid(source, std::string("could not be read as JSON: ") + e.what());
  }
  if (!root.is_object())
    return invalid(source, "must be a JSON object with \"cluster\" and \"task\", got " + describe_value(root));

  TfConfig config;
  bool has_cluster = false;
  for (const auto& [key, value] : root.items()) {
    if (key == "cluster") {
      TWINPS_RETURN_IF_ERROR(parse_cluster(value, source, &config.cluster));
      has_cluster = true;
    } else if (key == "task") {
      TaskId task;
      TWINPS_RETURN_IF_ERROR(parse_task(value, source, &task));
      config.task = task;
    } else if (key == "rpc_layer") {
      if (!value.is_string() || value.get_ref<const std::string&>() != "grpc")
        return invalid(source, "\"rpc_layer\" is " + describe_value(value) + "; twinps only speaks \"grpc\"");
    } else if (key == "environment") {
      if (!value.is_string())
        return invalid(source, "\"environment\" must be a string, got " + describe_value(value));
    } else {
      return invalid(source, "unknown key " + json_quoted(key) +
                                 " at the top level (expected \"cluster\", \"task\", \"rpc_layer\" or \"environment\")");
    }
  }

  if (config.task) {
    TWINPS_RETURN_IF_ERROR(check_task_in_cluster(*config.task, has_cluster, config.cluster, source));
  } else if (!has_cluster) {
    return invalid(source, "has neither \"cluster\" nor \"task\"");
  }
  return config;
}

Status validate_for_training(const ClusterSpec& cluster, std::string_view source) {
  if (cluster.num_ps() == 0)
    return invalid(source, "cluster has no \"ps\" job: parameter server training needs at least one");
  if (cluster.num_workers() == 0)
    return invalid(source, "cluster has no \"worker\" job: parameter server training needs at least one");
  if (int n = cluster.num_tasks(Job::kChief); n > 1)
    return invalid(source, "cluster.chief has " + std::to_string(n) + " tasks; at most one is allowed");
  return absl::OkStatus();
}

Status check_host_port(std::string_view address, std::string_view field, std::string_view source) {
  auto bad = [&](const std::string& why) {
    return invalid(source, std::string(field) + " " + json_quoted(address) + " " + why);
  };
  if (address.empty()) return invalid(source, std::string(field) + " is empty; expected \"host:port\"");
  for (char c : address)
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return bad("contains whitespace or a control character");
  if (address.find("://") != std::string_view::npos)
    return bad("has a scheme; write only \"host:port\"");
  auto colon = address.rfind(':');
  if (colon == std::string_view::npos || address.back() == ']') return bad("has no port; expected \"host:port\"");
  std::string_view host = address.substr(0, colon);
  std::string_view port = address.substr(colon + 1);

  if (host.empty()) return bad("has no host; expected \"host:port\"");
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']' || !valid_ipv6(host.substr(1, host.size() - 2)))
      return bad("has an invalid IPv6 host; expected \"[addr]:port\"");
  } else {
    if (host.find(':') != std::string_view::npos)
      return bad("has more than one ':'; write an IPv6 host in brackets: \"[addr]:port\"");
    for (char c : host) {
      if (static_cast<unsigned char>(c) >= 0x80) return bad("has a non-ASCII host");
      if (!(is_alnum(c) || c == '-' || c == '.' || c == '_'))
        return bad("has an invalid character " + json_quoted(std::string(1, c)) + " in the host");
    }
  }

  if (port.empty()) return bad("has no port; expected \"host:port\"");
  if (!std::all_of(port.begin(), port.end(), is_digit)) return bad("has a port that is not a number");
  std::int64_t value = 0;
  for (char c : port) {
    value = value * 10 + (c - '0');
    if (value > 65535) break;  // no overflow however long the digit string
  }
  if (value < 1 || value > 65535) return bad("has port " + std::string(port) + ", outside 1..65535");
  return absl::OkStatus();
}

ClusterSpec make_cluster(int workers, int ps, bool chief, const std::function<std::string(TaskId)>& address) {
  ClusterSpec spec;
  auto fill = [&](Job job, int n) {
    std::vector<std::string> addresses;
    for (int i = 0; i < n; ++i) addresses.push_back(address(TaskId{job, i}));
    spec.set_job(job, std::move(addresses));
  };
  if (chief) fill(Job::kChief, 1);
  fill(Job::kWorker, workers);
  fill(Job::kPs, ps);
  return spec;
}

}  // namespace twinps
