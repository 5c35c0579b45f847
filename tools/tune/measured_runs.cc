#include "tools/tune/measured_runs.h"

#include <fstream>
#include <map>

#include <google/protobuf/text_format.h>

#include "sim/scenario_loader.h"
#include "tools/cli.h"

namespace twinps::cli {
namespace {

namespace pb = google::protobuf;
using config::FieldPath;

scenario::MeasuredRound to_proto(const MeasuredRun& run) {
  scenario::MeasuredRound out;
  const RealRunResult& r = run.result;
  out.set_warmup(r.warmup);
  out.set_measured(r.measured);
  out.set_measured_steps(r.measured_steps);
  out.set_seconds(r.seconds);
  out.set_steps_per_second(r.steps_per_second);
  for (const auto& [task, cpu] : r.cpu_s) {
    auto* t = out.add_task();
    t->set_job(std::string(job_name(task.job)));
    t->set_index(task.index);
    t->set_cpu_s(cpu);
    if (auto it = r.run_delay_s.find(task); it != r.run_delay_s.end()) t->set_run_delay_s(it->second);
  }
  *out.mutable_speed_before() = run.before;
  *out.mutable_speed_after() = run.after;
  return out;
}

MeasuredRun from_proto(const scenario::MeasuredRound& in) {
  MeasuredRun run;
  RealRunResult& r = run.result;
  r.warmup = in.warmup();
  r.measured = in.measured();
  r.measured_steps = in.measured_steps();
  r.seconds = in.seconds();
  r.steps_per_second = in.steps_per_second();
  for (const auto& t : in.task()) {
    const TaskId task{*parse_job(t.job()), t.index()};  // checked by the loader
    r.cpu_s[task] = t.cpu_s();
    r.run_delay_s[task] = t.run_delay_s();
  }
  run.before = in.speed_before();
  run.after = in.speed_after();
  return run;
}

// Semantic checks of a parsed file, each at its field's position.
class Checker {
 public:
  Checker(const scenario::MeasuredRuns& runs, const std::string& file, const pb::TextFormat::ParseInfoTree& tree,
          std::vector<config::TextProtoError>& errors)
      : runs_(runs), file_(file), tree_(tree), errors_(errors) {}

  void run() {
    if (!sim::known_data_plane(runs_.data_plane()))
      fail(root_(runs_, "data_plane"),
           std::string("must be ") + sim::kDataPlaneNames + ", not \"" + runs_.data_plane() + "\"");
    if (runs_.online_cores() < 1) fail(root_(runs_, "online_cores"), "must be at least 1");
    if (runs_.config_size() == 0) fail(root_(runs_, "config"), "no configuration: nothing to predict");
    for (int i = 0; i < runs_.config_size(); ++i) config(i);
  }

 private:
  void fail(const FieldPath& path, const std::string& message) {
    errors_.push_back(config::error_at(file_, &tree_, path, message));
  }

  void config(int i) {
    const scenario::MeasuredConfig& c = runs_.config(i);
    const FieldPath at = root_(runs_, "config", i);
    if (c.model_name().empty()) fail(at(c, "model_name"), "must name the model");
    if (c.workers() < 1) fail(at(c, "workers"), "must be at least 1");
    if (c.ps() < 1) fail(at(c, "ps"), "must be at least 1");
    if (c.shards() < 1) fail(at(c, "shards"), "must be at least 1");
    if (c.straggler() < 0) fail(at(c, "straggler"), "must not be negative");
    if (c.batch() < 0) fail(at(c, "batch"), "must not be negative");
    if (auto kind = sim::parse_partitioner_kind(c.partitioner()); !kind.ok())
      fail(at(c, "partitioner"), std::string(kind.status().message()));
    // The model as the simulator will read it: the checks a model file gets.
    std::string text;
    pb::TextFormat::PrintToString(c.model(), &text);
    for (const auto& e : sim::parse_model(text, file_).errors)
      fail(at(c, "model"), (e.field.empty() ? "" : e.field + ": ") + e.message);
    if (c.round_size() == 0) fail(at(c, "round"), "no round: nothing was measured");
    for (int k = 0; k < c.round_size(); ++k) round(at(c, "round", k), c.round(k));
  }

