// twinps bench train: training throughput of the tutorial model (TensorFlow's
// parameter-server tutorial: 2 ps, 3 workers, batch 8 by default), or of a
// model spec on data files (--model, --train-data), in real mode, as users
// run it: each repeat is a fresh `twinps train`, either
// --in-process (every task in one process, one thread each) or as separate
// processes (`twinps serve` per ps and worker, `twinps train` as chief with
// TF_CONFIG). The number is the coordinator's own: examples trained per
// second from the first scheduled step to the last epoch's end (startup,
// shard creation and the final evaluations excluded).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cluster/cluster_spec.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"
#include "tools/data_plane_flag.h"
#include "tools/process_cluster.h"
#include "tools/subprocess.h"

namespace twinps::cli {
namespace {

struct TrainBench {
  int workers = 3, ps = 2, batch_size = 8;
  int epochs = 10, steps_per_epoch = 1000;
  std::vector<int> steps_per_execution{1, 10};
  int repeats = 3;
  std::string where = "both";
  std::string data_plane = "tcp";
  // A model spec and its data instead of the tutorial; then the spec's own
  // epochs, steps and batch size hold unless the flags were given.
  std::string model, train_data, train_labels, format = "auto";
  bool epochs_given = false, steps_given = false, batch_given = false;
};

std::vector<std::string> train_args(const TrainBench& b, int spe, const std::string& report) {
  const bool tutorial = b.model.empty();
  std::vector<std::string> args{"--steps-per-execution", std::to_string(spe), "--data-plane", b.data_plane,
                                "--report", report};
  if (tutorial || b.epochs_given) args.insert(args.end(), {"--epochs", std::to_string(b.epochs)});
  if (tutorial || b.steps_given) args.insert(args.end(), {"--steps-per-epoch", std::to_string(b.steps_per_epoch)});
  if (tutorial || b.batch_given) args.insert(args.end(), {"--batch-size", std::to_string(b.batch_size)});
  // Only training is timed: no evaluation pass over a test split.
  if (!tutorial) args.insert(args.end(), {"--model", b.model, "--train-data", b.train_data, "--format", b.format});
  if (!b.train_labels.empty()) args.insert(args.end(), {"--train-labels", b.train_labels});
  return args;
}

// One run; examples/s, or a negative number after printing why it failed.
double run_once(const TrainBench& b, bool in_process, int spe, const std::string& dir, int run) {
  const std::string self = self_binary();
  const std::string tag = (in_process ? "inproc" : "procs") + std::to_string(spe) + "_" + std::to_string(run);
  const std::string report = dir + "/" + tag + ".json";
  std::unique_ptr<ProcessCluster> servers;  // stopped when this returns
  std::vector<std::string> env;
  std::vector<std::string> args{self, "train"};
  if (in_process) {
    args.insert(args.end(), {"--in-process", "--workers", std::to_string(b.workers), "--ps", std::to_string(b.ps)});
  } else {
    // Each server on a port the OS picks (tools/process_cluster.h), its logs under DIR/TAG.
    const std::string log_dir = dir + "/" + tag;
    std::filesystem::create_directories(log_dir);
    const std::vector<std::string> serve_args{"--data-plane", b.data_plane};
    auto cluster = ProcessCluster::start(b.workers, b.ps, serve_args, serve_args, log_dir);
    if (!cluster.ok()) {
      std::fprintf(stderr, "twinps bench train: %s\n", describe(cluster.status()).c_str());
      return -1;
    }
    servers = std::move(*cluster);
    TfConfig chief;
    chief.cluster = make_cluster(b.workers, b.ps, /*chief=*/true, [&](TaskId t) { return servers->addresses().at(t); });
    chief.task = TaskId::chief();
    env.push_back("TF_CONFIG=" + chief.to_json());
  }
  const auto extra = train_args(b, spe, report);
  args.insert(args.end(), extra.begin(), extra.end());
  Child train = Child::start(args, env, dir, tag + "_train");
  if (!train.wait(std::chrono::minutes(30)) || train.exit_code() != 0) {
    std::fprintf(stderr, "twinps bench train: training failed (exit %d): %s\n", train.exit_code(), train.err().c_str());
    return -1;
  }
  try {
    std::ifstream in(report);
    return nlohmann::json::parse(in)["examples_per_second"].get<double>();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "twinps bench train: unreadable report %s: %s\n", report.c_str(), e.what());
    return -1;
  }
}

}  // namespace

