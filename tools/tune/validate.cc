#include "tools/tune/validate.h"

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <tuple>

#include <google/protobuf/text_format.h>

#include "core/models/synthetic/synthetic.h"
#include "sim/scenario_loader.h"
#include "sim/tuner.h"
#include "sim/workload.h"
#include "tools/cli.h"
#include "tools/data_dir.h"
#include "tools/subprocess.h"
#include "tools/tune/calibration.h"
#include "tools/tune/real_run.h"

namespace twinps::cli {
namespace {

constexpr char kUsage[] =
    "usage: twinps tune --validate [--model FILE]... [--profile FILE] [--quick] [--csv FILE]\n"
    "                   [--seconds S] [--max-variable-mib M]\n"
    "\n"
    "Measures the simulation's fidelity on this machine: trains each model on real `twinps serve`\n"
    "processes on loopback for a grid of (workers, ps, shards) and predicts the same program — the\n"
    "same warm-up and measured closure counts — by simulation with the cost profile, then prints\n"
    "predicted and measured steps/s, the error of each, the median and worst error, and whether the\n"
    "shard count the simulation ranks first is within 5 % of the best measured, for every model and\n"
    "cluster measured at several shard counts.\n"
    "\n"
    "Models default to scenarios/models/dense_heavy.textproto and embedding_heavy.textproto, found\n"
    "from the current directory, else in --data-dir, $TWINPS_DATA_DIR or share/twinps beside the\n"
    "binary (where `cmake --install` puts them). Variables larger than --max-variable-mib are given fewer rows, in the\n"
    "real runs and the predictions alike, so that every task fits this machine. Without --profile,\n"
    "`twinps calibrate` runs first, once per model (its optimizer's apply cost).\n"
    "\n"
    "The simulator gives every task a host of its own; here every task shares this machine's\n"
    "cores. So the prediction is the smaller of the simulation's steps/s (column \"hosts\") and\n"
    "what the cores allow (column \"cores\"): the cores' capacity — cores / the slowdown of\n"
    "compute_gradient run on every core at once, measured before the runs — over the CPU time\n"
    "the simulation charged per step (the workers' arithmetic, the ps' service). --dedicated-hosts\n"
    "predicts with the simulation alone.";

struct Config {
  int model = 0;  // index into the models
  int workers = 1, ps = 1, shards = 1;
};

struct Row {
  Config config;
  int warmup = 0, measured = 0;
  double hosts = 0;     // steps/s the simulation predicts with a host per task
  double cores = 0;     // steps/s this machine's cores allow (the simulated CPU work per step over them)
  double predicted = 0, real = 0;  // steps/s
  double error_pct() const { return (predicted - real) / real * 100; }
};

struct Model {
  std::string name;  // the file's stem
  scenario::SyntheticModel model;
  scenario::CostProfile profile;
};

// Every model: one worker on one ps; two workers on two ps at 1, 2, 4 and 8
// shards (the recommendation check); four workers on four ps.
std::vector<Config> full_grid(int models) {
  std::vector<Config> out;
  for (int m = 0; m < models; ++m) {
    out.push_back({m, 1, 1, 1});
    for (int shards : {1, 2, 4, 8}) out.push_back({m, 2, 2, shards});
    out.push_back({m, 4, 4, 4});
  }
  return out;
}

// Two configurations of the first model on one cluster: enough to show both
// columns and the recommendation check (for tests).
std::vector<Config> quick_grid() { return {{0, 1, 1, 1}, {0, 1, 1, 2}}; }

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

std::string cluster_name(const Config& c) { return format("%dw %dps", c.workers, c.ps); }

}  // namespace

int run_tune_validate(int argc, char** argv) {
  std::vector<std::string> model_paths;
  std::string profile_path, csv_path, data_dir;
  double seconds = 3, max_variable_mib = 32;
  int rounds = 1;
  po::options_description opts("twinps tune --validate options");
  opts.add_options()("help,h", "show this help")
      ("validate", "compare predictions with real runs (this mode)")
      ("model", po::value(&model_paths)->composing(), "a synthetic model file (repeatable)")
      ("profile", po::value(&profile_path), "a CostProfile (default: run `twinps calibrate` for each model)")
      ("quick", "two configurations of the first model (for tests)")
      ("csv", po::value(&csv_path), "also write the table as CSV")
      ("data-dir", po::value(&data_dir),
       "where the default models are (a directory holding scenarios/models/; default: $TWINPS_DATA_DIR, then "
       "share/twinps beside the binary)")
      ("seconds", value_or(&seconds, 3.0)->notifier(in_range(1e-3, 600.0)), "wall seconds each real run measures, about")
      ("rounds", value_or(&rounds, 1)->notifier(in_range(1, 100)),
       "run the whole grid this many times, one configuration after another, and take each one's median: a "
       "burst of load from elsewhere then spoils one round of a configuration, not its result")
      ("timing-only", "predict timing-only, as `twinps tune` sweeps (default: numeric, the real runs' very steps)")
      ("dedicated-hosts", "predict as if every task had a host of its own (no cap by this machine's cores)")
      ("max-variable-mib", value_or(&max_variable_mib, 32.0)->notifier(positive()),
       "give larger variables fewer rows (real runs and predictions alike)");
  po::variables_map vm;
  if (int rc = parse(argc, argv, kUsage, opts, vm); rc >= 0) return rc;
  const bool quick = vm.count("quick") > 0;
  if (model_paths.empty())
    model_paths = {"scenarios/models/dense_heavy.textproto", "scenarios/models/embedding_heavy.textproto"};

  std::vector<Model> models;
  for (auto path : model_paths) {
    path = find_data(path, data_dir);
    auto loaded = sim::load_model_file(path);
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps tune --validate: %s\n", e.to_string().c_str());
    if (!std::filesystem::exists(path))
      std::fprintf(stderr, "twinps tune --validate: %s\n", data_search_note(data_dir).c_str());
    if (!loaded.ok()) return kExitBadInput;
    Model m{std::filesystem::path(path).stem().string(), loaded.model, {}};
    for (const auto& note : fit_variables(m.model, max_variable_mib * (1 << 20)))
      std::fprintf(stderr, "twinps tune --validate: %s: %s (--max-variable-mib %g)\n", m.name.c_str(), note.c_str(),
                   max_variable_mib);
    models.push_back(std::move(m));
  }
  if (!profile_path.empty()) {
    profile_path = find_data(profile_path, data_dir);
    auto loaded = sim::load_profile_file(profile_path);
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps tune --validate: %s\n", e.to_string().c_str());
    if (!loaded.ok()) return kExitBadInput;
    for (auto& m : models) m.profile = loaded.profile;
  }
  std::ofstream csv;
  if (!csv_path.empty()) {
    csv.open(csv_path, std::ios::trunc);
    if (!csv) {
      std::fprintf(stderr, "twinps tune --validate: cannot write %s\n", csv_path.c_str());
      return kExitBadInput;
    }
  }
  const std::vector<Config> grid = quick ? quick_grid() : full_grid(static_cast<int>(models.size()));
  std::string work_dir;
  try {
    work_dir = make_temp_dir("validate");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twinps tune --validate: %s\n", e.what());
    return kExitFailed;
  }

  if (profile_path.empty()) {
    for (auto& m : models) {
      spdlog::info("tune --validate: calibrating for {} ...", m.name);
      CalibrationOptions co;
      co.model = &m.model;
      co.work_dir = work_dir;
      auto c = calibrate(co);
      if (!c.ok()) {
        std::fprintf(stderr, "twinps tune --validate: calibration failed: %s\n", describe(c.status()).c_str());
        return kExitFailed;
      }
      m.profile = c->profile;
    }
  }
  for (const auto& m : models) {
    std::string text;
    google::protobuf::TextFormat::PrintToString(m.profile, &text);
    std::replace(text.begin(), text.end(), '\n', ' ');
    std::printf("profile for %s: %s\n", m.name.c_str(), text.c_str());
  }

  // The cores the cluster shares, measured before the real runs (whose servers would compete).
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  const int ncores = static_cast<int>(std::max(1L, online));
  const double usable_cores =
      vm.count("dedicated-hosts") ? 0 : ncores / compute_slowdown(ncores, models[0].model.batch_size(), 0.5);
  if (usable_cores > 0) std::printf("cores: %d, usable %.2f (compute_gradient on every core at once)\n", ncores, usable_cores);

  // Real runs, the grid `rounds` times over.
  std::vector<scenario::SyntheticModel> sharded;  // per configuration: its model with the partitioner
  for (const Config& c : grid) {
    const Model& m = models[static_cast<std::size_t>(c.model)];
    auto partitioner = sim::partitioner_for(m.model, sim::PartitionerKind::kFixed, c.shards);
    if (!partitioner.ok()) {
      std::fprintf(stderr, "twinps tune --validate: %s: %s\n", m.name.c_str(), describe(partitioner.status()).c_str());
      return kExitBadInput;
    }
    sharded.push_back(m.model);
    *sharded.back().mutable_partitioner() = *partitioner;
  }
  std::vector<std::vector<RealRunResult>> runs(grid.size());
  for (int round = 0; round < rounds; ++round) {
    for (std::size_t i = 0; i < grid.size(); ++i) {
      const Config& c = grid[i];
      const std::string& name = models[static_cast<std::size_t>(c.model)].name;
      RealRunOptions ro;
      ro.model = sharded[i];
      ro.workers = c.workers;
      ro.ps = c.ps;
      ro.seconds = seconds;
      ro.work_dir = work_dir + format("/%s-%dw-%dps-%ds-%d", name.c_str(), c.workers, c.ps, c.shards, round);
      std::filesystem::create_directories(ro.work_dir);
      spdlog::info("tune --validate: round {}/{}: {} {} {} shards: real run ...", round + 1, rounds, name,
                   cluster_name(c), c.shards);
      auto real = run_real(ro);
      if (!real.ok()) {
        std::fprintf(stderr, "twinps tune --validate: real run failed: %s (logs in %s)\n",
                     describe(real.status()).c_str(), ro.work_dir.c_str());
        return kExitFailed;
      }
      runs[i].push_back(*real);
    }
  }

  // Predictions: each configuration's median run, closure for closure.
  std::vector<Row> rows;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const Config& c = grid[i];
    auto& r = runs[i];
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a.steps_per_second < b.steps_per_second; });
    const RealRunResult& real = r[r.size() / 2];
    sim::PredictRequest pr;
    pr.model = sharded[i];
    pr.workers = c.workers;
    pr.ps = c.ps;
    pr.profile = models[static_cast<std::size_t>(c.model)].profile;
    // Numeric by default: timing-only steps move each distinct row once, where
    // real (and numeric) ones pull and push every row looked up.
    pr.timing_only = vm.count("timing-only") > 0;
    pr.warmup = real.warmup;
    pr.measured = real.measured;
    auto predicted = sim::predict(pr);
    if (!predicted.ok()) {
      std::fprintf(stderr, "twinps tune --validate: prediction failed: %s\n", describe(predicted.status()).c_str());
      return kExitFailed;
    }
    // CPU seconds the simulation charged per step: the worker's arithmetic and every ps's service (its
    // busy fraction over the measured phase). On shared cores, steps/s cannot exceed cores / that.
    // step_time is left out: it is mostly waiting (dispatch round trips, wake-ups), not CPU — two
    // workers run more than twice as many steps as one.
    const double hosts = predicted->steps_per_second;
    auto spec = sim::model_spec(pr.model);
    if (!spec.ok()) return kExitBadInput;  // checked when the file was loaded
    double cpu_per_step = pr.profile.compute().per_gflop_s() * synthetic::step_flops(*spec) / 1e9;
    for (double u : predicted->ps_utilisation) cpu_per_step += u / hosts;
    const double cores = usable_cores > 0 ? usable_cores / cpu_per_step : hosts;
    rows.push_back({c, real.warmup, real.measured, hosts, cores, std::min(hosts, cores), real.steps_per_second});
  }
  std::error_code ec;
  std::filesystem::remove_all(work_dir, ec);

  std::printf("%-18s %-9s %6s %8s %8s %8s %14s %14s %8s\n", "model", "cluster", "shards", "closures", "hosts",
              "cores", "predicted st/s", "measured st/s", "error");
  if (csv)
    csv << "model,workers,ps,shards,warmup,measured_closures,hosts_steps_per_s,cores_steps_per_s,predicted_steps_per_s,"
           "measured_steps_per_s,error_pct\n";
  std::vector<double> errors;
  for (const Row& r : rows) {
    const Model& m = models[static_cast<std::size_t>(r.config.model)];
    std::printf("%-18s %-9s %6d %8d %8.2f %8.2f %14.2f %14.2f %+7.1f%%\n", m.name.c_str(),
                cluster_name(r.config).c_str(), r.config.shards, r.measured, r.hosts, r.cores, r.predicted, r.real,
                r.error_pct());
    if (csv)
      csv << m.name << ',' << r.config.workers << ',' << r.config.ps << ',' << r.config.shards << ',' << r.warmup << ','
          << r.measured << ',' << r.hosts << ',' << r.cores << ',' << r.predicted << ',' << r.real << ',' << r.error_pct() << '\n';
    errors.push_back(std::abs(r.error_pct()));
  }
  std::printf("\nerror |predicted - measured| / measured: median %.1f %%, worst %.1f %% over %zu configurations\n",
              median(errors), *std::max_element(errors.begin(), errors.end()), errors.size());

  // Shard recommendation, per model and cluster measured at several shard counts. The simulation's
  // pick is what `twinps tune` would recommend from it: the fewest shards predicted (host per task)
  // within 2 % of the fastest.
  std::map<std::tuple<int, int, int>, std::vector<const Row*>> groups;  // rows in grid order: shards ascending
  for (const Row& r : rows) groups[{r.config.model, r.config.workers, r.config.ps}].push_back(&r);
  for (const auto& [key, group] : groups) {
    if (group.size() < 2) continue;
    double fastest = 0, best_real = 0;
    for (const Row* r : group) fastest = std::max(fastest, r->hosts);
    const Row* pick = nullptr;
    const Row* real_best = nullptr;
    for (const Row* r : group) {
      if (!pick && r->hosts >= 0.98 * fastest) pick = r;
      if (r->real > best_real) best_real = r->real, real_best = r;
    }
    const bool good = pick->real >= 0.95 * best_real;
    std::printf("%s %s: simulation picks %d shards (measured %.2f steps/s), best measured %d shards (%.2f): %s\n",
                models[static_cast<std::size_t>(std::get<0>(key))].name.c_str(), cluster_name(pick->config).c_str(),
                pick->config.shards, pick->real, real_best->config.shards, best_real,
                good ? "within 5 %" : "NOT within 5 %");
  }
  return kExitOk;
}

}  // namespace twinps::cli