  void round(const FieldPath& at, const scenario::MeasuredRound& r) {
    if (r.warmup() < 0) fail(at(r, "warmup"), "must not be negative");
    if (r.measured() < 1) fail(at(r, "measured"), "must be at least 1");
    if (r.measured_steps() < 1) fail(at(r, "measured_steps"), "must be at least 1");
    if (!(r.seconds() > 0)) fail(at(r, "seconds"), "must be positive");
    if (!(r.steps_per_second() > 0)) fail(at(r, "steps_per_second"), "must be positive");
    for (int t = 0; t < r.task_size(); ++t) {
      const auto& task = r.task(t);
      const FieldPath where = at(r, "task", t);
      if (!parse_job(task.job())) fail(where(task, "job"), "must be chief, worker or ps, not \"" + task.job() + "\"");
      if (task.index() < 0) fail(where(task, "index"), "must not be negative");
      if (task.cpu_s() < 0) fail(where(task, "cpu_s"), "must not be negative");
      if (task.run_delay_s() < 0) fail(where(task, "run_delay_s"), "must not be negative");
    }
    speed(at(r, "speed_before"), r.speed_before());
    speed(at(r, "speed_after"), r.speed_after());
  }

  // A probe of 0 would divide the profile's prices by nothing (speed_ratios).
  void speed(const FieldPath& at, const scenario::MachineSpeed& s) {
    if (!(s.compute_us() > 0)) fail(at(s, "compute_us"), "must be positive");
    if (!(s.together_slowdown() >= 1)) fail(at(s, "together_slowdown"), "must be at least 1");
    if (!(s.row_us() > 0)) fail(at(s, "row_us"), "must be positive");
    if (s.round_trip_us() < 0) fail(at(s, "round_trip_us"), "must not be negative");
  }

  const scenario::MeasuredRuns& runs_;
  const std::string& file_;
  const pb::TextFormat::ParseInfoTree& tree_;
  std::vector<config::TextProtoError>& errors_;
  const FieldPath root_;
};

Measurement from_proto(const scenario::MeasuredRuns& in) {
  Measurement m;
  m.data_plane = in.data_plane();
  m.online_cores = in.online_cores();
  m.measured_on = in.measured_on();
  std::map<std::string, int> model_index;
  for (const auto& c : in.config()) {
    auto [it, added] = model_index.emplace(c.model_name(), static_cast<int>(m.model_names.size()));
    if (added) m.model_names.push_back(c.model_name());
    GridRun run;
    run.config = {it->second,     c.workers(), c.ps(), *sim::parse_partitioner_kind(c.partitioner()),
                  c.shards(),     c.straggler(), c.batch()};
    run.model = c.model();
    for (const auto& r : c.round()) run.rounds.push_back(from_proto(r));
    m.runs.push_back(std::move(run));
  }
  return m;
}

}  // namespace

Status save_measurement(const Measurement& m, const std::string& path) {
  scenario::MeasuredRuns out;
  out.set_data_plane(m.data_plane);
  out.set_online_cores(m.online_cores);
  out.set_measured_on(m.measured_on);
  for (const GridRun& run : m.runs) {
    auto* c = out.add_config();
    c->set_model_name(m.model_names.at(static_cast<std::size_t>(run.config.model)));
    *c->mutable_model() = run.model;
    c->set_workers(run.config.workers);
    c->set_ps(run.config.ps);
    c->set_partitioner(sim::partitioner_name(run.config.kind));
    c->set_shards(run.config.shards);
    c->set_straggler(run.config.straggler);
    c->set_batch(run.config.batch);
    for (const MeasuredRun& r : run.rounds) *c->add_round() = to_proto(r);
  }
  std::string text;
  pb::TextFormat::PrintToString(out, &text);
  std::ofstream file(path, std::ios::trunc);
  file << "# twinps tune --validate --save-runs: predict these runs again with\n"
       << "#   twinps tune --validate --runs " << path << " --profile PROFILE\n"
       << text;
  if (!file.flush()) return absl::InvalidArgumentError("cannot write " + path);
  return absl::OkStatus();
}

LoadedMeasurement parse_measurement(std::string_view text, const std::string& file) {
  LoadedMeasurement out;
  scenario::MeasuredRuns runs;
  pb::TextFormat::ParseInfoTree tree;
  if (!config::parse_text_proto(text, file, "saved runs", runs, tree, out.errors)) return out;
  Checker(runs, file, tree, out.errors).run();
  if (out.ok()) out.measurement = from_proto(runs);
  return out;
}

LoadedMeasurement load_measurement(const std::string& path) {
  LoadedMeasurement out;
  auto text = config::read_text_file(path, "saved runs", out.errors);
  if (!text) return out;
  return parse_measurement(*text, path);
}

}  // namespace twinps::cli
