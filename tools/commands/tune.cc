// twinps tune (work in progress): real-mode measurement of a synthetic model.
#include <cstdio>

#include "sim/scenario_loader.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/tune/launcher.h"
#include "tools/tune/real_run.h"

namespace twinps::cli {

int run_tune(int argc, char** argv) {
  std::string model_path, mode = "processes";
  RealRunOptions o;
  int shards = 1;
  po::options_description opts("twinps tune options");
  opts.add_options()("help,h", "show this help")
      ("model", po::value(&model_path), "model file")
      ("workers", po::value(&o.workers)->default_value(1), "workers")
      ("ps", po::value(&o.ps)->default_value(1), "ps")
      ("shards", po::value(&shards)->default_value(1), "shards")
      ("seconds", po::value(&o.seconds)->default_value(2), "seconds")
      ("real", po::value(&mode), "processes or in-process");
  po::variables_map vm;
  if (int rc = parse(argc, argv, "usage: twinps tune --model FILE", opts, vm); rc >= 0) return rc;
  auto loaded = sim::load_model_file(model_path);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps tune: %s\n", e.to_string().c_str());
    return kExitBadInput;
  }
  o.model = loaded.model;
  o.model.mutable_partitioner()->set_fixed_shards(shards);
  o.processes = mode == "processes";
  auto dir = make_temp_dir("tune");
  o.work_dir = *dir;
  auto r = run_real(o);
  if (!r.ok()) {
    std::fprintf(stderr, "twinps tune: %s\n", describe(r.status()).c_str());
    return kExitFailed;
  }
  std::printf("warmup %d measured %d in %.3f s: %.1f steps/s\n", r->warmup, r->measured, r->seconds,
              r->steps_per_second);
  return kExitOk;
}

}  // namespace twinps::cli
