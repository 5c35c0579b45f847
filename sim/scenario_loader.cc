#include "sim/scenario_loader.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <google/protobuf/text_format.h>

#include "core/model/compiled_model.h"
#include "core/model/spec_loader.h"
#include "core/variables/partitioner.h"
#include "sim/spec_workload.h"
#include "sim/task_names.h"

namespace twinps::sim {

namespace pb = google::protobuf;
using scenario::Scenario;

namespace {

// A field inside the scenario (core/config/text_proto.h).
using Path = config::FieldPath;

class Validator {
 public:
  Validator(const Scenario& s, std::string file, const pb::TextFormat::ParseInfoTree* tree,
            std::vector<ScenarioError>& out)
      : s_(s), file_(std::move(file)), tree_(tree), out_(out) {}

  void run();
  // Only the model, read from a file of its own: `tree` is the model's, and
  // errors name fields from the model down.
  void run_model_only() {
    model_only_ = true;
    workers_ = ps_ = 1;
    workload();
  }
  // Only the costs, read from a cost profile file: `tree` is the profile's,
  // whose network, compute and ps_service sit at the root as a scenario's do.
  void run_profile_only() {
    profile_only_ = true;
    network();
    compute();
    service();
    hosts();
    messages();
  }

 private:
  // Reports at the field's position, or at its closest parent that has one.
  void error(const Path& p, const std::string& message) {
    const std::size_t first = model_only_ ? 1 : 0;  // the steps the file holds start below `model`
    std::string field = p.str();
    if (model_only_) field = field.size() > 6 ? field.substr(6) : "";
    ScenarioError e{file_, 0, 0, field, message};
    const pb::TextFormat::ParseInfoTree* tree = tree_;
    for (std::size_t i = first; tree != nullptr && i < p.steps.size(); ++i) {
      auto [field, index] = p.steps[i];
      // A profile's tree is keyed by CostProfile's fields of the same names.
      if (profile_only_ && i == 0) field = scenario::CostProfile::descriptor()->FindFieldByName(field->name());
      if (field == nullptr) break;
      const auto loc = tree->GetLocation(field, index);
      if (loc.line < 0) break;
      e.line = loc.line + 1;
      e.column = loc.column + 1;
      if (i + 1 < p.steps.size() && field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE)
        tree = tree->GetTreeForNested(field, index);
      else
        break;
    }
    out_.push_back(std::move(e));
  }

  bool time_ok(const Path& p, double t, const char* what) {
    if (std::isnan(t) || t < 0) {
      error(p, std::string(what) + " must not be negative (got " + num(t) + ")");
      return false;
    }
    return true;
  }
  void positive(const Path& p, double v, const char* what) {
    if (!(v > 0)) error(p, std::string(what) + " must be positive (got " + num(v) + ")");
  }
  void task_ok(const Path& p, const std::string& name) {
    auto t = parse_task_name(name);
    if (!t.ok()) {
      error(p, std::string(t.status().message()));
      return;
    }
    if (t->job == Job::kWorker && t->index >= workers_)
      error(p, "\"" + name + "\": the cluster has " + std::to_string(workers_) + " workers (worker:0 .. worker:" +
                   std::to_string(workers_ - 1) + ")");
    if (t->job == Job::kPs && t->index >= ps_)
      error(p, "\"" + name + "\": the cluster has " + std::to_string(ps_) + " ps (ps:0 .. ps:" + std::to_string(ps_ - 1) +
                   ")");
  }
  void worker_ok(const Path& p, std::int64_t i) {
    if (i < 0 || i >= workers_)
      error(p, "worker index " + std::to_string(i) + " is out of range: the cluster has " + std::to_string(workers_) +
                   " workers (0 .. " + std::to_string(workers_ - 1) + ")");
  }
  void ps_ok(const Path& p, std::int64_t i) {
    if (i < 0 || i >= ps_)
      error(p, "ps index " + std::to_string(i) + " is out of range: the cluster has " + std::to_string(ps_) +
                   " ps (0 .. " + std::to_string(ps_ - 1) + ")");
  }
  // equals / at_least / at_most: at least one, and a consistent range.
  void bounds_ok(const Path& p, const pb::Message& m) {
    const auto* d = m.GetDescriptor();
    const auto* r = m.GetReflection();
    const auto* eq = d->FindFieldByName("equals");
    const auto* lo = d->FindFieldByName("at_least");
    const auto* hi = d->FindFieldByName("at_most");
    if (!r->HasField(m, eq) && !r->HasField(m, lo) && !r->HasField(m, hi)) {
      error(p, "needs a bound: equals, at_least or at_most");
      return;
    }
    if (r->HasField(m, lo) && r->HasField(m, hi) && r->GetDouble(m, lo) > r->GetDouble(m, hi))
      error(p, "at_least " + num(r->GetDouble(m, lo)) + " is above at_most " + num(r->GetDouble(m, hi)));
  }
  void distribution_ok(const Path& p, const scenario::Distribution& d) {
    using D = scenario::Distribution;
    switch (d.kind_case()) {
      case D::kConstantS: time_ok(p(d, "constant_s"), d.constant_s(), "constant_s"); break;
      case D::kUniform:
        if (time_ok(p(d, "uniform")(d.uniform(), "min_s"), d.uniform().min_s(), "min_s") &&
            d.uniform().max_s() < d.uniform().min_s())
          error(p(d, "uniform")(d.uniform(), "max_s"), "max_s is below min_s");
        break;
      case D::kLognormal:
        positive(p(d, "lognormal")(d.lognormal(), "median_s"), d.lognormal().median_s(), "median_s");
        time_ok(p(d, "lognormal")(d.lognormal(), "sigma"), d.lognormal().sigma(), "sigma");
        break;
      case D::kNormal:
        time_ok(p(d, "normal")(d.normal(), "stddev_s"), d.normal().stddev_s(), "stddev_s");
        break;
      case D::kExponentialMeanS:
        positive(p(d, "exponential_mean_s"), d.exponential_mean_s(), "exponential_mean_s");
        break;
      case D::KIND_NOT_SET: error(p, "choose a distribution: constant_s, uniform, lognormal, normal or exponential_mean_s");
    }
  }
  static std::string num(double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  }

