// twinps sim: run a scenario on the simulator, print its summary, check what
// it expects. Exit 0 when every expectation holds, 1 when one does not, 2 for
// bad input (the scenario file, an output path, a flag).
//
// The wall clock is read here, never in sim/: events per second and the
// simulated-to-wall-time ratio are the tool's measurements.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <google/protobuf/text_format.h>

#include "core/runtime/trace.h"
#include "sim/expectations.h"
#include "sim/generated_scenarios.h"
#include "sim/real_mode.h"
#include "sim/report.h"
#include "sim/resource_estimate.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"
#include "tools/cli.h"
#include "tools/data_dir.h"
#include "tools/commands/commands.h"
#include "tools/data_plane_flag.h"
#include "tools/real_scenario.h"
#include "tools/record_faults.h"
#include "tools/resource_limits.h"
#include "tools/subprocess.h"
#include "tools/training_flags.h"
#include "tools/training_report.h"

namespace twinps::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A one-line progress bar on stderr, for terminals and long runs only.
class ProgressBar {
 public:
  explicit ProgressBar(bool enabled) : enabled_(enabled && ::isatty(STDERR_FILENO)), start_(Clock::now()) {}
  void update(const sim::SimProgress& p) {
    if (!enabled_) return;
    const double wall = seconds_since(start_);
    if (wall < 1.0) return;  // short runs stay quiet
    // Closures done of those scheduled so far; before any, simulated time of the limit.
    const double fraction =
        p.scheduled > 0 ? static_cast<double>(p.completed) / static_cast<double>(p.scheduled)
        : p.limit > 0   ? std::min(1.0, static_cast<double>(p.now) / static_cast<double>(p.limit))
                        : 0;
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(fraction * kWidth);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r[%s] sim %.1f s  closures %llu/%llu  %.1f M events  %.2f M events/s ", bar.c_str(),
                 to_seconds(p.now), static_cast<unsigned long long>(p.completed),
                 static_cast<unsigned long long>(p.scheduled), static_cast<double>(p.events) / 1e6,
                 static_cast<double>(p.events) / 1e6 / wall);
    shown_ = true;
  }
  void finish() {
    if (shown_) std::fputs("\r\033[K", stderr);
  }

 private:
  bool enabled_;
  Clock::time_point start_;
  bool shown_ = false;
};

struct Measured {
  sim::SimResult result;
  double wall_s = 0;
};

Measured run_measured(const scenario::Scenario& s, sim::SimOptions options, bool progress) {
  ProgressBar bar(progress);
  options.progress = [&bar](const sim::SimProgress& p) { bar.update(p); };
  sim::Simulation simulation(s, std::move(options));
  const auto t0 = Clock::now();
  Measured m{simulation.run(), 0};
  m.wall_s = seconds_since(t0);
  bar.finish();
  return m;
}

void print_summary(const Measured& m) {
  Table t;
  for (auto& [k, v] : sim::summary_rows(m.result)) t.row(k, v);
  const double events_per_s = m.wall_s > 0 ? static_cast<double>(m.result.events) / m.wall_s : 0;
  t.row("wall time", format("%.3f s (%.2f M events/s)", m.wall_s, events_per_s / 1e6));
  // A speed-up is a result only for a run that got somewhere.
  if (m.wall_s > 0 && !sim::no_progress(m.result, false))
    t.row("simulated / wall time", format("%.1fx", to_seconds(m.result.end_time) / m.wall_s));
  std::printf("summary:\n");
  t.print();
}