int run_bench_train(int argc, char** argv) {
  TrainBench b;
  po::options_description opts("twinps bench train options");
  opts.add_options()("help,h", "show this help")
      ("where", value_or(&b.where, std::string("both"))->notifier(one_of({"in-process", "processes", "both"})),
       "in-process, processes or both")
      ("steps-per-execution", po::value(&b.steps_per_execution)->multitoken()->default_value({1, 10}, "1 10"),
       "steps each closure runs (several values: one measurement each)")
      ("epochs", value_or(&b.epochs, 10)->notifier(at_least(1)), "epochs per run")
      ("steps-per-epoch", value_or(&b.steps_per_epoch, 1000)->notifier(at_least(1)), "steps per epoch")
      ("repeats", value_or(&b.repeats, 3)->notifier(at_least(1)), "runs per configuration")
      ("workers", value_or(&b.workers, 3)->notifier(at_least(1)), "worker tasks")
      ("ps", value_or(&b.ps, 2)->notifier(at_least(1)), "parameter-server tasks")
      ("batch-size", value_or(&b.batch_size, 8)->notifier(at_least(1)), "examples per step")
      ("data-plane", value_or(&b.data_plane, std::string("tcp"))->notifier(one_of_data_planes()),
       kDataPlaneHelp)
      ("model", po::value(&b.model), "a model spec to train instead of the tutorial (needs --train-data)")
      ("train-data", po::value(&b.train_data), "with --model: its training data files (globs)")
      ("train-labels", po::value(&b.train_labels), "with --model on IDX files: the labels files (globs)")
      ("format", value_or(&b.format, std::string("auto"))->notifier(one_of({"auto", "csv", "libsvm", "idx", "tfrecord"})),
       "with --model: the data files' format");
  po::variables_map vm;
  if (int rc = parse(argc, argv,
                     "usage: twinps bench train [--where in-process|processes|both] [--steps-per-execution N...]\n"
                     "       twinps bench train --model SPEC --train-data GLOB [...]\n"
                     "Training throughput (examples/s) in real mode, median of fresh runs: the tutorial, or a\n"
                     "model spec on data files (its own epochs, steps and batch size unless given here).",
                     opts, vm);
      rc >= 0)
    return rc;
  b.epochs_given = !vm["epochs"].defaulted();
  b.steps_given = !vm["steps-per-epoch"].defaulted();
  b.batch_given = !vm["batch-size"].defaulted();
  if (b.model.empty() != b.train_data.empty()) {
    std::fprintf(stderr, "twinps bench train: --model and --train-data go together\n");
    return kExitBadInput;
  }
  net::GrpcTransportOptions checked;
  if (!apply_data_plane("bench train", b.data_plane, &checked)) return kExitBadInput;
  if (b.steps_per_execution.empty() ||
      std::any_of(b.steps_per_execution.begin(), b.steps_per_execution.end(), [](int s) { return s < 1; })) {
    std::fprintf(stderr, "twinps bench train: --steps-per-execution: every value must be at least 1\n");
    return kExitBadInput;
  }
  const ScratchDir scratch("bench-train");
  const std::string& dir = scratch.path();
  const std::string load_before = load_average();
  if (b.model.empty())
    std::printf("twinps bench train: tutorial model, %d ps x %d workers, batch %d, %d epochs x %d steps, data plane "
                "%s, %d run(s) each\n",
                b.ps, b.workers, b.batch_size, b.epochs, b.steps_per_epoch, b.data_plane.c_str(), b.repeats);
  else
    std::printf("twinps bench train: %s on %s, %d ps x %d workers, data plane %s, %d run(s) each\n", b.model.c_str(),
                b.train_data.c_str(), b.ps, b.workers, b.data_plane.c_str(), b.repeats);
  Table t;
  for (bool in_process : {true, false}) {
    if (b.where == (in_process ? "processes" : "in-process")) continue;
    for (int spe : b.steps_per_execution) {
      std::vector<double> runs;
      for (int r = 0; r < b.repeats; ++r) {
        const double v = run_once(b, in_process, spe, dir, r);
        if (v < 0) return kExitFailed;
        if (!(v > 0)) {
          std::fprintf(stderr, "twinps bench train: run %d trained no example (0 examples/s): no progress, no rate to "
                       "report\n", r + 1);
          return kExitFailed;
        }
        runs.push_back(v);
      }
      std::sort(runs.begin(), runs.end());
      const double median =
          runs.size() % 2 ? runs[runs.size() / 2] : (runs[runs.size() / 2 - 1] + runs[runs.size() / 2]) / 2;
      t.row(format("%s, steps-per-execution %d", in_process ? "in-process" : "processes", spe),
            format("%.0f examples/s  [%.0f .. %.0f]", median, runs.front(), runs.back()));
    }
  }
  t.row("load average", load_before + " -> " + load_average());
  t.print();
  return kExitOk;
}

}  // namespace twinps::cli