  void cluster();
  void network();
  void workload();
  void exactly_once_fits(const Path& where);
  void compute();
  void service();
  void hosts();
  void messages();
  void message_cpu(const Path& p, const scenario::MessageCpu& m);
  // A measured curve's points: bytes increasing, costs times.
  template <typename M>
  void bytes_curve(const Path& p, const M& m) {
    curve(p, m, "bytes_curve", m.bytes_curve());
  }
  template <typename M>
  void curve(const Path& p, const M& m, const char* field,
             const google::protobuf::RepeatedPtrField<scenario::BytesCost>& points);
  // A curve over intervals: from 0, increasing and finite; costs times.
  template <typename M>
  void interval_curve(const Path& p, const M& m, const char* field,
                      const google::protobuf::RepeatedPtrField<scenario::IntervalCost>& points);
  void coordinator();
  void program();
  void faults();
  void expectations();

  const Scenario& s_;
  std::string file_;
  const pb::TextFormat::ParseInfoTree* tree_;
  std::vector<ScenarioError>& out_;
  Path root_;
  bool model_only_ = false;
  bool profile_only_ = false;
  int workers_ = 0, ps_ = 0;
  std::set<std::string> variables_;
  std::map<std::string, const scenario::Action*> labels_;
};

void Validator::run() {
  cluster();
  if (workers_ < 1 || ps_ < 1) return;  // everything else refers to the cluster
  network();
  workload();
  compute();
  service();
  hosts();
  messages();
  coordinator();
  program();
  faults();
  expectations();
  if (!(s_.time_limit_s() > 0)) error(root_(s_, "time_limit_s"), "must be positive");
}

void Validator::cluster() {
  if (!s_.has_cluster()) {
    error(root_(s_, "cluster"), "missing: say how many tasks, e.g. cluster { workers: 3 ps: 2 }");
    return;
  }
  const auto& c = s_.cluster();
  const Path p = root_(s_, "cluster");
  if (!c.has_workers() || c.workers() < 1 || c.workers() > 100000)
    error(p(c, "workers"), "workers must be between 1 and 100000" +
                               std::string(c.has_workers() ? " (got " + std::to_string(c.workers()) + ")" : ""));
  else
    workers_ = c.workers();
  if (!c.has_ps() || c.ps() < 1 || c.ps() > 10000)
    error(p(c, "ps"), "ps must be between 1 and 10000" +
                          std::string(c.has_ps() ? " (got " + std::to_string(c.ps()) + ")" : ""));
  else
    ps_ = c.ps();
}

void Validator::network() {
  if (!s_.has_network()) return;
  const auto& n = s_.network();
  const Path p = root_(s_, "network");
  positive(p(n, "host_bandwidth_gbps"), n.host_bandwidth_gbps(), "host_bandwidth_gbps");
  time_ok(p(n, "host_latency_us"), n.host_latency_us(), "host_latency_us");
  if (n.hosts_per_rack() < 0) error(p(n, "hosts_per_rack"), "must not be negative");
  positive(p(n, "rack_uplink_gbps"), n.rack_uplink_gbps(), "rack_uplink_gbps");
  time_ok(p(n, "rack_uplink_latency_us"), n.rack_uplink_latency_us(), "rack_uplink_latency_us");
  positive(p(n, "connection_timeout_s"), n.connection_timeout_s(), "connection_timeout_s");
  time_ok(p(n, "tcp_window_bytes"), n.tcp_window_bytes(), "tcp_window_bytes");
  time_ok(p(n, "loopback_latency_us"), n.loopback_latency_us(), "loopback_latency_us");
  if (profile_only_ && n.host_link_size() > 0) {
    error(p(n, "host_link", 0), "a cost profile describes every host alike; per-task links belong in a scenario");
    return;
  }
  for (int i = 0; i < n.host_link_size(); ++i) {
    const auto& h = n.host_link(i);
    const Path hp = p(n, "host_link", i);
    task_ok(hp(h, "task"), h.task());
    if (h.has_bandwidth_gbps()) positive(hp(h, "bandwidth_gbps"), h.bandwidth_gbps(), "bandwidth_gbps");
    if (h.has_latency_us()) time_ok(hp(h, "latency_us"), h.latency_us(), "latency_us");
  }
}

// EXACTLY_ONCE's guarantee holds only where nothing takes applied steps
// back or drops a completed closure's gradients.
void Validator::exactly_once_fits(const Path& where) {
  if (s_.coordinator().ps_failure() != scenario::RAISE)
    error(where, "EXACTLY_ONCE needs coordinator.ps_failure RAISE (a restore or rollback takes applied records back)");
  if (s_.coordinator().mode() == scenario::SYNC && s_.coordinator().backup_workers() > 0)
    error(where, "EXACTLY_ONCE cannot have coordinator.backup_workers (their late gradients are dropped, and their "
                 "examples with them)");
}

void Validator::workload() {
  if (s_.has_tutorial()) {
    const auto& t = s_.tutorial();
    const Path p = root_(s_, "tutorial");
    if (s_.fidelity() == scenario::TIMING_ONLY)
      error(root_(s_, "fidelity"), "the tutorial computes for real; TIMING_ONLY needs a synthetic `model`");
    if (t.epochs() < 1) error(p(t, "epochs"), "must be at least 1");
    if (t.steps_per_epoch() < 1) error(p(t, "steps_per_epoch"), "must be at least 1");
    if (t.batch_size() < 1) error(p(t, "batch_size"), "must be at least 1");
    positive(p(t, "learning_rate"), t.learning_rate(), "learning_rate");
    if (t.has_num_shards() && t.num_shards() < 1) error(p(t, "num_shards"), "must be at least 1");
    if (t.max_to_keep() < 1) error(p(t, "max_to_keep"), "must be at least 1");
    if (t.visitation() == scenario::EXACTLY_ONCE) exactly_once_fits(p(t, "visitation"));
    return;
  }
  if (s_.has_checkpoints()) {
    if (!s_.has_model_spec())
      error(root_(s_, "checkpoints"), "checkpoints are a model spec's (`model_spec`); the tutorial has its own");
    if (s_.checkpoints().max_to_keep() < 1)
      error(root_(s_, "checkpoints")(s_.checkpoints(), "max_to_keep"), "must be at least 1");
  }
  if (s_.has_model_spec()) {
    // The spec itself is read and checked by load_scenario_file(), which
    // makes a TIMING_ONLY one into a synthetic `model`.
    if (s_.model_spec().empty()) error(root_(s_, "model_spec"), "name a model spec file");
    if (s_.fidelity() == scenario::TIMING_ONLY)
      error(root_(s_, "model_spec"), "a TIMING_ONLY model spec is timed as the synthetic model it describes: "
                                     "load the scenario with load_scenario_file()");
    return;
  }
  if (!s_.has_model()) {
    error(root_(s_, "model"),
          "missing: give a workload, `tutorial {}`, `model { variable { ... } }` or `model_spec: \"FILE\"`");
    return;
  }
  const auto& m = s_.model();
  const Path p = root_(s_, "model");
  if (m.variable_size() == 0) error(p, "declare at least one variable");
  auto partitioner_ok = [&](const Path& pp, const scenario::Partitioner& pt) {
    Status st = absl::OkStatus();
    switch (pt.kind_case()) {
      case scenario::Partitioner::kFixedShards:
        st = FixedShardsPartitioner::create(pt.fixed_shards()).status();
        if (!st.ok()) error(pp(pt, "fixed_shards"), std::string(st.message()));
        break;
      case scenario::Partitioner::kMinSize:
        st = MinSizePartitioner::create(pt.min_size().min_shard_bytes(), pt.min_size().max_shards()).status();
        if (!st.ok()) error(pp(pt, "min_size"), std::string(st.message()));
        break;
      case scenario::Partitioner::kMaxSize:
        if (!pt.max_size().has_max_shard_bytes()) {
          error(pp(pt, "max_size"), "max_shard_bytes is required");
          break;
        }
        st = MaxSizePartitioner::create(pt.max_size().max_shard_bytes(),
                                        pt.max_size().has_max_shards() ? std::optional<std::int64_t>(pt.max_size().max_shards())
                                                                       : std::nullopt)
                 .status();
        if (!st.ok()) error(pp(pt, "max_size"), std::string(st.message()));
        break;
      case scenario::Partitioner::KIND_NOT_SET:
        error(pp, "choose fixed_shards, min_size or max_size");
    }
  };
  for (int i = 0; i < m.variable_size(); ++i) {
    const auto& v = m.variable(i);
    const Path vp = p(m, "variable", i);
    if (v.name().empty()) {
      error(vp(v, "name"), "a variable needs a name");
    } else if (v.name() == "iterations" || v.name() == "do_infinite_step") {
      error(vp(v, "name"), "\"" + v.name() + "\" is created by the simulator; choose another name");
    } else if (!variables_.insert(v.name()).second) {
      error(vp(v, "name"), "a second variable is named \"" + v.name() + "\"");
    }
    std::int64_t elements = 1;
    for (int d = 0; d < v.shape_size(); ++d) {
      if (v.shape(d) < 1) {
        error(vp(v, "shape", d), "dimension " + std::to_string(d) + " is " + std::to_string(v.shape(d)) +
                                     "; every dimension must be at least 1");
        elements = 0;
        break;
      }
      if (elements > (std::int64_t{1} << 50) / v.shape(d)) {
        error(vp(v, "shape", d), "the variable has more than 2^50 elements");
        elements = 0;
        break;
      }
      elements *= v.shape(d);
    }
    if (s_.fidelity() == scenario::NUMERIC && elements > (std::int64_t{1} << 26))
      error(vp(v, "shape"), "a variable of " + std::to_string(elements) +
                                " elements is too big to hold in memory for NUMERIC fidelity; use TIMING_ONLY");
    if (v.rows_per_step() < 0) error(vp(v, "rows_per_step"), "must not be negative");
    if (v.rows_per_step() > 0 && v.shape_size() == 0) error(vp(v, "rows_per_step"), "a scalar has no rows to look up");
    if (v.has_partitioner()) partitioner_ok(vp(v, "partitioner"), v.partitioner());
    if (!(v.zipf_exponent() >= 0) || v.zipf_exponent() > 10) error(vp(v, "zipf_exponent"), "must be in [0, 10]");
  }
  if (m.has_partitioner()) partitioner_ok(p(m, "partitioner"), m.partitioner());
  if (m.has_optimizer()) positive(p(m, "optimizer")(m.optimizer(), "learning_rate"), m.optimizer().learning_rate(), "learning_rate");
  if (m.batch_size() < 1) error(p(m, "batch_size"), "must be at least 1");
  if (m.steps_per_closure() < 1) error(p(m, "steps_per_closure"), "must be at least 1");
  if (!(m.step_gflops() >= 0)) error(p(m, "step_gflops"), "must not be negative");
  for (int i = 0; i < m.step_kernel_size(); ++i) {
    const auto& k = m.step_kernel(i);
    const Path kp = p(m, "step_kernel", i);
    if (k.kind().empty()) error(kp(k, "kind"), "a kernel needs a kind");
    if (!(k.flops() >= 0)) error(kp(k, "flops"), "must not be negative");
    if (!(k.bytes() >= 0)) error(kp(k, "bytes"), "must not be negative");
    if (!(k.inputs() >= 0)) error(kp(k, "inputs"), "must not be negative");
    if (!(k.records() >= 0)) error(kp(k, "records"), "must not be negative");
  }
  if (m.examples_per_epoch() < 0) error(p(m, "examples_per_epoch"), "must not be negative");
  if (m.examples_per_epoch() > (std::int64_t{1} << 24))
    error(p(m, "examples_per_epoch"), "at most 2^24 examples (each has a row of the visits variable)");
  // A model file of its own (`twinps serve --model`) runs wherever it is
  // sent: only a scenario says how much is computed.
  if (m.examples_per_epoch() > 0 && !model_only_ && s_.fidelity() != scenario::NUMERIC)
    error(p(m, "examples_per_epoch"), "example ids need NUMERIC fidelity (a TIMING_ONLY step reads no data)");
  if (m.visitation() == scenario::EXACTLY_ONCE) exactly_once_fits(p(m, "visitation"));
  if (m.visitation() == scenario::EXACTLY_ONCE && m.examples_per_epoch() <= 0)
    error(p(m, "visitation"), "EXACTLY_ONCE needs examples_per_epoch (the examples to cut into splits)");
  if (m.visitation() == scenario::EXACTLY_ONCE && m.steps_per_closure() != 1)
    error(p(m, "visitation"), "EXACTLY_ONCE gives each closure one step's split: steps_per_closure must be 1");
}

void Validator::compute() {
  if (!s_.has_compute()) return;
  const auto& c = s_.compute();
  const Path p = root_(s_, "compute");
  if (c.has_step_time()) distribution_ok(p(c, "step_time"), c.step_time());
  time_ok(p(c, "per_example_s"), c.per_example_s(), "per_example_s");
  time_ok(p(c, "per_gflop_s"), c.per_gflop_s(), "per_gflop_s");
  for (int i = 0; i < c.kernel_size(); ++i) {
    const auto& k = c.kernel(i);
    const Path kp = p(c, "kernel", i);
    if (k.kind().empty()) error(kp(k, "kind"), "a kernel price needs its kind");
    time_ok(kp(k, "per_call_us"), k.per_call_us(), "per_call_us");
    time_ok(kp(k, "per_gflop_s"), k.per_gflop_s(), "per_gflop_s");
    time_ok(kp(k, "per_gib_s"), k.per_gib_s(), "per_gib_s");
    time_ok(kp(k, "per_ginput_s"), k.per_ginput_s(), "per_ginput_s");
    time_ok(kp(k, "per_record_us"), k.per_record_us(), "per_record_us");
    time_ok(kp(k, "per_gflop_per_doubling_s"), k.per_gflop_per_doubling_s(), "per_gflop_per_doubling_s");
    if (!(k.cache_bytes() >= 0) || !std::isfinite(k.cache_bytes()))
      error(kp(k, "cache_bytes"), "cache_bytes must be a finite size >= 0");
  }
  if (profile_only_ && c.straggler_size() > 0) {
    error(p(c, "straggler", 0), "a cost profile describes every worker alike; stragglers belong in a scenario");
    return;
  }
  for (int i = 0; i < c.straggler_size(); ++i) {
    const Path sp = p(c, "straggler", i);
    worker_ok(sp(c.straggler(i), "worker"), c.straggler(i).worker());
    positive(sp(c.straggler(i), "factor"), c.straggler(i).factor(), "factor");
  }
}

void Validator::service() {
  if (!s_.has_ps_service()) return;
  const auto& v = s_.ps_service();
  const Path p = root_(s_, "ps_service");
  time_ok(p(v, "per_request_us"), v.per_request_us(), "per_request_us");
  if (v.has_per_request_on_busy_host_us())
    time_ok(p(v, "per_request_on_busy_host_us"), v.per_request_on_busy_host_us(), "per_request_on_busy_host_us");
  if (v.has_per_request_when_awake_us())
    time_ok(p(v, "per_request_when_awake_us"), v.per_request_when_awake_us(), "per_request_when_awake_us");
  interval_curve(p, v, "per_request_by_idle", v.per_request_by_idle());
  time_ok(p(v, "per_kib_us"), v.per_kib_us(), "per_kib_us");
  time_ok(p(v, "per_row_us"), v.per_row_us(), "per_row_us");
  if (v.threads() < 1) error(p(v, "threads"), "must be at least 1");
  time_ok(p(v, "per_item_us"), v.per_item_us(), "per_item_us");
  time_ok(p(v, "per_item_by_id_us"), v.per_item_by_id_us(), "per_item_by_id_us");
  time_ok(p(v, "per_row_kib_us"), v.per_row_kib_us(), "per_row_kib_us");
  bytes_curve(p, v);
  for (int i = 0; i < v.apply_size(); ++i) {
    const auto& a = v.apply(i);
    const Path ap = p(v, "apply", i);
    time_ok(ap(a, "per_kib_us"), a.per_kib_us(), "per_kib_us");
    time_ok(ap(a, "per_row_pushed_us"), a.per_row_pushed_us(), "per_row_pushed_us");
    time_ok(ap(a, "per_row_pushed_kib_us"), a.per_row_pushed_kib_us(), "per_row_pushed_kib_us");
    time_ok(ap(a, "per_item_pushed_by_id_us"), a.per_item_pushed_by_id_us(), "per_item_pushed_by_id_us");
    bytes_curve(ap, a);
  }
}

void Validator::hosts() {
  if (!s_.has_hosts()) return;
  const auto& h = s_.hosts();
  const Path p = root_(s_, "hosts");
  if (h.tasks_per_host() < 1) error(p(h, "tasks_per_host"), "must be at least 1");
  if (!(h.cores() >= 0)) error(p(h, "cores"), "must not be negative (0: a core for every thread)");
  if (!(h.tick_us() > 0) || !std::isfinite(h.tick_us())) error(p(h, "tick_us"), "must be positive (the kernel's tick, 1 / CONFIG_HZ)");
  if (!(h.duration_spread() >= 0 && h.duration_spread() <= 1))
    error(p(h, "duration_spread"), "must be within [0, 1] (a log-normal sigma; 0: every job takes exactly its price)");
  double last = 0;
  for (int i = 0; i < h.crowded_message_size(); ++i) {
    const auto& c = h.crowded_message(i);
    const Path cp = p(h, "crowded_message", i);
    if (!(c.tasks_per_core() > last) || !std::isfinite(c.tasks_per_core()))
      error(cp(c, "tasks_per_core"), "must be positive, finite and above the previous point's (got " +
                                         num(c.tasks_per_core()) + ")");
    time_ok(cp(c, "us"), c.us(), "us");
    last = c.tasks_per_core();
  }
}

void Validator::message_cpu(const Path& p, const scenario::MessageCpu& m) {
  time_ok(p(m, "per_message_us"), m.per_message_us(), "per_message_us");
  if (m.has_per_message_on_busy_host_us())
    time_ok(p(m, "per_message_on_busy_host_us"), m.per_message_on_busy_host_us(), "per_message_on_busy_host_us");
  time_ok(p(m, "per_item_us"), m.per_item_us(), "per_item_us");
  time_ok(p(m, "per_item_by_id_us"), m.per_item_by_id_us(), "per_item_by_id_us");
  time_ok(p(m, "per_row_us"), m.per_row_us(), "per_row_us");
  time_ok(p(m, "per_kib_us"), m.per_kib_us(), "per_kib_us");
  bytes_curve(p, m);
}

template <typename M>
void Validator::curve(const Path& p, const M& m, const char* field,
                      const google::protobuf::RepeatedPtrField<scenario::BytesCost>& points) {
  double last = 0;
  for (int i = 0; i < points.size(); ++i) {
    const auto& c = points[i];
    const Path cp = p(m, field, i);
    if (!(c.bytes() > last)) error(cp(c, "bytes"), "must be positive and above the previous point's (got " + num(c.bytes()) + ")");
    time_ok(cp(c, "us"), c.us(), "us");
    last = c.bytes();
  }
}

template <typename M>
void Validator::interval_curve(const Path& p, const M& m, const char* field,
                               const google::protobuf::RepeatedPtrField<scenario::IntervalCost>& points) {
  double last = -1;
  for (int i = 0; i < points.size(); ++i) {
    const auto& c = points[i];
    const Path cp = p(m, field, i);
    if (!(c.interval_us() > last) || !std::isfinite(c.interval_us()))
      error(cp(c, "interval_us"), "must be >= 0, finite and above the previous point's (got " + num(c.interval_us()) + ")");
    time_ok(cp(c, "us"), c.us(), "us");
    last = c.interval_us();
  }
}

void Validator::messages() {
  if (!s_.has_messages()) return;
  const auto& m = s_.messages();
  const Path p = root_(s_, "messages");
  if (m.has_data_send()) message_cpu(p(m, "data_send"), m.data_send());
  if (m.has_data_receive()) message_cpu(p(m, "data_receive"), m.data_receive());
  if (m.has_control_send()) message_cpu(p(m, "control_send"), m.control_send());
  if (m.has_control_receive()) message_cpu(p(m, "control_receive"), m.control_receive());
  curve(p, m, "data_request_overlap", m.data_request_overlap());
  curve(p, m, "data_reply_overlap", m.data_reply_overlap());
  curve(p, m, "data_assembly", m.data_assembly());
  interval_curve(p, m, "control_by_interval", m.control_by_interval());
  if (m.has_control_on_busy_host_us()) time_ok(p(m, "control_on_busy_host_us"), m.control_on_busy_host_us(), "control_on_busy_host_us");
}

void Validator::coordinator() {
  if (!s_.has_coordinator()) return;
  const auto& c = s_.coordinator();
  const Path p = root_(s_, "coordinator");
  positive(p(c, "heartbeat_interval_s"), c.heartbeat_interval_s(), "heartbeat_interval_s");
  positive(p(c, "heartbeat_timeout_s"), c.heartbeat_timeout_s(), "heartbeat_timeout_s");
  if (c.heartbeat_misses() < 1) error(p(c, "heartbeat_misses"), "must be at least 1");
  time_ok(p(c, "closure_timeout_s"), c.closure_timeout_s(), "closure_timeout_s");
  positive(p(c, "rpc_timeout_s"), c.rpc_timeout_s(), "rpc_timeout_s");
  positive(p(c, "ps_call_timeout_s"), c.ps_call_timeout_s(), "ps_call_timeout_s");
  if (c.queue_capacity() < 0) error(p(c, "queue_capacity"), "must not be negative");
  if (c.transient_timeouts() < -1) error(p(c, "transient_timeouts"), "must be -1 (workers / 10) or more");
  if (c.staleness_bound() < 0) error(p(c, "staleness_bound"), "must not be negative");
  if (c.has_staleness_bound() && c.mode() != scenario::SSP)
    error(p(c, "staleness_bound"), "is for mode SSP only");
  if (c.backup_workers() < 0) error(p(c, "backup_workers"), "must not be negative");
  else if (c.has_backup_workers() && c.mode() != scenario::SYNC) error(p(c, "backup_workers"), "is for mode SYNC only");
  else if (c.backup_workers() >= s_.cluster().workers())
    error(p(c, "backup_workers"), "must be fewer than the workers (" + std::to_string(s_.cluster().workers()) + ")");
  positive(p(c, "ps_recovery_wait_s"), c.ps_recovery_wait_s(), "ps_recovery_wait_s");
  if (c.has_ps_recovery_wait_s() && c.ps_failure() == scenario::RAISE)
    error(p(c, "ps_recovery_wait_s"), "is for ps_failure RESTORE or ROLLBACK only");
}

void Validator::program() {
  bool scheduled = false, paced = false;  // for `for_s`: a schedule, then a join, came before
  for (int i = 0; i < s_.program_size(); ++i) {
    const auto& a = s_.program(i);
    const Path p = root_(s_, "program", i);
    if (a.has_label()) {
      if (a.label().empty()) error(p(a, "label"), "a label must not be empty");
      else if (!labels_.emplace(a.label(), &a).second) error(p(a, "label"), "a second action is labelled \"" + a.label() + "\"");
    }
    switch (a.kind_case()) {
      case scenario::Action::kSchedule: {
        const auto& sc = a.schedule();
        const Path sp = p(a, "schedule");
        if (!s_.has_model()) error(sp, "schedule needs a synthetic `model`; the tutorial's program is `train {}`");
        if (sc.function() != "train" && sc.function() != "fail")
          error(sp(sc, "function"), "unknown function \"" + sc.function() + "\" (choose \"train\" or \"fail\")");
        if (sc.count() < 1) error(sp(sc, "count"), "must be at least 1");
        time_ok(sp(sc, "extra_s"), sc.extra_s(), "extra_s");
        if (sc.has_for_s()) {
          time_ok(sp(sc, "for_s"), sc.for_s(), "for_s");
          if (sc.has_count()) error(sp(sc, "for_s"), "give either count or for_s, not both");
          if (!paced) error(sp(sc, "for_s"), "needs a schedule action and a join before it, to measure the pace");
        }
        scheduled = true;
        break;
      }
      case scenario::Action::kSleepS: time_ok(p(a, "sleep_s"), a.sleep_s(), "sleep_s"); break;
      case scenario::Action::kSetInfiniteStep:
        if (!s_.has_model()) error(p(a, "set_infinite_step"), "needs a synthetic `model`");
        break;
      case scenario::Action::kTrain:
        if (!s_.has_tutorial() && !s_.has_model_spec())
          error(p(a, "train"), "train {} runs the tutorial or a model spec; this scenario has a synthetic `model`");
        break;
      case scenario::Action::kJoin: paced = paced || scheduled; break;
      case scenario::Action::kDone: break;
      case scenario::Action::KIND_NOT_SET: error(p, "an action needs a kind (schedule, join, done, sleep_s, ...)");
    }
  }
  if (s_.program_size() == 0 && s_.has_model()) error(root_(s_, "program"), "a synthetic model needs a program");
}

void Validator::faults() {
  for (int i = 0; i < s_.fault_size(); ++i) {
    const auto& f = s_.fault(i);
    const Path p = root_(s_, "fault", i);
    if (!f.has_at_s()) error(p, "at_s (when the fault starts) is required");
    time_ok(p(f, "at_s"), f.at_s(), "at_s");
    if (f.has_duration_s()) positive(p(f, "duration_s"), f.duration_s(), "duration_s");
    switch (f.kind_case()) {
      case scenario::Fault::kKillWorker: worker_ok(p(f, "kill_worker"), f.kill_worker()); break;
      case scenario::Fault::kKillPs: ps_ok(p(f, "kill_ps"), f.kill_ps()); break;
      case scenario::Fault::kKillCoordinator:
        if (!f.has_duration_s())
          error(p(f, "kill_coordinator"), "needs duration_s: when the coordinator program restarts");
        break;
      case scenario::Fault::kPartition: {
        const auto& pa = f.partition();
        const Path pp = p(f, "partition");
        if (pa.a_size() == 0) error(pp, "side `a` needs at least one task");
        std::set<std::string> seen;
        for (int k = 0; k < pa.a_size(); ++k) {
          task_ok(pp(pa, "a", k), pa.a(k));
          seen.insert(pa.a(k));
        }
        for (int k = 0; k < pa.b_size(); ++k) {
          task_ok(pp(pa, "b", k), pa.b(k));
          if (seen.count(pa.b(k))) error(pp(pa, "b", k), "\"" + pa.b(k) + "\" is on both sides");
        }
        break;
      }
      case scenario::Fault::kStraggler:
        worker_ok(p(f, "straggler")(f.straggler(), "worker"), f.straggler().worker());
        positive(p(f, "straggler")(f.straggler(), "factor"), f.straggler().factor(), "factor");
        break;
      case scenario::Fault::kSlowLink:
        task_ok(p(f, "slow_link")(f.slow_link(), "task"), f.slow_link().task());
        if (!(f.slow_link().factor() >= 1)) error(p(f, "slow_link")(f.slow_link(), "factor"), "must be at least 1");
        break;
      case scenario::Fault::kHotspot:
        if (!s_.has_model()) {
          error(p(f, "hotspot"), "needs a synthetic `model`");
        } else if (!variables_.count(f.hotspot().variable())) {
          error(p(f, "hotspot")(f.hotspot(), "variable"),
                "unknown variable \"" + f.hotspot().variable() + "\" (the model declares " +
                    [&] {
                      std::string names;
                      for (const auto& n : variables_) names += (names.empty() ? "" : ", ") + n;
                      return names.empty() ? std::string("none") : names;
                    }() +
                    ")");
        }
        break;
      case scenario::Fault::kPause:
        task_ok(p(f, "pause"), f.pause());
        break;
      case scenario::Fault::KIND_NOT_SET:
        error(p, "a fault needs a kind (kill_worker, kill_ps, kill_coordinator, partition, straggler, slow_link, "
                 "hotspot, pause)");
    }
  }
  if (s_.has_random_faults()) {
    const auto& r = s_.random_faults();
    const Path p = root_(s_, "random_faults");
    if (r.count() < 0) error(p(r, "count"), "must not be negative");
    if (r.count() > 0 && r.kind_size() == 0) error(p(r, "kind"), "name the kinds of fault to draw");
    if (time_ok(p(r, "start_s"), r.start_s(), "start_s") && !(r.end_s() > r.start_s()))
      error(p(r, "end_s"), "must be after start_s");
    if (time_ok(p(r, "min_duration_s"), r.min_duration_s(), "min_duration_s") &&
        !(r.max_duration_s() >= r.min_duration_s()))
      error(p(r, "max_duration_s"), "must be at least min_duration_s");
    for (int k = 0; k < r.kind_size(); ++k)
      if (r.kind(k) == scenario::RandomFaults::COORDINATOR_CRASH && !(r.min_duration_s() > 0))
        error(p(r, "min_duration_s"), "a coordinator crash needs a restart delay above 0");
  }
  if (s_.has_message_faults()) {
    const auto& m = s_.message_faults();
    const Path p = root_(s_, "message_faults");
    auto probability = [&](const char* field, double v) {
      if (!(v >= 0 && v <= 1)) error(p(m, field), std::string(field) + " must be a probability, from 0 to 1 (got " + num(v) + ")");
    };
    probability("duplicate", m.duplicate());
    probability("delay", m.delay());
    probability("drop_request", m.drop_request());
    probability("drop_reply", m.drop_reply());
    if (time_ok(p(m, "max_delay_s"), m.max_delay_s(), "max_delay_s") && !std::isfinite(m.max_delay_s()))
      error(p(m, "max_delay_s"), "must be finite");
    positive(p(m, "loss_detection_s"), m.loss_detection_s(), "loss_detection_s");
  }
}

void Validator::expectations() {
  auto label_ok = [&](const Path& p, const std::string& label, bool schedule_only) -> const scenario::Action* {
    auto it = labels_.find(label);
    if (it == labels_.end()) {
      error(p, "no action is labelled \"" + label + "\"");
      return nullptr;
    }
    if (schedule_only && !it->second->has_schedule()) {
      error(p, "\"" + label + "\" is not a schedule action");
      return nullptr;
    }
    return it->second;
  };
  for (int i = 0; i < s_.expect_size(); ++i) {
    const auto& e = s_.expect(i);
    const Path p = root_(s_, "expect", i);
    switch (e.kind_case()) {
      case scenario::Expectation::kAllClosuresResolved:
      case scenario::Expectation::kClosuresAccounted:
      case scenario::Expectation::kInvariants: break;
      case scenario::Expectation::kStat: bounds_ok(p(e, "stat"), e.stat()); break;
      case scenario::Expectation::kRaised:
        if (e.raised().code_size() == 0) error(p(e, "raised"), "name at least one code");
        break;
      case scenario::Expectation::kOutcome: {
        const Path op = p(e, "outcome");
        label_ok(op(e.outcome(), "label"), e.outcome().label(), false);
        if (e.outcome().code_size() == 0) error(op, "name at least one code");
        break;
      }
      case scenario::Expectation::kRemoteValue: {
        const auto& rv = e.remote_value();
        const Path rp = p(e, "remote_value");
        if (const auto* a = label_ok(rp(rv, "label"), rv.label(), true)) {
          if (rv.index() < 0 || rv.index() >= a->schedule().count())
            error(rp(rv, "index"), "index " + std::to_string(rv.index()) + " is out of range: \"" + rv.label() +
                                       "\" schedules " + std::to_string(a->schedule().count()));
        }
        if (rv.code_size() == 0) error(rp, "name at least one code");
        break;
      }
      case scenario::Expectation::kAccuracy:
        if (!s_.has_tutorial() && !s_.has_model_spec())
          error(p(e, "accuracy"), "accuracy is measured by the trainer (the tutorial or a model spec)");
        bounds_ok(p(e, "accuracy"), e.accuracy());
        break;
      case scenario::Expectation::kResumedAtEpoch:
        if (!s_.has_tutorial() && !s_.has_model_spec())
          error(p(e, "resumed_at_epoch"), "epochs belong to the trainer (the tutorial or a model spec)");
        bounds_ok(p(e, "resumed_at_epoch"), e.resumed_at_epoch());
        break;
      case scenario::Expectation::kIterations: {
        const Path ip = p(e, "iterations");
        if (e.iterations().has_after()) label_ok(ip(e.iterations(), "after"), e.iterations().after(), false);
        bounds_ok(ip, e.iterations());
        break;
      }
      case scenario::Expectation::kDatasetRebuilt:
        worker_ok(p(e, "dataset_rebuilt")(e.dataset_rebuilt(), "worker"), e.dataset_rebuilt().worker());
        break;
      case scenario::Expectation::kPsUtilisation:
        ps_ok(p(e, "ps_utilisation")(e.ps_utilisation(), "ps"), e.ps_utilisation().ps());
        bounds_ok(p(e, "ps_utilisation"), e.ps_utilisation());
        break;
      case scenario::Expectation::kWorkerClosures:
        worker_ok(p(e, "worker_closures")(e.worker_closures(), "worker"), e.worker_closures().worker());
        bounds_ok(p(e, "worker_closures"), e.worker_closures());
        break;
      case scenario::Expectation::kStepTime: {
        const auto& st = e.step_time();
        const Path sp = p(e, "step_time");
        if (st.has_worker()) worker_ok(sp(st, "worker"), st.worker());
        if (!(st.quantile() > 0 && st.quantile() <= 1)) error(sp(st, "quantile"), "must be in (0, 1]");
        bounds_ok(sp, st);
        break;
      }
      case scenario::Expectation::kMaxStaleness:
        bounds_ok(p(e, "max_staleness"), e.max_staleness());
        break;
      case scenario::Expectation::kVisitsPerExample: {
        const auto& v = e.visits_per_example();
        const Path vp = p(e, "visits_per_example");
        const bool counted = (s_.has_model() && s_.model().examples_per_epoch() > 0) ||
                             (s_.has_tutorial() && s_.tutorial().visitation() == scenario::EXACTLY_ONCE) ||
                             s_.has_model_spec();
        if (!counted)
          error(vp, "visits are counted for a synthetic `model` with examples_per_epoch, the tutorial with "
                    "visitation EXACTLY_ONCE, or a model spec trained with training.visitation \"exactly_once\"");
        label_ok(vp(v, "after"), v.after(), false);
        bounds_ok(vp, v);
        break;
      }
      case scenario::Expectation::KIND_NOT_SET: error(p, "an expectation needs a kind");
    }
  }
}

}  // namespace

std::vector<ScenarioError> validate_scenario(const Scenario& s, const std::string& file) {
  std::vector<ScenarioError> errors;
  Validator(s, file, nullptr, errors).run();
  return errors;
}

void apply_profile(const scenario::CostProfile& profile, Scenario& s) {
  // MergeFrom copies the fields set in its argument: the profile's first, then
  // the scenario's over them.
  auto merge = [](const auto& from_profile, auto* in_scenario) {
    auto merged = from_profile;
    merged.MergeFrom(*in_scenario);
    *in_scenario = std::move(merged);
  };
  if (profile.has_network()) merge(profile.network(), s.mutable_network());
  if (profile.has_compute()) merge(profile.compute(), s.mutable_compute());
  if (profile.has_ps_service()) merge(profile.ps_service(), s.mutable_ps_service());
  if (profile.has_messages()) merge(profile.messages(), s.mutable_messages());
  if (profile.has_hosts()) merge(profile.hosts(), s.mutable_hosts());
}

namespace {

// Reads the scenario's `cost_profile` (relative to the scenario's directory)
// and merges it in. A file that cannot be read is reported at the scenario's
// `cost_profile` field; what is wrong inside it, at its own line:column.
void include_profile(Scenario& s, const std::string& file, const pb::TextFormat::ParseInfoTree& tree,
                     std::vector<ScenarioError>& errors) {
  const auto loc = tree.GetLocation(Scenario::descriptor()->FindFieldByName("cost_profile"), -1);
  auto at_field = [&](const std::string& message) {
    errors.push_back(ScenarioError{file, loc.line + 1, loc.column + 1, "cost_profile", message});
  };
  if (s.cost_profile().empty()) {
    at_field("must name a cost profile file");
    return;
  }
  std::filesystem::path path(s.cost_profile());
  if (path.is_relative()) path = std::filesystem::path(file).parent_path() / path;
  LoadedProfile loaded = load_profile_file(path.string());
  for (auto& e : loaded.errors) {
    if (e.line == 0) {
      at_field("\"" + s.cost_profile() + "\" (" + path.string() + "): " + e.message);
    } else {
      errors.push_back(std::move(e));
    }
  }
  if (loaded.ok()) apply_profile(loaded.profile, s);
}

// Reads the scenario's `model_spec` (relative to the scenario's directory,
// or `model_spec_override` relative to the working directory) and leaves
// its path resolved in the scenario. A TIMING_ONLY spec becomes the
// synthetic `model` that times it (sim/spec_workload.h). A spec's own
// errors name the spec file at their line:column; a file that cannot be
// read, the scenario's `model_spec` field.
void include_model_spec(Scenario& s, const std::string& file, const pb::TextFormat::ParseInfoTree& tree,
                        const std::string& model_spec_override, std::vector<ScenarioError>& errors) {
  const bool overridden = !model_spec_override.empty();
  const auto loc = tree.GetLocation(Scenario::descriptor()->FindFieldByName("model_spec"), -1);
  auto at_field = [&](const std::string& message) {
    if (overridden) {
      errors.push_back(ScenarioError{model_spec_override, 0, 0, "", message});
    } else {
      errors.push_back(ScenarioError{file, loc.line + 1, loc.column + 1, "model_spec", message});
    }
  };
  std::filesystem::path path(overridden ? model_spec_override : s.model_spec());
  if (path.empty()) {
    at_field("must name a model spec file");
    return;
  }
  if (!overridden && path.is_relative()) path = std::filesystem::path(file).parent_path() / path;
  s.set_model_spec(path.string());
  model::LoadedSpec loaded = model::load_model_spec_file(path.string());
  if (!loaded.ok()) {
    for (auto& e : loaded.errors) errors.push_back(std::move(e));
    return;
  }
  if (s.fidelity() != scenario::TIMING_ONLY) return;
  auto compiled = model::CompiledModel::compile(loaded.spec);
  StatusOr<scenario::SyntheticModel> timed =
      compiled.ok() ? synthetic_model_of(**compiled) : StatusOr<scenario::SyntheticModel>(compiled.status());
  if (!timed.ok()) {
    const std::string message(timed.status().message());
    at_field(overridden ? message : path.string() + ": " + message);
    return;
  }
  *s.mutable_model() = std::move(*timed);
}

}  // namespace

LoadedScenario parse_scenario(std::string_view text, const std::string& file, const std::string& model_spec) {
  LoadedScenario out;
  pb::TextFormat::ParseInfoTree tree;
  if (!config::parse_text_proto(text, file, "scenario", out.scenario, tree, out.errors)) return out;
  if (out.scenario.has_cost_profile()) include_profile(out.scenario, file, tree, out.errors);
  if (out.scenario.has_model_spec() || !model_spec.empty()) {
    include_model_spec(out.scenario, file, tree, model_spec, out.errors);
    if (!out.errors.empty()) return out;
  }
  Validator(out.scenario, file, &tree, out.errors).run();
  return out;
}

LoadedScenario load_scenario_file(const std::string& path, const std::string& model_spec) {
  LoadedScenario out;
  auto text = config::read_text_file(path, "scenario", out.errors);
  if (!text) return out;
  return parse_scenario(*text, path, model_spec);
}

LoadedModel parse_model(std::string_view text, const std::string& file) {
  LoadedModel out;
  pb::TextFormat::ParseInfoTree tree;
  if (!config::parse_text_proto(text, file, "model", out.model, tree, out.errors)) return out;
  Scenario holder;
  holder.set_fidelity(scenario::TIMING_ONLY);  // how big a variable may be depends on where the model runs
  *holder.mutable_model() = out.model;
  Validator(holder, file, &tree, out.errors).run_model_only();
  return out;
}

LoadedModel load_model_file(const std::string& path) {
  LoadedModel out;
  auto text = config::read_text_file(path, "model", out.errors);
  if (!text) return out;
  return parse_model(*text, path);
}

LoadedProfile parse_profile(std::string_view text, const std::string& file) {
  LoadedProfile out;
  pb::TextFormat::ParseInfoTree tree;
  if (!config::parse_text_proto(text, file, "cost profile", out.profile, tree, out.errors)) return out;
  Scenario holder;  // the Validator checks a scenario's costs; hold the profile's in one
  if (out.profile.has_network()) *holder.mutable_network() = out.profile.network();
  if (out.profile.has_compute()) *holder.mutable_compute() = out.profile.compute();
  if (out.profile.has_ps_service()) *holder.mutable_ps_service() = out.profile.ps_service();
  if (out.profile.has_messages()) *holder.mutable_messages() = out.profile.messages();
  if (out.profile.has_hosts()) *holder.mutable_hosts() = out.profile.hosts();
  Validator(holder, file, &tree, out.errors).run_profile_only();
  if (out.profile.has_data_plane() && !known_data_plane(out.profile.data_plane())) {
    const auto loc = tree.GetLocation(scenario::CostProfile::descriptor()->FindFieldByName("data_plane"), -1);
    out.errors.push_back(ScenarioError{file, loc.line + 1, loc.column + 1, "data_plane",
                                       std::string("must be ") + kDataPlaneNames + ", not \"" +
                                           out.profile.data_plane() + "\""});
  }
  return out;
}

LoadedProfile load_profile_file(const std::string& path) {
  LoadedProfile out;
  auto text = config::read_text_file(path, "cost profile", out.errors);
  if (!text) return out;
  return parse_profile(*text, path);
}

}  // namespace twinps::sim