int run_swarm(std::uint64_t first, std::uint64_t count) {
  std::uint64_t failed = 0, raised = 0, retried = 0, worker_failures = 0, restarts = 0, cancelled = 0;
  const auto t0 = Clock::now();
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    auto outcome = sim::run_swarm_seed(seed);
    raised += outcome.errors_raised > 0;
    retried += outcome.retried > 0;
    worker_failures += outcome.worker_failures > 0;
    restarts += outcome.coordinator_restarts > 0;
    cancelled += outcome.cancelled > 0;
    if (!outcome.violations.empty()) {
      ++failed;
      std::printf("seed %llu: %zu violation(s)\n", static_cast<unsigned long long>(seed), outcome.violations.size());
      for (const auto& v : outcome.violations) std::printf("  - %s\n", v.c_str());
    }
    if (::isatty(STDERR_FILENO) && (seed - first) % 50 == 0)
      std::fprintf(stderr, "\rswarm: %llu/%llu seeds", static_cast<unsigned long long>(seed - first + 1),
                   static_cast<unsigned long long>(count));
  }
  if (::isatty(STDERR_FILENO)) std::fputs("\r\033[K", stderr);
  std::printf("swarm: %llu seeds from %llu, %llu with violations, %.1f s\n", static_cast<unsigned long long>(count),
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(failed), seconds_since(t0));
  std::printf("runs with: an error raised %llu, closures retried %llu, closures cancelled %llu, worker failures %llu, "
              "coordinator restarts %llu\n",
              static_cast<unsigned long long>(raised), static_cast<unsigned long long>(retried),
              static_cast<unsigned long long>(cancelled), static_cast<unsigned long long>(worker_failures),
              static_cast<unsigned long long>(restarts));
  return failed == 0 ? kExitOk : kExitFailed;
}

// The flags that only a model spec trained by the simulator uses.
const char* const kSpecTrainingFlags[] = {
    "batch-size", "learning-rate", "shards", "init-seed", "epochs", "steps-per-epoch", "steps-per-execution",
    "eval-every", "eval-steps", "train-data", "train-labels", "eval-data", "eval-labels"};

// What a NUMERIC scenario's model spec trains: the spec with the flags'
// overrides, its data and the trainer's options, as `twinps train` builds
// them (null for any other scenario). Errors name the flag, file or record.
StatusOr<std::shared_ptr<const sim::SpecWorkload>> load_spec_workload(const scenario::Scenario& s,
                                                                      ModelFlags flags, const po::variables_map& vm) {
  const bool numeric_spec = s.has_model_spec() && s.fidelity() == scenario::NUMERIC;
  if (!numeric_spec) {
    for (const char* name : kSpecTrainingFlags)
      if (vm.count(name) && !vm[name].defaulted())
        return absl::InvalidArgumentError(
            std::string("--") + name +
            (s.fidelity() == scenario::TIMING_ONLY
                 ? " applies to a numeric simulation of a model spec; a TIMING_ONLY one times the spec file as it is"
                 : " applies to a scenario with a model spec (--model or model_spec)"));
    return std::shared_ptr<const sim::SpecWorkload>();
  }
  flags.model_path = s.model_spec();  // resolved by the loader
  auto run = load_model_run(flags, vm, /*need_train_data=*/true);
  if (!run.ok()) return run.status();
  auto w = std::make_shared<sim::SpecWorkload>();
  w->model = run->model;
  w->train = std::move(*run->train);
  w->eval = std::move(run->eval);
  w->options = run->options;
  w->mode = run->mode;
  w->staleness_bound = run->staleness_bound;
  w->backup_workers = run->backup_workers;
  w->ps_failure = run->ps_failure;
  w->ps_recovery_wait = run->ps_recovery_wait;
  return std::shared_ptr<const sim::SpecWorkload>(std::move(w));
}

