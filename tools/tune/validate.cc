#include "tools/tune/validate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <google/protobuf/text_format.h>

#include "core/data/ctr_generator.h"
#include "sim/scenario_loader.h"
#include "sim/spec_workload.h"
#include "sim/tuner.h"
#include "sim/workload.h"
#include "tools/cli.h"
#include "tools/data_dir.h"
#include "tools/data_plane_flag.h"
#include "tools/subprocess.h"
#include "tools/training_flags.h"
#include "tools/tune/calibration.h"
#include "tools/tune/measured_runs.h"
#include "tools/tune/real_run.h"
#include "tools/tune/speed_probe.h"

namespace twinps::cli {
namespace {

constexpr char kUsage[] =
    "usage: twinps tune --validate [--profile FILE] [--rounds N] [--quick] [--csv FILE]\n"
    "                   [--model FILE]... [--seconds S] [--max-variable-mib M] [--data-plane P]\n"
    "                   [--save-runs FILE] [--train-data GLOB... [--train-labels GLOB...]]\n"
    "       twinps tune --validate --runs FILE --profile FILE [--csv FILE]\n"
    "\n"
    "Measures the simulation's fidelity on this machine: trains models on real `twinps serve` processes\n"
    "on loopback over a grid of configurations and predicts the same program — the same warm-up and\n"
    "measured closure counts — by simulation with the cost profile, as the scenario \"every task on one\n"
    "host with this machine's cores\" (Hosts ONE_HOST). It prints predicted and measured steps/s, the\n"
    "run-to-run noise (half the range over --rounds), the error of each, the median and worst error,\n"
    "and, for every model and cluster measured at several shard counts, whether the shard count\n"
    "`twinps tune` would recommend is within 5 % of the best measured.\n"
    "\n"
    "A machine's speed drifts (a shared or virtual machine's by tens of percent within minutes), so\n"
    "the reference probes `twinps calibrate` records in the profile (`speed`) are taken again just\n"
    "before and after each real run, and that run is predicted with the profile's compute prices\n"
    "re-scaled to the speed found (the kernel basket's ratio), on the usable cores of the median of\n"
    "all runs' probes (one probe of the cores together is too noisy), with the ps's row prices\n"
    "re-scaled by the median of all runs' row probes (as noisy); the round-trip probe's ratio is\n"
    "printed, not applied (\"speed c/m/r\": compute, messages, rows). The error at the profile's\n"
    "own prices, as\n"
    "`twinps tune` would predict, is printed beside it; the shard picks use those.\n"
    "\n"
    "The grid (49 configurations) uses the synthetic models of scenarios/models (from the current\n"
    "directory, else --data-dir, $TWINPS_DATA_DIR or share/twinps beside the binary, where `cmake\n"
    "--install` puts them): dense_heavy, embedding_heavy, many_small, one_large and sparse_embedding, odd\n"
    "worker and ps counts, every partitioner, a straggling worker and batches beyond the calibration's;\n"
    "and the example specs tutorial, fashion_mnist and ctr (examples/), each trained by its own trainer\n"
    "on its own data (the tutorial's records, Debian's dataset-fashion-mnist, a click log of 200,000\n"
    "examples generated first), two epochs of equal steps with the second measured, and predicted as\n"
    "`twinps tune --model SPEC` predicts it (the synthetic model that times the spec). None of it is\n"
    "what `twinps calibrate` measures (microbenchmarks, and one n x n variable on one worker and one ps).\n"
    "With --model, each given model runs a small grid of its own instead; a model spec trains on\n"
    "--train-data (and --train-labels for IDX). A synthetic model's variables larger than\n"
    "--max-variable-mib are given fewer rows, in the real runs and the predictions alike (a spec's are\n"
    "its own). Without --profile, `twinps calibrate` runs first. --quick: two configurations of the\n"
    "first model (tests).\n"
    "\n"
    "The real runs use the plane the profile was measured over (its `data_plane`; tcp for a profile\n"
    "written before it was recorded): a profile's prices hold for its own plane only.\n"
    "\n"
    "--save-runs FILE keeps the real runs (each round's steps/s, CPU and probes, and the models as they\n"
    "ran); --runs FILE predicts them again without running anything, with --profile's prices (measured\n"
    "over the runs' plane). A machine drifts between two validations by more than most changes to the\n"
    "simulator move a prediction: two builds or two profiles compared on one saved measurement differ\n"
    "by their own doing alone.";

// CPU seconds per step of each role, summed over its tasks.
struct RoleCpu {
  double chief = 0, workers = 0, ps = 0;
  double total() const { return chief + workers + ps; }
};

struct Row {
  GridConfig config;
  int warmup = 0, measured = 0;
  // Steps/s: predicted at the machine's speed around the median round's
  // run, predicted at the profile's own prices (what `twinps tune` would
  // say), measured in the median round.
  double predicted = 0, predicted_calibrated = 0, real = 0;
  SpeedRatios speed;               // the median round's speed against the profile's
  double noise = 0;                // half the range of the rounds, over the median (0 with one round)
  // Where the CPU goes: what each process used over the median round's
  // measured closures, and what the host model charged in the prediction.
  RoleCpu real_cpu, predicted_cpu;
  double real_run_delay = 0;  // seconds per step the processes were runnable but without a core
  double usable_cores = 0;    // the predicted host's cores: the online ones over the probed slowdown together
  double error_pct() const { return (predicted - real) / real * 100; }
  double calibrated_error_pct() const { return (predicted_calibrated - real) / real * 100; }
};

// The speed a run is predicted at: the mean of the probes just before and
// just after it.
scenario::MachineSpeed mean_speed(const scenario::MachineSpeed& a, const scenario::MachineSpeed& b) {
  scenario::MachineSpeed m;
  m.set_compute_us((a.compute_us() + b.compute_us()) / 2);
  m.set_round_trip_us((a.round_trip_us() + b.round_trip_us()) / 2);
  return m;  // row_us: the median of every run's probes replaces it (below)
}

double run_delay_per_step(const RealRunResult& r) {
  double sum = 0;
  for (const auto& [task, seconds] : r.run_delay_s) sum += seconds;
  return r.measured_steps > 0 ? sum / static_cast<double>(r.measured_steps) : 0;
}

RoleCpu measured_cpu(const RealRunResult& r) {
  RoleCpu out;
  if (r.measured_steps <= 0) return out;
  for (const auto& [task, seconds] : r.cpu_s) {
    const double per_step = seconds / static_cast<double>(r.measured_steps);
    if (task.job == Job::kChief) out.chief += per_step;
    else if (task.job == Job::kWorker) out.workers += per_step;
    else if (task.job == Job::kPs) out.ps += per_step;
  }
  return out;
}

// A model spec measured as users train it: its own trainer (core/training)
// on its own data, two epochs of equal steps (tools/tune/real_run.h).
struct SpecSource {
  model::spec::ModelSpec spec;  // as loaded; each configuration sets its partitioner and batch
  training::DataSource train;
};

struct Model {
  std::string name;  // the file's stem; an example spec's directory, "(spec)" after it
  // What the simulation runs: a spec's is the synthetic model that times it
  // (sim/spec_workload.h), as `twinps tune --model SPEC` predicts it.
  scenario::SyntheticModel model;
  std::optional<SpecSource> spec;
};

constexpr auto kFixed = sim::PartitionerKind::kFixed;
constexpr auto kMin = sim::PartitionerKind::kMinSize;
constexpr auto kMax = sim::PartitionerKind::kMaxSize;

const char* const kGridModels[] = {"dense_heavy", "embedding_heavy", "many_small", "one_large", "sparse_embedding"};

// The default grid over kGridModels (indices in that order).
std::vector<GridConfig> full_grid() {
  return {
      // dense_heavy: a 21 MiB MLP, Adam, batch 256.
      {0, 1, 1, kFixed, 1}, {0, 3, 2, kFixed, 2}, {0, 3, 3, kMin, 3}, {0, 2, 2, kMax, 4},
      {0, 3, 2, kFixed, 2, /*straggler=*/3},
      // embedding_heavy: a Zipf-skewed embedding, Adagrad, batch 512.
      {1, 1, 1, kFixed, 1}, {1, 3, 2, kFixed, 2}, {1, 5, 3, kMin, 3}, {1, 2, 2, kMax, 4},
      {1, 3, 2, kFixed, 2, /*straggler=*/4},
      // many_small: 48 variables of 16 KiB, SGD, batch 64.
      {2, 1, 1, kFixed, 1}, {2, 3, 3, kFixed, 1}, {2, 4, 2, kMin, 2}, {2, 3, 1, kMax, 3},
      // one_large: one 32 MiB variable, RMSprop, batch 32.
      {3, 1, 1, kFixed, 1}, {3, 2, 2, kFixed, 3}, {3, 3, 3, kMax, 3}, {3, 1, 3, kMin, 3},
      // sparse_embedding: uniform lookups of 1024 rows, Adagrad, batch 1024; and batch 2048.
      {4, 1, 1, kFixed, 1}, {4, 3, 2, kFixed, 2}, {4, 3, 3, kMax, 5}, {4, 2, 1, kFixed, 1, 0, /*batch=*/2048},
      // Shard picks: one cluster per model at 1, 2 and 4 shards.
      {0, 2, 2, kFixed, 1}, {0, 2, 2, kFixed, 2}, {0, 2, 2, kFixed, 4},
      {2, 2, 2, kFixed, 1}, {2, 2, 2, kFixed, 2}, {2, 2, 2, kFixed, 4},
      {3, 1, 2, kFixed, 1}, {3, 1, 2, kFixed, 2}, {3, 1, 2, kFixed, 4},
      {4, 2, 2, kFixed, 1}, {4, 2, 2, kFixed, 2}, {4, 2, 2, kFixed, 4},
      // The example specs (kExampleSpecs), each trained by its own trainer on
      // its own data: one worker, an odd cluster, and shard picks.
      {5, 1, 1, kFixed, 1}, {5, 3, 2, kFixed, 2}, {5, 2, 2, kFixed, 1}, {5, 2, 2, kFixed, 2}, {5, 2, 2, kFixed, 4},
      {6, 1, 1, kFixed, 1}, {6, 3, 2, kMin, 2}, {6, 2, 2, kFixed, 1}, {6, 2, 2, kFixed, 2}, {6, 2, 2, kFixed, 4},
      {7, 1, 1, kFixed, 1}, {7, 3, 2, kFixed, 2}, {7, 2, 2, kFixed, 1}, {7, 2, 2, kFixed, 2}, {7, 2, 2, kFixed, 4},
  };
}

// Models given with --model: each on one worker and one ps, two workers on
// two ps at 1, 2 and 4 shards, three workers on three ps.
std::vector<GridConfig> own_grid(int models) {
  std::vector<GridConfig> out;
  for (int m = 0; m < models; ++m) {
    out.push_back({m, 1, 1, kFixed, 1});
    for (int shards : {1, 2, 4}) out.push_back({m, 2, 2, kFixed, shards});
    out.push_back({m, 3, 3, kFixed, 3});
  }
  return out;
}

// Two configurations of the first model on one cluster (for tests).
std::vector<GridConfig> quick_grid() { return {{0, 1, 1, kFixed, 1}, {0, 1, 1, kFixed, 2}}; }

// Cuts variables above `max_bytes` to fewer rows (and lookups to at most the rows).
std::vector<std::string> fit_variables(scenario::SyntheticModel& m, double max_bytes) {
  std::vector<std::string> notes;
  for (auto& v : *m.mutable_variable()) {
    if (v.shape_size() == 0) continue;
    double row_bytes = 4;
    for (int d = 1; d < v.shape_size(); ++d) row_bytes *= static_cast<double>(v.shape(d));
    const auto rows = static_cast<std::int64_t>(std::max(1.0, std::floor(max_bytes / row_bytes)));
    if (v.shape(0) <= rows) continue;
    notes.push_back(format("%s: %lld rows cut to %lld", v.name().c_str(), static_cast<long long>(v.shape(0)),
                           static_cast<long long>(rows)));
    v.set_shape(0, rows);
    if (v.rows_per_step() > rows) v.set_rows_per_step(rows);
  }
  return notes;
}

std::string cluster_name(const GridConfig& c) { return format("%dw %dps", c.workers, c.ps); }

std::string extras(const GridConfig& c) {
  std::string s;
  if (c.straggler > 0) s += format("w0 x%d", c.straggler);
  if (c.batch > 0) s += (s.empty() ? "" : " ") + format("b%d", c.batch);
  return s.empty() ? "-" : s;
}

// ---------------------------------------------------------------- inputs

// What the command line asked for.
struct ValidateOptions {
  std::vector<std::string> model_paths;
  std::vector<std::string> train_data, train_labels;  // a model spec's (--model SPEC)
  std::string profile_path, csv_path, data_dir, data_plane, save_runs_path, runs_path;
  double seconds = 2, max_variable_mib = 32;
  int rounds = 1;
  bool quick = false, timing_only = false, dedicated_hosts = false;
};

// A model spec and the data `twinps train` would read for it; errors name
// the file, flag or record, as `twinps train`'s do.
StatusOr<Model> load_spec_model(const std::string& name, const std::string& path, std::vector<std::string> train_data,
                                std::vector<std::string> train_labels) {
  auto run = load_spec_and_data(path, std::move(train_data), std::move(train_labels));
  if (!run.ok()) return run.status();
  auto timed = sim::synthetic_model_of(*run->model, run->train->read_kernel);
  if (!timed.ok()) return Status(timed.status().code(), path + ": " + std::string(timed.status().message()));
  return Model{name, std::move(*timed), SpecSource{run->spec, std::move(*run->train)}};
}

// The example specs of the default grid, with the data each example trains
// on (examples/README.md): the tutorial's generated records, Debian's
// Fashion-MNIST and a generated click log (written under `work_dir`).
const char* const kExampleSpecs[] = {"tutorial", "fashion_mnist", "ctr"};
constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";
constexpr std::int64_t kCtrExamples = 200'000;

StatusOr<Model> load_example_spec(const std::string& example, const ValidateOptions& o, const std::string& work_dir) {
  const std::string path = find_data("examples/" + example + "/model.textproto", o.data_dir);
  if (!std::filesystem::exists(path))
    return absl::NotFoundError("examples/" + example + "/model.textproto: " + data_search_note(o.data_dir));
  std::vector<std::string> data, labels;
  if (example == "tutorial") {
    data = {kBuiltinTutorialData};
  } else if (example == "fashion_mnist") {
    const std::string images = std::string(kFashionMnist) + "/train-images-idx3-ubyte.gz";
    if (!std::filesystem::exists(images))
      return absl::NotFoundError(images + " is missing: the example fashion_mnist trains on Debian's "
                                 "dataset-fashion-mnist (apt-get install dataset-fashion-mnist)");
    data = {images};
    labels = {std::string(kFashionMnist) + "/train-labels-idx1-ubyte.gz"};
  } else {
    const std::string dir = work_dir + "/ctr-data";
    std::filesystem::create_directories(dir);
    data::CtrOptions co;
    co.examples = kCtrExamples;
    co.train_files = 4;
    auto generated = data::generate_ctr(dir, co);
    if (!generated.ok()) return generated.status();
    data = {dir + "/train-*.tfrecord"};
  }
  return load_spec_model(example + " (spec)", path, std::move(data), std::move(labels));
}

// The models to measure (--model, else the default grid's: the synthetic
// models, cut to --max-variable-mib, then the example specs). nullopt after
// printing the problem.
std::optional<std::vector<Model>> load_models(const ValidateOptions& o, const std::string& work_dir) {
  std::vector<std::string> paths = o.model_paths;
  if (paths.empty())
    for (const char* m : kGridModels) paths.push_back(std::string("scenarios/models/") + m + ".textproto");
  std::vector<Model> models;
  auto refuse = [](const Status& s) -> std::optional<std::vector<Model>> {
    print_error("tune --validate", s);
    return std::nullopt;
  };
  for (auto path : paths) {
    path = find_data(path, o.data_dir);
    auto loaded = sim::load_timed_model_file(path);
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps tune --validate: %s\n", e.to_string().c_str());
    if (!std::filesystem::exists(path))
      std::fprintf(stderr, "twinps tune --validate: %s\n", data_search_note(o.data_dir).c_str());
    if (!loaded.ok()) return std::nullopt;
    // A spec is usually DIR/model.textproto: the directory names it.
    const std::filesystem::path file(path);
    const std::string name = file.stem() == "model" && file.has_parent_path()
                                 ? std::filesystem::absolute(file).parent_path().filename().string()
                                 : file.stem().string();
    if (loaded.from_spec) {
      auto spec = load_spec_model(name + " (spec)", path, o.train_data, o.train_labels);
      if (!spec.ok()) return refuse(spec.status());
      models.push_back(std::move(*spec));
      continue;
    }
    Model m{name, loaded.model, std::nullopt};
    for (const auto& note : fit_variables(m.model, o.max_variable_mib * (1 << 20)))
      std::fprintf(stderr, "twinps tune --validate: %s: %s (--max-variable-mib %g)\n", m.name.c_str(), note.c_str(),
                   o.max_variable_mib);
    models.push_back(std::move(m));
  }
  const bool any_spec = std::any_of(models.begin(), models.end(), [](const Model& m) { return m.spec.has_value(); });
  if ((!o.train_data.empty() || !o.train_labels.empty()) && !any_spec) {
    std::fprintf(stderr, "twinps tune --validate: --train-data and --train-labels are a model spec's data: give the "
                 "spec with --model\n");
    return std::nullopt;
  }
  if (o.model_paths.empty() && !o.quick)
    for (const char* example : kExampleSpecs) {
      auto spec = load_example_spec(example, o, work_dir);
      if (!spec.ok()) return refuse(spec.status());
      models.push_back(std::move(*spec));
    }
  return models;
}

// The profile of --profile, checked against the plane the runs use
// (`runs_plane`, empty: any). nullopt after printing the problem.
std::optional<scenario::CostProfile> load_profile(const ValidateOptions& o, const std::string& runs_plane,
                                                  const std::string& runs_plane_source, const char* hint) {
  const std::string path = find_data(o.profile_path, o.data_dir);
  auto loaded = sim::load_profile_file(path);
  for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps tune --validate: %s\n", e.to_string().c_str());
  if (!loaded.ok()) return std::nullopt;
  if (!runs_plane.empty() && runs_plane != loaded.profile.data_plane()) {
    std::fprintf(stderr,
                 "twinps tune --validate: %s %s: the profile %s was measured over %s, and its prices do not hold "
                 "for %s; calibrate over it (`twinps calibrate --data-plane %s`)%s\n",
                 runs_plane_source.c_str(), runs_plane.c_str(), path.c_str(), loaded.profile.data_plane().c_str(),
                 runs_plane.c_str(), runs_plane.c_str(), hint);
    return std::nullopt;
  }
  return loaded.profile;
}

// A spec's configuration: the spec with `partitioner` (the spec's and the
// scenario's Partitioner messages have the same fields under the same
// numbers) and `batch` (0: its own), compiled, and the synthetic model that
// times it.
StatusOr<GridRun> plan_spec_run(const SpecSource& source, const scenario::Partitioner& partitioner, int batch) {
  model::spec::ModelSpec spec = source.spec;
  spec.mutable_partitioner()->ParseFromString(partitioner.SerializeAsString());
  if (batch > 0) spec.set_batch_size(batch);
  auto compiled = model::CompiledModel::compile(spec);
  if (!compiled.ok()) return compiled.status();
  auto timed = sim::synthetic_model_of(**compiled, source.train.read_kernel);
  if (!timed.ok()) return timed.status();
  GridRun run;
  run.model = std::move(*timed);
  run.spec = *compiled;
  run.spec_data = source.train;
  return run;
}

// The configurations to run, each with its model made up (partitioner,
// batch). No rounds yet.
StatusOr<Measurement> plan_grid(const ValidateOptions& o, const std::vector<Model>& models) {
  const std::vector<GridConfig> grid = o.quick                 ? quick_grid()
                                       : !o.model_paths.empty() ? own_grid(static_cast<int>(models.size()))
                                                                : full_grid();
  Measurement m;
  for (const Model& model : models) m.model_names.push_back(model.name);
  for (const GridConfig& c : grid) {
    const Model& model = models[static_cast<std::size_t>(c.model)];
    auto partitioner = sim::partitioner_for(model.model, c.kind, c.shards);
    if (!partitioner.ok()) return absl::InvalidArgumentError(model.name + ": " + describe(partitioner.status()));
    GridRun run{c, model.model, {}, nullptr, std::nullopt};
    if (model.spec) {
      auto planned = plan_spec_run(*model.spec, *partitioner, c.batch);
      if (!planned.ok()) return absl::InvalidArgumentError(model.name + ": " + describe(planned.status()));
      run = std::move(*planned);
      run.config = c;
    } else {
      *run.model.mutable_partitioner() = *partitioner;
      if (c.batch > 0) run.model.set_batch_size(c.batch);
    }
    m.runs.push_back(std::move(run));
  }
  return m;
}

// ---------------------------------------------------------------- real runs

// A synthetic model's real run: the tuner's program.
RealRunOptions real_run_options(const GridRun& run, const ValidateOptions& o, const Measurement& m,
                                const std::string& dir) {
  RealRunOptions ro;
  ro.model = run.model;
  ro.workers = run.config.workers;
  ro.ps = run.config.ps;
  ro.seconds = o.seconds;
  ro.measure_cpu = true;
  ro.data_plane = m.data_plane;
  if (run.config.straggler > 0) ro.stragglers.emplace_back(0, run.config.straggler);
  ro.work_dir = dir;
  return ro;
}

// A model spec's real run: its trainer.
SpecRunOptions spec_run_options(const GridRun& run, const ValidateOptions& o, const Measurement& m,
                                const std::string& dir) {
  SpecRunOptions so;
  so.model = run.spec;
  so.train = *run.spec_data;
  so.workers = run.config.workers;
  so.ps = run.config.ps;
  so.seconds = o.seconds;
  so.measure_cpu = true;
  so.data_plane = m.data_plane;
  so.work_dir = dir;
  return so;
}

// Runs the grid `o.rounds` times over, one configuration after another, the
// machine's speed probed around each run. Each run's logs go under `work_dir`.
Status measure(const ValidateOptions& o, const std::string& work_dir, Measurement& m) {
  std::printf("load average before the runs: %s\n", load_average().c_str());
  for (int round = 0; round < o.rounds; ++round) {
    for (std::size_t i = 0; i < m.runs.size(); ++i) {
      GridRun& run = m.runs[i];
      const GridConfig& c = run.config;
      const std::string& name = m.model_names[static_cast<std::size_t>(c.model)];
      const std::string run_dir = work_dir + format("/%s-%zu-%d", name.substr(0, name.find(' ')).c_str(), i, round);
      std::filesystem::create_directories(run_dir);
      std::fprintf(stderr, "twinps tune --validate: round %d/%d: %s %s %s %d shards %s: real run ...\n", round + 1,
                   o.rounds, name.c_str(), cluster_name(c).c_str(), sim::partitioner_name(c.kind), c.shards,
                   extras(c).c_str());
      const scenario::MachineSpeed before = probe_machine_speed();
      auto real = run.spec ? run_real_spec(spec_run_options(run, o, m, run_dir))
                           : run_real(real_run_options(run, o, m, run_dir));
      if (!real.ok())
        return Status(real.status().code(), describe(real.status()) + " (logs in " + run_dir + ")");
      const scenario::MachineSpeed after = probe_machine_speed();
      std::fprintf(stderr,
                   "twinps tune --validate:   %.2f steps/s; probes before/after: kernel basket %.0f/%.0f us, all cores "
                   "at once %.2fx/%.2fx, rows %.4f/%.4f us a row\n",
                   real->steps_per_second, before.compute_us(), after.compute_us(), before.together_slowdown(),
                   after.together_slowdown(), before.row_us(), after.row_us());
      run.rounds.push_back({*real, before, after});
    }
  }
  std::printf("load average after the runs: %s\n", load_average().c_str());
  return absl::OkStatus();
}

// ---------------------------------------------------------------- predictions

// What every run is predicted at, from all the probes of a measurement.
// The slowdown of all cores computing at once is a property of the machine,
// but one probe of it is noisy: on 2026-11-28 probes around single runs read
// 1.00x to 1.83x while the runs' own CPU per step did not move with them
// (docs/fidelity.md). So every run is predicted with the median of all
// probes; the compute speed stays per run. The same for the price of rows:
// one row probe read 0.09-0.22 us a row within one validation, and the runs'
// ps CPU did not follow it run by run; the median of all of them follows the
// spell the runs were in.
scenario::MachineSpeed typical_speed(const Measurement& m, const scenario::CostProfile& profile) {
  std::vector<double> together, rows;
  for (const GridRun& run : m.runs)
    for (const MeasuredRun& r : run.rounds)
      for (const auto* s : {&r.before, &r.after}) {
        together.push_back(s->together_slowdown());
        rows.push_back(s->row_us());
      }
  scenario::MachineSpeed typical;
  typical.set_together_slowdown(median(together));
  typical.set_row_us(median(rows));
  const auto [fewest, most] = std::minmax_element(together.begin(), together.end());
  std::printf("usable cores: %.2f (%d online; all at once %.2fx slower, the median of %zu probes, %.2f-%.2fx)\n",
              usable_cores(m.online_cores, typical), m.online_cores, typical.together_slowdown(), together.size(),
              *fewest, *most);
  const auto [cheapest, dearest] = std::minmax_element(rows.begin(), rows.end());
  std::printf("rows: %.4f us a row (the median of %zu probes, %.4f-%.4f; calibrated at %.4f): the ps's row prices "
              "x%.2f\n",
              typical.row_us(), rows.size(), *cheapest, *dearest, profile.speed().row_us(),
              speed_ratios(profile.speed(), typical).rows);
  return typical;
}

// A configuration's median round, predicted closure for closure: at the
// profile's own prices, and at the speed the machine had around the run.
StatusOr<Row> predict_row(const GridRun& run, const scenario::CostProfile& profile,
                          const scenario::MachineSpeed& typical, int online_cores, bool timing_only) {
  std::vector<MeasuredRun> rounds = run.rounds;
  std::sort(rounds.begin(), rounds.end(), [](const MeasuredRun& a, const MeasuredRun& b) {
    return a.result.steps_per_second < b.result.steps_per_second;
  });
  const MeasuredRun& median_run = rounds[rounds.size() / 2];
  const RealRunResult& real = median_run.result;
  const GridConfig& c = run.config;
  sim::PredictRequest pr;
  pr.model = run.model;
  pr.workers = c.workers;
  pr.ps = c.ps;
  if (c.straggler > 0) pr.stragglers.emplace_back(0, static_cast<double>(c.straggler));
  // Numeric by default: timing-only steps move each distinct row once, where
  // real (and numeric) ones pull and push every row looked up.
  pr.timing_only = timing_only;
  pr.warmup = real.warmup;
  pr.measured = real.measured;
  pr.profile = profile;
  auto as_calibrated = sim::predict(pr);
  if (!as_calibrated.ok()) return as_calibrated.status();
  scenario::MachineSpeed speed = mean_speed(median_run.before, median_run.after);
  speed.set_together_slowdown(typical.together_slowdown());
  speed.set_row_us(typical.row_us());
  pr.profile = at_speed(profile, speed, online_cores);
  auto predicted = sim::predict(pr);
  if (!predicted.ok()) return predicted.status();
  const double noise = (rounds.back().result.steps_per_second - rounds.front().result.steps_per_second) / 2 /
                       real.steps_per_second;
  const RoleCpu charged{predicted->chief_cpu_per_step_s, predicted->worker_cpu_per_step_s,
                        predicted->ps_cpu_per_step_s};
  return Row{c, real.warmup, real.measured, predicted->steps_per_second, as_calibrated->steps_per_second,
             real.steps_per_second, speed_ratios(profile.speed(), speed), noise, measured_cpu(real),
             charged, run_delay_per_step(real), pr.profile.hosts().cores()};
}

// ---------------------------------------------------------------- report

using ModelNames = std::vector<std::string>;

// The table, and the same as CSV when `csv` is open.
void print_rows(const std::vector<Row>& rows, const ModelNames& names, std::ofstream& csv) {
  std::printf("%-20s %-8s %-9s %6s %-9s %8s %14s %14s %7s %8s %14s %12s\n", "model", "cluster", "partition", "shards",
              "extra", "closures", "predicted st/s", "measured st/s", "noise", "error", "speed c/m/r", "as calibrated");
  if (csv)
    csv << "model,workers,ps,partitioner,shards,extra,warmup,measured_closures,predicted_steps_per_s,"
           "measured_steps_per_s,noise_pct,error_pct,measured_cpu_ms_chief,measured_cpu_ms_workers,"
           "measured_cpu_ms_ps,predicted_cpu_ms_chief,predicted_cpu_ms_workers,predicted_cpu_ms_ps,"
           "speed_ratio_compute,speed_ratio_messages,predicted_calibrated_steps_per_s,calibrated_error_pct,"
           "speed_ratio_rows\n";
  for (const Row& r : rows) {
    const std::string& name = names[static_cast<std::size_t>(r.config.model)];
    std::printf("%-20s %-8s %-9s %6d %-9s %8d %14.2f %14.2f %6.1f%% %+7.1f%% %4.2f/%4.2f/%4.2f %+11.1f%%\n",
                name.c_str(), cluster_name(r.config).c_str(), sim::partitioner_name(r.config.kind), r.config.shards,
                extras(r.config).c_str(), r.measured, r.predicted, r.real, r.noise * 100, r.error_pct(),
                r.speed.compute, r.speed.messages, r.speed.rows, r.calibrated_error_pct());
    if (csv)
      csv << name << ',' << r.config.workers << ',' << r.config.ps << ',' << sim::partitioner_name(r.config.kind)
          << ',' << r.config.shards << ',' << extras(r.config) << ',' << r.warmup << ',' << r.measured << ','
          << r.predicted << ',' << r.real << ',' << r.noise * 100 << ',' << r.error_pct() << ','
          << r.real_cpu.chief * 1e3 << ',' << r.real_cpu.workers * 1e3 << ',' << r.real_cpu.ps * 1e3 << ','
          << r.predicted_cpu.chief * 1e3 << ',' << r.predicted_cpu.workers * 1e3 << ',' << r.predicted_cpu.ps * 1e3
          << ',' << r.speed.compute << ',' << r.speed.messages << ',' << r.predicted_calibrated << ','
          << r.calibrated_error_pct() << ',' << r.speed.rows << '\n';
  }
}

// The error term by term: CPU per step of each role, measured (every
// process's CPU time over the measured closures) against what the simulated
// hosts charged. On one shared host a CPU-bound configuration's steps/s is
// about cores / total CPU per step, so a role whose CPU is under-counted
// shows where an optimistic prediction comes from. "cores busy" is CPU per
// step times steps/s, measured / predicted; "no core" is the ms per step the
// real processes were runnable but waited for a core (other work on it);
// "usable" is the cores the prediction's host had (the online cores over the
// slowdown the speed probes found running on all of them at once).
void print_cpu_breakdown(const std::vector<Row>& rows, const ModelNames& names) {
  std::printf("\nCPU per step, ms: measured / predicted (ratio), by role\n");
  std::printf("%-20s %-8s %6s %-9s %22s %22s %22s %22s %16s %10s %7s\n", "model", "cluster", "shards", "extra",
              "chief", "workers", "ps", "total", "cores busy", "no core", "usable");
  auto cell = [](double measured, double predicted) {
    return format("%7.3f / %7.3f (%4.2f)", measured * 1e3, predicted * 1e3, measured > 0 ? predicted / measured : 0);
  };
  for (const Row& r : rows) {
    // Cores kept busy: CPU per step times steps per second.
    const std::string busy =
        format("%5.2f / %5.2f", r.real_cpu.total() * r.real, r.predicted_cpu.total() * r.predicted);
    std::printf("%-20s %-8s %6d %-9s %22s %22s %22s %22s %16s %10.3f %7.2f\n",
                names[static_cast<std::size_t>(r.config.model)].c_str(), cluster_name(r.config).c_str(),
                r.config.shards, extras(r.config).c_str(), cell(r.real_cpu.chief, r.predicted_cpu.chief).c_str(),
                cell(r.real_cpu.workers, r.predicted_cpu.workers).c_str(),
                cell(r.real_cpu.ps, r.predicted_cpu.ps).c_str(),
                cell(r.real_cpu.total(), r.predicted_cpu.total()).c_str(), busy.c_str(), r.real_run_delay * 1e3,
                r.usable_cores);
  }
}

void print_error_summary(const std::vector<Row>& rows, int rounds) {
  std::vector<double> errors, calibrated_errors, noises;
  for (const Row& r : rows) {
    errors.push_back(std::abs(r.error_pct()));
    calibrated_errors.push_back(std::abs(r.calibrated_error_pct()));
    noises.push_back(r.noise * 100);
  }
  std::printf("\nerror |predicted - measured| / measured: median %.1f %%, worst %.1f %% over %zu configurations "
              "(run-to-run noise: median %.1f %%, worst %.1f %%, %d round%s)\n",
              median(errors), *std::max_element(errors.begin(), errors.end()), errors.size(), median(noises),
              *std::max_element(noises.begin(), noises.end()), rounds, rounds == 1 ? "" : "s");
  std::printf("at the profile's own prices (the machine's speed when calibrated): median %.1f %%, worst %.1f %%\n",
              median(calibrated_errors), *std::max_element(calibrated_errors.begin(), calibrated_errors.end()));
}

// Shard recommendation, per model and cluster measured at several shard
// counts: what `twinps tune` would recommend from the simulation (the
// fewest shards predicted within 2 % of the fastest) against the best measured.
void print_shard_picks(const std::vector<Row>& rows, const ModelNames& names) {
  std::map<std::tuple<int, int, int, int, int, int>, std::vector<const Row*>> groups;
  for (const Row& r : rows)
    groups[{r.config.model, r.config.workers, r.config.ps, static_cast<int>(r.config.kind), r.config.straggler,
            r.config.batch}]
        .push_back(&r);
  for (auto& [key, group] : groups) {
    if (group.size() < 2) continue;
    std::sort(group.begin(), group.end(), [](const Row* a, const Row* b) { return a->config.shards < b->config.shards; });
    double fastest = 0, best_real = 0;
    // At one set of prices, as `twinps tune` compares shard counts.
    for (const Row* r : group) fastest = std::max(fastest, r->predicted_calibrated);
    const Row* pick = nullptr;
    const Row* real_best = nullptr;
    double worst_noise = 0;
    for (const Row* r : group) {
      if (!pick && r->predicted_calibrated >= 0.98 * fastest) pick = r;
      if (r->real > best_real) best_real = r->real, real_best = r;
      worst_noise = std::max(worst_noise, r->noise);
    }
    const double behind = 1 - pick->real / best_real;
    const bool good = behind <= 0.05;
    std::printf("%s %s %s: simulation picks %d shards (measured %.2f steps/s), best measured %d shards (%.2f): %s "
                "(%.1f %% behind; noise up to %.1f %%)\n",
                names[static_cast<std::size_t>(std::get<0>(key))].c_str(), cluster_name(pick->config).c_str(),
                sim::partitioner_name(pick->config.kind), pick->config.shards, pick->real, real_best->config.shards,
                best_real, good ? "within 5 %" : "NOT within 5 %", behind * 100, worst_noise * 100);
  }
}

// ---------------------------------------------------------------- command line

// Parses the command line into `o`. A return >= 0 is the exit code.
int parse_options(int argc, char** argv, ValidateOptions& o) {
  po::options_description opts("twinps tune --validate options");
  opts.add_options()("help,h", "show this help")
      ("validate", "compare predictions with real runs (this mode)")
      ("model", po::value(&o.model_paths)->composing(),
       "a synthetic model or a model spec (repeatable): its own small grid; a spec trains on --train-data")
      ("train-data", po::value(&o.train_data)->multitoken(),
       "a model spec's training data (globs, as `twinps train --train-data`), or builtin:tutorial")
      ("train-labels", po::value(&o.train_labels)->multitoken(), "IDX: the labels files of --train-data")
      ("profile", po::value(&o.profile_path), "a CostProfile (default: run `twinps calibrate` first)")
      ("data-plane", po::value(&o.data_plane)->notifier(one_of_data_planes()),
       "the real runs' plane, as `twinps serve --data-plane`; with --profile it must be the profile's own "
       "(the default), without it `twinps calibrate` measures over it (default: tcp)")
      ("quick", "two configurations of the first model (for tests)")
      ("csv", po::value(&o.csv_path), "also write the table as CSV")
      ("save-runs", po::value(&o.save_runs_path), "also write the real runs to this file, for --runs")
      ("runs", po::value(&o.runs_path),
       "predict the runs a --save-runs wrote instead of running any (needs --profile; the grid, plane and "
       "measurements are the file's)")
      ("data-dir", po::value(&o.data_dir),
       "where the default models are (a directory holding scenarios/models/; default: $TWINPS_DATA_DIR, then "
       "share/twinps beside the binary)")
      ("seconds", value_or(&o.seconds, 2.0)->notifier(in_range(1e-3, 600.0)), "wall seconds each real run measures, about")
      ("rounds", value_or(&o.rounds, 1)->notifier(in_range(1, 100)),
       "run the whole grid this many times, one configuration after another, and take each one's median: a "
       "burst of load from elsewhere then spoils one round of a configuration, not its result; the spread is "
       "the noise column")
      ("timing-only", "predict timing-only, as `twinps tune` sweeps (default: numeric, the real runs' very steps)")
      ("dedicated-hosts", "predict as if every task had a host of its own (not this machine)")
      ("max-variable-mib", value_or(&o.max_variable_mib, 32.0)->notifier(positive()),
       "give larger variables fewer rows (real runs and predictions alike)");
  po::variables_map vm;
  if (int rc = parse(argc, argv, kUsage, opts, vm); rc >= 0) return rc;
  o.quick = vm.count("quick") > 0;
  o.timing_only = vm.count("timing-only") > 0;
  o.dedicated_hosts = vm.count("dedicated-hosts") > 0;
  if (!o.runs_path.empty()) {
    // The file says what ran and how: flags about running have nothing to act on.
    for (const char* flag : {"model", "quick", "seconds", "rounds", "max-variable-mib", "save-runs", "data-plane",
                             "train-data", "train-labels"})
      if (vm.count(flag) && !vm[flag].defaulted()) {
        std::fprintf(stderr, "twinps tune --validate: --%s: --runs predicts runs already made; the file says what "
                     "ran\n", flag);
        return kExitBadInput;
      }
    if (o.profile_path.empty()) {
      std::fprintf(stderr, "twinps tune --validate: --runs needs --profile: the prices to predict the runs with\n");
      return kExitBadInput;
    }
  }
  return -1;
}

// The measurement and the profile, from a saved file (--runs) or by
// calibrating (without --profile) and running the grid. A return >= 0 is
// the exit code.
int obtain_measurement(const ValidateOptions& o, const std::string& work_dir, Measurement& m,
                       scenario::CostProfile& profile) {
  if (!o.runs_path.empty()) {
    auto loaded = load_measurement(o.runs_path);
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps tune --validate: %s\n", e.to_string().c_str());
    if (!loaded.ok()) return kExitBadInput;
    m = std::move(loaded.measurement);
    auto p = load_profile(o, m.data_plane, "--runs " + o.runs_path + ": measured over", "");
    if (!p) return kExitBadInput;
    profile = *p;
    std::printf("runs of %s (%s)\n", o.runs_path.c_str(), m.measured_on.c_str());
    return -1;
  }
  auto models = load_models(o, work_dir);
  if (!models) return kExitBadInput;
  if (!o.profile_path.empty()) {
    auto p = load_profile(o, o.data_plane, "--data-plane", " or leave --data-plane out");
    if (!p) return kExitBadInput;
    profile = *p;
  }
  auto planned = plan_grid(o, *models);
  if (!planned.ok()) {
    std::fprintf(stderr, "twinps tune --validate: %s\n", describe(planned.status()).c_str());
    return kExitBadInput;
  }
  m = std::move(*planned);
  m.data_plane = o.data_plane.empty() ? profile.data_plane() : o.data_plane;  // a calibration's own default
  m.online_cores = static_cast<int>(std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN)));
  m.measured_on = describe_machine();
  if (o.profile_path.empty()) {
    std::fprintf(stderr, "twinps tune --validate: calibrating ...\n");
    CalibrationOptions co;
    co.work_dir = work_dir;
    co.max_bytes = o.max_variable_mib * (1 << 20);
    co.data_plane = m.data_plane;
    auto c = calibrate(co);
    if (!c.ok()) {
      std::fprintf(stderr, "twinps tune --validate: calibration failed: %s\n", describe(c.status()).c_str());
      return kExitFailed;
    }
    profile = c->profile;
  }
  std::printf("real runs over data plane %s\n", m.data_plane.c_str());
  if (Status s = measure(o, work_dir, m); !s.ok()) {
    std::fprintf(stderr, "twinps tune --validate: real run failed: %s\n", describe(s).c_str());
    return kExitFailed;
  }
  return -1;
}

