// twinps calibrate: measure this machine's costs with real `twinps serve`
// processes on loopback and write them as a CostProfile (tools/tune/calibration.h).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "sim/scenario_loader.h"
#include "tools/cli.h"
#include "tools/data_dir.h"
#include "tools/data_plane_flag.h"
#include "tools/commands/commands.h"
#include "tools/subprocess.h"
#include "tools/tune/calibration.h"

namespace twinps::cli {

int run_calibrate(int argc, char** argv) {
  std::string out_path, model_path, data_plane;
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
      ("verbose,v", "print each measurement as it is taken");
  po::variables_map vm;
  if (int rc = parse(argc, argv,
                     "usage: twinps calibrate [--out FILE] [--model FILE]\n"
                     "Measures what the simulator's cost model needs on this machine — each side's CPU per\n"
                     "call (per message, item, row and byte, over sizes up to the largest tensor), each\n"
                     "optimizer's apply cost over sizes, the control plane's CPU and the loopback's latency, the\n"
                     "gradient kernel's price, the usable cores — with real `twinps serve` processes on\n"
                     "loopback, and writes a CostProfile for scenarios' `cost_profile` and `twinps tune\n"
                     "--profile`. Takes about a minute and a half.",
                     opts, vm);
      rc >= 0)
    return rc;
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
  if (!out_path.empty()) {  // fail on a bad path now, not after the measurement
    std::ofstream probe(out_path, std::ios::app);
    if (!probe) {
      std::fprintf(stderr, "twinps calibrate: cannot write %s\n", out_path.c_str());
      return kExitBadInput;
    }
  }
  try {
    o.work_dir = make_temp_dir("calibrate");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twinps calibrate: %s\n", e.what());
    return kExitFailed;
  }
  auto c = calibrate(o);
  if (!c.ok()) {
    std::fprintf(stderr, "twinps calibrate: %s (logs in %s)\n", describe(c.status()).c_str(), o.work_dir.c_str());
    return kExitFailed;
  }
  std::error_code ec;
  std::filesystem::remove_all(o.work_dir, ec);
  const std::string text = profile_text(*c);
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
  std::fputs(c->report.c_str(), stdout);
  std::printf("wrote %s\n", out_path.c_str());
  return kExitOk;
}

}  // namespace twinps::cli