// The training mode the simulated coordinator uses: --mode and
// --staleness-bound, else the scenario's coordinator.mode, else a numeric
// model spec's training.mode. Errors name the flag.
Status apply_training_mode(const po::variables_map& vm, const sim::SpecWorkload* spec, scenario::Scenario& s) {
  auto* co = s.mutable_coordinator();
  if (vm.count("mode")) {
    const std::string mode = vm["mode"].as<std::string>();
    if (mode != "async" && mode != "ssp" && mode != "sync")
      return absl::InvalidArgumentError("--mode must be async, ssp or sync, not '" + mode + "'");
    co->set_mode(mode == "ssp" ? scenario::SSP : mode == "sync" ? scenario::SYNC : scenario::ASYNC);
    co->clear_staleness_bound();
    co->clear_backup_workers();
  } else if (spec && !co->has_mode()) {
    co->set_mode(spec->mode == TrainingMode::kSsp    ? scenario::SSP
                 : spec->mode == TrainingMode::kSync ? scenario::SYNC
                                                     : scenario::ASYNC);
    if (spec->mode == TrainingMode::kSsp) co->set_staleness_bound(spec->staleness_bound);
    if (spec->mode == TrainingMode::kSync && spec->backup_workers > 0) co->set_backup_workers(spec->backup_workers);
  }
  if (vm.count("staleness-bound")) {
    const auto bound = vm["staleness-bound"].as<std::int64_t>();
    if (bound < 0) return absl::InvalidArgumentError("--staleness-bound must not be negative");
    if (co->mode() != scenario::SSP) return absl::InvalidArgumentError("--staleness-bound is for --mode ssp only");
    co->set_staleness_bound(bound);
  }
  if (vm.count("backup-workers")) {
    const auto backup = vm["backup-workers"].as<std::int64_t>();
    if (backup < 0) return absl::InvalidArgumentError("--backup-workers must not be negative");
    if (co->mode() != scenario::SYNC) return absl::InvalidArgumentError("--backup-workers is for --mode sync only");
    if (backup >= s.cluster().workers())
      return absl::InvalidArgumentError("--backup-workers (" + std::to_string(backup) +
                                        ") must be fewer than the workers (" + std::to_string(s.cluster().workers()) +
                                        ")");
    co->set_backup_workers(backup);
  }
  // The ps failure policy likewise: --ps-failure-policy, else the
  // scenario's coordinator.ps_failure, else the spec's training.ps_failure.
  auto to_scenario = [](PsFailurePolicy p) {
    return p == PsFailurePolicy::kRestore    ? scenario::RESTORE
           : p == PsFailurePolicy::kRollback ? scenario::ROLLBACK
                                             : scenario::RAISE;
  };
  if (vm.count("ps-failure-policy")) {
    const std::string policy = vm["ps-failure-policy"].as<std::string>();
    const auto parsed = parse_ps_failure_policy(policy);
    if (!parsed)
      return absl::InvalidArgumentError("--ps-failure-policy must be raise, restore or rollback, not '" + policy + "'");
    co->set_ps_failure(to_scenario(*parsed));
    if (*parsed == PsFailurePolicy::kRaise) co->clear_ps_recovery_wait_s();
  } else if (spec && !co->has_ps_failure() && spec->ps_failure != PsFailurePolicy::kRaise) {
    co->set_ps_failure(to_scenario(spec->ps_failure));
    co->set_ps_recovery_wait_s(to_seconds(spec->ps_recovery_wait));
  }
  return absl::OkStatus();
}

// Prints the expectations' results; returns how many failed (n/a ones neither
// pass nor fail, and say why).
int print_expectations(const std::vector<sim::ExpectationResult>& checks) {
  int failed = 0;
  std::printf("\nexpectations:\n");
  for (const auto& c : checks) {
    const char* mark = !c.applicable ? "n/a " : c.passed ? "ok  " : "FAIL";
    std::printf("  %s  %s  (%s%s)\n", mark, c.what.c_str(), c.applicable ? "observed: " : "", c.observed.c_str());
    failed += c.applicable && !c.passed ? 1 : 0;
  }
  return failed;
}

// --report FILE: checked before a run, so that a bad path fails at once,
// not after a long run. Empty: no report.
bool report_path_writable(const std::string& path) {
  if (path.empty()) return true;
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (!f) {
    std::fprintf(stderr, "twinps sim: --report: cannot open '%s' for writing\n", path.c_str());
    return false;
  }
  std::fclose(f);
  return true;
}

const char* mode_name(const scenario::Coordinator& co) {
  switch (co.mode()) {
    case scenario::SSP: return "ssp";
    case scenario::SYNC: return "sync";
    default: return "async";
  }
}