// The profile as the predictions use it: every task on one host with this
// machine's cores (the profile's usable cores, or every core online).
void place_on_this_machine(const ValidateOptions& o, int online_cores, scenario::CostProfile& profile) {
  if (!profile.hosts().has_cores() || profile.hosts().cores() <= 0)
    profile.mutable_hosts()->set_cores(static_cast<double>(online_cores));
  if (!profile.has_speed())
    std::fprintf(stderr, "twinps tune --validate: the profile has no `speed` (written before the speed probes): every "
                 "prediction is at its prices as they are\n");
  profile.mutable_hosts()->set_placement(o.dedicated_hosts ? scenario::Hosts::ONE_PER_HOST
                                                           : scenario::Hosts::ONE_HOST);
  std::string text;
  google::protobuf::TextFormat::PrintToString(profile, &text);
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::printf("profile: %s\n", text.c_str());
}

}  // namespace

int run_tune_validate(int argc, char** argv) {
  ValidateOptions o;
  if (int rc = parse_options(argc, argv, o); rc >= 0) return rc;
  // Checked before any run: a table or a measurement that cannot be written
  // is better refused at once than lost after the runs.
  for (const auto& [flag, path] : {std::pair{"--csv", o.csv_path}, std::pair{"--save-runs", o.save_runs_path}})
    if (!path.empty() && !can_write(path)) {
      std::fprintf(stderr, "twinps tune --validate: %s: cannot write %s\n", flag, path.c_str());
      return kExitBadInput;
    }
  std::string work_dir;
  try {
    work_dir = make_temp_dir("validate");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twinps tune --validate: %s\n", e.what());
    return kExitFailed;
  }
  Measurement m;
  scenario::CostProfile profile;
  // A failed run leaves its logs in work_dir (the message names them).
  if (int rc = obtain_measurement(o, work_dir, m, profile); rc >= 0) return rc;
  std::error_code ec;
  std::filesystem::remove_all(work_dir, ec);
  int exit_code = kExitOk;
  if (!o.save_runs_path.empty()) {
    if (Status s = save_measurement(m, o.save_runs_path); !s.ok()) {
      std::fprintf(stderr, "twinps tune --validate: --save-runs: %s\n", describe(s).c_str());
      exit_code = kExitFailed;  // the predictions are still printed
    } else {
      std::fprintf(stderr, "twinps tune --validate: runs saved to %s\n", o.save_runs_path.c_str());
    }
  }
  place_on_this_machine(o, m.online_cores, profile);
  const scenario::MachineSpeed typical = typical_speed(m, profile);
  std::vector<Row> rows;
  for (const GridRun& run : m.runs) {
    auto row = predict_row(run, profile, typical, m.online_cores, o.timing_only);
    if (!row.ok()) {
      std::fprintf(stderr, "twinps tune --validate: prediction failed: %s\n", describe(row.status()).c_str());
      return kExitFailed;
    }
    rows.push_back(*row);
  }
  std::ofstream csv;
  if (!o.csv_path.empty()) {
    csv.open(o.csv_path, std::ios::trunc);
    if (!csv) {
      std::fprintf(stderr, "twinps tune --validate: --csv: cannot write %s\n", o.csv_path.c_str());
      exit_code = kExitFailed;  // the table is still printed
    }
  }
  print_rows(rows, m.model_names, csv);
  print_cpu_breakdown(rows, m.model_names);
  int rounds = 0;
  for (const GridRun& run : m.runs) rounds = std::max(rounds, static_cast<int>(run.rounds.size()));
  print_error_summary(rows, rounds);
  print_shard_picks(rows, m.model_names);
  return exit_code;
}

}  // namespace twinps::cli
