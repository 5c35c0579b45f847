// twinps calibrate: measure this machine's costs with real `twinps serve`
// processes on loopback and write them as a CostProfile (tools/tune/calibration.h).
// --times N measures N times and keeps each price's median; --median-of
// takes the median of profiles written before (tools/tune/profile_median.h).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "sim/scenario_loader.h"
#include "tools/cli.h"
#include "tools/data_dir.h"
#include "tools/data_plane_flag.h"
#include "tools/commands/commands.h"
#include "tools/subprocess.h"
#include "tools/tune/calibration.h"
#include "tools/tune/busy_neighbours.h"
#include "tools/tune/profile_median.h"

namespace twinps::cli {
namespace {

constexpr const char* kUsage =
    "usage: twinps calibrate [--out FILE] [--model FILE] [--times N]\n"
    "       twinps calibrate --median-of FILE FILE ... [--out FILE]\n"
    "Measures what the simulator's cost model needs on this machine — each side's CPU per\n"
    "call (per message, item, item by id, row and byte, over sizes up to the largest tensor),\n"
    "each optimizer's apply cost over sizes, a worker's copies of a variable of several shards,\n"
    "the ps's price by how long it idled and when a request finds it awake, the control\n"
    "plane's CPU by the time between a task's messages (one-worker clusters at six paces), the\n"
    "loopback's latency, the gradient kernel's price, a model spec's layers (dense, embedding)\n"
    "and input pipeline (reading each data format, mapping features), the usable cores, what a\n"
    "message costs more on a crowded host (clusters of 1 to 6 workers), and the fixed prices\n"
    "again with no core idle (a process computing the gradient kernel on every core) — with\n"
    "real `twinps serve` processes on loopback, and writes a CostProfile for\n"
    "scenarios' `cost_profile` and `twinps tune --profile`. Takes about four minutes.\n"
    "With --times N it measures N times and keeps each price's median (--times 3 for\n"
    "`tune --validate`: the crowding price moves between calibrations); --median-of does\n"
    "the same for profiles already written, measuring nothing.";

// Every calibration in turn, then the median of their prices; the report is
// each one's, in order.
StatusOr<Calibration> calibrate_times(const CalibrationOptions& o, int times) {
  if (times == 1) return calibrate(o);
  std::vector<scenario::CostProfile> profiles;
  std::string report = "the median, price by price, of " + std::to_string(times) + " calibrations:\n";
  for (int i = 0; i < times; ++i) {
    // Each in a directory of its own: servers leave their ports and logs there.
    CalibrationOptions one = o;
    one.work_dir = o.work_dir + "/" + std::to_string(i + 1);
    std::error_code ec;
    if (!std::filesystem::create_directories(one.work_dir, ec) || ec)
      return absl::InternalError("cannot create " + one.work_dir + ": " + ec.message());
    auto c = calibrate(one);
    if (!c.ok()) return c.status();
    report += "calibration " + std::to_string(i + 1) + " of " + std::to_string(times) + ":\n" + c->report;
    profiles.push_back(std::move(c->profile));
  }
  auto merged = median_profile(profiles);
  if (!merged.ok()) return merged.status();
  return Calibration{std::move(*merged), std::move(report)};
}

// What a profile file's comment header says was measured (`calibrate`'s
// report), without the two lines that open every written profile.
std::string measurement_report(const std::string& file) {
  std::ifstream in(file);
  std::string report;
  for (std::string line; std::getline(in, line) && line.rfind("#", 0) == 0;) {
    if (line.rfind("# CostProfile (sim/scenario.proto) written by", 0) == 0 ||
        line.rfind("# Every timing is a median over repeats", 0) == 0)
      continue;
    report += line.substr(line.rfind("# ", 0) == 0 ? 2 : 1) + "\n";
  }
  return report;
}

// --median-of: the files' profiles, checked as a scenario's profile is, and
// their median. nullopt after printing what is wrong.
std::optional<Calibration> median_of_files(const std::vector<std::string>& files) {
  if (files.size() < 2) {
    std::fprintf(stderr, "twinps calibrate: --median-of needs at least two profiles (got %zu)\n", files.size());
    return std::nullopt;
  }
  std::vector<scenario::CostProfile> profiles;
  std::string report = "the median, price by price, of " + std::to_string(files.size()) + " profiles:\n";
  for (const std::string& file : files) {
    sim::LoadedProfile loaded = sim::load_profile_file(file);
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps calibrate: %s\n", e.to_string().c_str());
    if (!loaded.ok()) return std::nullopt;
    report += "profile " + std::to_string(profiles.size() + 1) + " of " + std::to_string(files.size()) + ": " + file +
              " (" + loaded.profile.measured_on() + ")\n" + measurement_report(file);
    profiles.push_back(std::move(loaded.profile));
  }
  auto merged = median_profile(profiles);
  if (!merged.ok()) {
    std::fprintf(stderr, "twinps calibrate: --median-of: %s\n", describe(merged.status()).c_str());
    return std::nullopt;
  }
  return Calibration{std::move(*merged), std::move(report)};
}

// Whether `out_path` (empty: stdout) can be written; says so if not.
bool writable(const std::string& out_path) {
  if (out_path.empty() || can_write(out_path)) return true;
  std::fprintf(stderr, "twinps calibrate: cannot write %s\n", out_path.c_str());
  return false;
}

int write_profile(const Calibration& c, const std::string& out_path) {
  const std::string text = profile_text(c);
  if (out_path.empty()) {
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  std::ofstream out(out_path, std::ios::trunc);
  out << text;
  if (!out) {
    std::fprintf(stderr, "twinps calibrate: cannot write %s\n", out_path.c_str());
    return kExitFailed;
  }
  std::fputs(c.report.c_str(), stdout);
  std::printf("wrote %s\n", out_path.c_str());
  return kExitOk;
}

}  // namespace

int run_calibrate(int argc, char** argv) {
  std::string out_path, model_path;
  std::vector<std::string> median_of;
  int times = 1;
  double neighbour_seconds = 0;
  CalibrationOptions o;
  po::options_description opts("twinps calibrate options");
  opts.add_options()("help,h", "show this help")
      ("out", po::value(&out_path), "write the CostProfile here (default: print it)")
      ("model", po::value(&model_path),
       "a synthetic model (scenario.SyntheticModel text): probe message sizes up to its largest variable "
       "(default: --max-mib)")
      ("max-mib", value_or(&o.max_bytes, 32.0)->notifier(in_range(1.0, 256.0)), "probe message sizes up to this many MiB")
      ("repeats", value_or(&o.repeats, 5)->notifier(at_least(1)), "batches per measurement (medians are taken over them)")
      ("batch-seconds", value_or(&o.seconds_per_batch, 0.15)->notifier(in_range(1e-3, 60.0)), "seconds each batch repeats its call")
      ("data-plane", value_or(&o.data_plane, std::string("tcp"))->notifier(one_of_data_planes()),
       "the plane the calls are measured over, as `twinps serve --data-plane` (tcp, tcp-unix, tcp-only, grpc or "
       "tcp-all); the profile records it, and its prices hold for that plane")
      ("times", value_or(&times, 1)->notifier(in_range(1, 20)),
       "calibrate this many times, one after another, and keep each price's median: a calibration's prices move "
       "with the machine's state while it measures")
      ("median-of", po::value(&median_of)->multitoken(),
       "measure nothing: write the median, price by price, of these profiles (written by `twinps calibrate` "
       "with the same settings, on one machine)")
      ("verbose,v", "print each measurement as it is taken")
      ("busy-neighbour", po::value(&neighbour_seconds)->notifier(in_range(1.0, 3600.0)),
       "(what calibrate starts, one per core, to keep every core busy) compute the gradient kernel at normal "
       "priority for this many seconds");
  po::variables_map vm;
  if (int rc = parse(argc, argv, kUsage, opts, vm); rc >= 0) return rc;
  if (vm.count("busy-neighbour")) return compute_as_a_neighbour(neighbour_seconds) == 0 ? kExitOk : kExitFailed;
  if (vm.count("median-of")) {
    // The files say what was measured: flags about measuring have nothing to act on.
    for (const char* flag : {"model", "max-mib", "repeats", "batch-seconds", "data-plane", "times", "verbose"})
      if (vm.count(flag) && !vm[flag].defaulted()) {
        std::fprintf(stderr, "twinps calibrate: --%s: --median-of measures nothing; its profiles were measured\n",
                     flag);
        return kExitBadInput;
      }
  }
  o.verbose = vm.count("verbose") > 0;
  o.max_bytes *= 1 << 20;
  sim::LoadedModel model;
  if (!model_path.empty()) {
    model_path = find_data(model_path);
    model = sim::load_model_file(model_path);
    for (const auto& e : model.errors) std::fprintf(stderr, "twinps calibrate: %s\n", e.to_string().c_str());
    if (!model.ok()) return kExitBadInput;
    o.model = &model.model;
  }
  if (vm.count("median-of")) {
    auto merged = median_of_files(median_of);
    if (!merged) return kExitBadInput;
    if (!writable(out_path)) return kExitBadInput;
    return write_profile(*merged, out_path);
  }
  if (!writable(out_path)) return kExitBadInput;  // now, not after the measurement
  try {
    o.work_dir = make_temp_dir("calibrate");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twinps calibrate: %s\n", e.what());
    return kExitFailed;
  }
  auto c = calibrate_times(o, times);
  if (!c.ok()) {
    std::fprintf(stderr, "twinps calibrate: %s (logs in %s)\n", describe(c.status()).c_str(), o.work_dir.c_str());
    return kExitFailed;
  }
  std::error_code ec;
  std::filesystem::remove_all(o.work_dir, ec);
  return write_profile(*c, out_path);
}

}  // namespace twinps::cli