// --report FILE.json: what a run did, per epoch and in total, in the fields
// `twinps train --report` writes (tools/training_report.h), for a simulated
// and a real run (`real`) alike. Times count from the program's start.
bool write_report(const std::string& path, const scenario::Scenario& s, const sim::SpecWorkload* spec,
                  const sim::SimResult& r, bool real, double wall_s) {
  if (path.empty()) return true;
  const std::int64_t batch = spec && spec->model ? spec->model->batch_size() : s.model().batch_size();
  nlohmann::json j;
  j["run"] = real ? "real" : "simulated";
  j["scenario"] = r.name;
  j["seed"] = r.seed;
  j["workers"] = r.shape.workers;
  j["ps"] = r.shape.ps;
  j["mode"] = mode_name(s.coordinator());
  if (s.coordinator().mode() == scenario::SSP) j["staleness_bound"] = s.coordinator().staleness_bound();
  if (s.coordinator().mode() == scenario::SYNC) j["backup_workers"] = s.coordinator().backup_workers();
  j["batch_size"] = batch;
  j["finished"] = r.finished;
  j["end_time"] = to_seconds(r.end_time);
  j["wall_s"] = wall_s;
  if (r.final_iterations) j["iterations"] = *r.final_iterations;
  j["epochs"] = nlohmann::json::array();
  for (const auto& e : r.epochs) j["epochs"].push_back(epoch_json(e, batch));
  if (r.eval) j["eval"] = metrics_json(*r.eval);
  j["staleness"] = staleness_json(r.stats.staleness);
  j["stats"] = stats_json(r.stats);
  std::ofstream out(path);
  out << j.dump(1) << "\n";
  if (!out) {
    std::fprintf(stderr, "twinps sim: --report: cannot write '%s'\n", path.c_str());
    return false;
  }
  return true;
}

// `twinps sim --real SCENARIO`: the scenario on real processes of this
// machine; with `record_path`, what the coordinator observed written there as
// a scenario to replay.
int run_real(const std::string& path, const scenario::Scenario& s, const sim::SpecWorkload* spec,
             const std::string& report_path, const std::string& record_path, const std::string& data_plane) {
  if (s.has_sim_only()) {
    std::fprintf(stderr, "twinps sim: %s runs on the simulator only: %s\n", path.c_str(), s.sim_only().c_str());
    return kExitBadInput;
  }
  if (auto obstacles = sim::real_mode_obstacles(s); !obstacles.empty()) {
    for (const auto& o : obstacles) std::fprintf(stderr, "twinps sim: %s: --real: %s\n", path.c_str(), o.c_str());
    std::fprintf(stderr, "twinps sim: %s: mark it sim_only: \"why\" or change it\n", path.c_str());
    return kExitBadInput;
  }
  const std::string dir = make_temp_dir("twinps-real");
  sim::FaultRecorder recorder;
  RealScenarioOptions options;
  options.spec = spec;
  options.data_plane = data_plane;
  if (!record_path.empty()) options.recorder = &recorder;
  auto run = run_real_scenario(s, dir, options);
  std::error_code ignored;
  if (!run.ok()) {
    print_error("sim --real", run.status());
    std::fprintf(stderr, "twinps sim: the servers' logs are in %s\n", dir.c_str());
    return kExitFailed;
  }
  std::filesystem::remove_all(dir, ignored);
  Table t;
  t.row("mode", "real processes on this machine (wall-clock time)");
  t.row("data plane", data_plane);
  t.row("finished", run->result.finished ? format("yes, at %.3f s", to_seconds(run->result.end_time)) : "no");
  const auto& st = run->result.stats;
  t.row("closures", format("%llu scheduled, %llu completed, %llu retried, %llu cancelled",
                           static_cast<unsigned long long>(st.scheduled), static_cast<unsigned long long>(st.completed),
                           static_cast<unsigned long long>(st.retried), static_cast<unsigned long long>(st.cancelled)));
  t.row("worker failures / recoveries", format("%llu / %llu", static_cast<unsigned long long>(st.worker_failures),
                                               static_cast<unsigned long long>(st.worker_recoveries)));
  t.row("errors raised", std::to_string(st.errors_raised));
  for (const auto& [k, v] : sim::ps_recovery_rows(run->result)) t.row(k, v);
  for (auto& [k, v] : sim::training_rows(run->result)) t.row(k, v);
  t.row("iterations at the end",
        run->result.final_iterations ? std::to_string(*run->result.final_iterations) : std::string("unreadable"));
  // A model spec's coordinator starts inside its `train` action (the trainer
  // starts it): there is no setup apart from the program to show.
  if (!spec) t.row("cluster set up in", format("%.3f s", run->setup_s));
  t.row("wall time", format("%.3f s", run->wall_s));
  std::printf("summary:\n");
  t.print();
  if (!run->result.faults.empty()) {
    std::printf("\nfaults:\n");
    for (const auto& f : run->result.faults) std::printf("  %s\n", f.c_str());
  }
  if (!run->late_faults.empty()) {
    std::printf("\nfaults that fell due while the cluster was being set up:\n");
    for (const auto& f : run->late_faults) std::printf("  %s\n", f.c_str());
  }
  int failed = print_expectations(sim::check_expectations(s, run->result, sim::RunMode::kReal));
  if (!write_report(report_path, s, spec, run->result, /*real=*/true, run->wall_s)) return kExitBadInput;
  if (!record_path.empty()) {
    const sim::RecordedOutcome outcome = launcher_outcome(s, run->result, recorder);
    if (Status st = write_recording(record_path, recorder, recorder.scenario(s, outcome), "twinps sim --real " + path);
        !st.ok()) {
      print_error("sim --real", st);
      return kExitFailed;
    }
  }
  for (const auto& p : run->problems) {
    std::fprintf(stderr, "twinps sim: %s: --real: %s\n", path.c_str(), p.c_str());
    ++failed;
  }
  if (failed > 0) {
    std::fprintf(stderr, "twinps sim: %s: --real: %d check%s did not hold\n", path.c_str(), failed, failed == 1 ? "" : "s");
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

int run_sim(int argc, char** argv) {
  std::string path, trace_path, csv_path, report_path, record_path, data_plane = "tcp";
  std::uint64_t seed = 0, swarm = 0, swarm_first = 1;
  double max_memory_gb = 0, max_cpu_s = 300;
  ModelFlags model_flags;
  po::options_description opts("twinps sim options");
  opts.add_options()("help,h", "show this help")
      ("scenario", po::value(&path), "the scenario file (Protobuf text format, schema sim/scenario.proto)")
      ("seed", po::value(&seed), "seed of the run (overrides the scenario's)")
      ("trace", po::value(&trace_path), "write a Chrome Trace Event JSON file (open it in Perfetto)")
      ("csv", po::value(&csv_path), "write per-step metrics as CSV")
      ("report", po::value(&report_path),
       "write a JSON report (also with --real): per epoch the time, steps/s, loss and accuracy; the evaluation, "
       "the staleness histogram, the coordinator's counters (the fields of `twinps train --report`)")
      ("no-progress", "no progress bar on stderr")
      ("real", "run the scenario's cluster as real processes on this machine (twinps serve), its faults applied on "
               "wall-clock time (SIGKILL, SIGSTOP, a transport cut); expectations without a real-time meaning print n/a")
      ("data-plane", po::value(&data_plane)->notifier(one_of_data_planes()),
       "with --real: where its calls travel, as `twinps serve --data-plane` (default tcp)")
      ("record-faults", po::value(&record_path),
       "with --real: write what the coordinator observed (failures, recoveries, step time, outcome) as a scenario "
       "that `twinps sim FILE` replays")
      ("max-memory-gb", po::value(&max_memory_gb)->notifier(at_least(0.0)),
       "refuse a scenario estimated to need more memory than this (default: what this process may use: ulimit, "
       "cgroup, physical memory)")
      ("max-cpu-s", value_or(&max_cpu_s, 300.0)->notifier(at_least(0.0)),
       "refuse a scenario estimated to need more CPU seconds than this (0: no limit)")
      ("no-limits", "run whatever the estimates say (machines bigger than the limits found)")
      ("swarm", po::value(&swarm)->notifier(at_least(std::uint64_t{1})), "instead of a scenario: run this many random fault schedules and check the invariants")
      ("swarm-first-seed", po::value(&swarm_first)->default_value(1), "first seed of --swarm")
      ("print-swarm-scenario", po::value<std::uint64_t>(),
       "print the scenario --swarm runs for this seed (save it, then run it with --trace to see what happened)");
  // A model spec instead of the scenario's workload (or the scenario's
  // `model_spec`), with the flags `twinps train` takes for it.
  po::options_description model_opts("model spec options (--model, or a scenario's model_spec)");
  model_flags.add_model_options(model_opts);
  model_flags.add_training_options(model_opts);
  model_flags.add_data_options(model_opts);
  opts.add(model_opts);
  po::positional_options_description positional;
  positional.add("scenario", 1);
  po::variables_map vm;
  const std::string usage =
      "usage: twinps sim SCENARIO [--seed N] [--trace out.json] [--csv out.csv] [--report out.json]\n"
      "       twinps sim --real SCENARIO [--data-plane P] [--report out.json] [--record-faults out.textproto]\n"
      "       twinps sim SCENARIO --model M.textproto --train-data GLOB [--eval-data GLOB] [training flags]\n"
      "       twinps sim --swarm N [--swarm-first-seed S]";
  if (int rc = parse(argc, argv, usage, opts, vm, &positional); rc >= 0) return rc;

  if (vm.count("print-swarm-scenario")) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(sim::swarm_scenario(vm["print-swarm-scenario"].as<std::uint64_t>()), &text);
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  if (vm.count("swarm")) {
    if (vm.count("scenario")) {
      std::fprintf(stderr, "twinps sim: give a scenario or --swarm, not both\n");
      return kExitBadInput;
    }
    return run_swarm(swarm_first, swarm);
  }
  if (!vm.count("scenario")) {
    std::fprintf(stderr, "twinps sim: which scenario? (%s)\n", usage.c_str());
    return kExitBadInput;
  }

  path = find_data(path);  // scenarios/x.textproto also works outside the checkout (tools/data_dir.h)
  sim::LoadedScenario loaded = sim::load_scenario_file(path, model_flags.model_path);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps sim: %s\n", e.to_string().c_str());
    if (!std::filesystem::exists(path)) std::fprintf(stderr, "twinps sim: %s\n", data_search_note().c_str());
    return kExitBadInput;
  }
  if (vm.count("record-faults")) {
    if (!vm.count("real")) {
      std::fprintf(stderr, "twinps sim: --record-faults records a real run: use it with --real\n");
      return kExitBadInput;
    }
    if (Status st = check_record_path(record_path); !st.ok()) {
      print_error("sim", st);
      return kExitBadInput;
    }
  }
  if (vm.count("data-plane") && !vm.count("real")) {
    std::fprintf(stderr, "twinps sim: --data-plane is where a real run's calls travel: use it with --real (a "
                         "simulation's calls cost what its scenario's messages and ps_service say)\n");
    return kExitBadInput;
  }
  if (vm.count("real"))
    for (const char* flag : {"seed", "trace", "csv", "swarm"})
      if (vm.count(flag)) {
        std::fprintf(stderr, "twinps sim: --%s does not apply to --real\n", flag);
        return kExitBadInput;
      }
  // A model spec's data and training flags, and --mode and its bounds, hold
  // for real processes as for the simulator.
  auto spec_workload = load_spec_workload(loaded.scenario, model_flags, vm);
  if (!spec_workload.ok()) {
    print_error("sim", spec_workload.status());
    return kExitBadInput;
  }
  if (Status st = apply_training_mode(vm, spec_workload->get(), loaded.scenario); !st.ok()) {
    print_error("sim", st);
    return kExitBadInput;
  }
  if (!report_path_writable(report_path)) return kExitBadInput;
  if (vm.count("real")) return run_real(path, loaded.scenario, spec_workload->get(), report_path, record_path, data_plane);

  if (max_memory_gb < 0 || max_cpu_s < 0) {
    std::fprintf(stderr, "twinps sim: --max-memory-gb and --max-cpu-s must not be negative\n");
    return kExitBadInput;
  }
  // Refuse, before running, what cannot fit: not a std::bad_alloc (or an
  // hour of arithmetic) later.
  if (!vm.count("no-limits")) {
    sim::ResourceLimits limits;
    if (vm.count("max-memory-gb")) {
      limits.memory_bytes = max_memory_gb * 1024 * 1024 * 1024;
      limits.memory_source = "--max-memory-gb";
    } else {
      const MemoryLimit m = memory_limit();
      limits.memory_bytes = m.bytes;
      limits.memory_source = m.source;
    }
    limits.cpu_seconds = max_cpu_s;
    limits.cpu_source = vm["max-cpu-s"].defaulted() ? "the default of --max-cpu-s" : "--max-cpu-s";
    const auto too_big = sim::check_resources(loaded.scenario, limits, path);
    for (const auto& e : too_big) std::fprintf(stderr, "twinps sim: %s\n", e.to_string().c_str());
    if (!too_big.empty()) return kExitBadInput;
  }

  sim::SimOptions options;
  options.spec = *spec_workload;
  if (vm.count("seed")) options.seed = seed;
  std::unique_ptr<ChromeTraceWriter> trace;
  if (!trace_path.empty()) {
    trace = std::make_unique<ChromeTraceWriter>(trace_path);
    if (!trace->error().empty()) {
      std::fprintf(stderr, "twinps sim: %s\n", trace->error().c_str());
      return kExitBadInput;
    }
    options.trace = trace.get();
  }
  if (!csv_path.empty()) {
    // Fail before running, not after a long run.
    std::FILE* f = std::fopen(csv_path.c_str(), "a");
    if (!f) {
      std::fprintf(stderr, "twinps sim: cannot open '%s' for writing\n", csv_path.c_str());
      return kExitBadInput;
    }
    std::fclose(f);
  }

  Measured m = run_measured(loaded.scenario, options, !vm.count("no-progress"));
  if (!m.result.setup_error.ok()) {
    std::fprintf(stderr, "twinps sim: %s: %s\n", path.c_str(), describe(m.result.setup_error).c_str());
    return kExitBadInput;
  }
  if (trace) trace->close();
  print_summary(m);
  if (!m.result.faults.empty()) {
    std::printf("\nfaults:\n");
    for (const auto& f : m.result.faults) std::printf("  %s\n", f.c_str());
  }
  if (!csv_path.empty()) {
    Status s = sim::write_steps_csv(m.result, csv_path);
    if (!s.ok()) {
      std::fprintf(stderr, "twinps sim: %s\n", describe(s).c_str());
      return kExitBadInput;
    }
  }

  if (!write_report(report_path, loaded.scenario, spec_workload->get(), m.result, /*real=*/false, m.wall_s))
    return kExitBadInput;

  auto checks = sim::check_expectations(loaded.scenario, m.result);
  // A run that made no progress fails whatever its expectations say.
  const auto stalled = sim::no_progress(m.result, false);
  int failed = (stalled ? 1 : 0) + print_expectations(checks);
  if (stalled) std::fprintf(stderr, "twinps sim: %s: %s\n", path.c_str(), stalled->c_str());
  const int failed_checks = failed - (stalled ? 1 : 0);
  if (failed_checks > 0) {
    std::fprintf(stderr, "twinps sim: %s: %d expectation%s did not hold:\n", path.c_str(), failed_checks,
                 failed_checks == 1 ? "" : "s");
    for (const auto& c : checks)
      if (!c.passed) std::fprintf(stderr, "  %s (observed: %s)\n", c.what.c_str(), c.observed.c_str());
  }
  if (failed > 0) return kExitFailed;
  return kExitOk;
}

}  // namespace twinps::cli
