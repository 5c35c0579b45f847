// examples/custom_model: a program outside the twinps tree, built against
// the installed twinps (find_package(twinps)), that trains a model spec whose
// "rbf" layer is its own C++ (rbf_layer.h) with twinps's one trainer
// (core/training/trainer.h) on 2 parameter servers and 3 workers in this
// process:
//
//   custom_model MODEL.textproto DATA_DIR [--in-process]
//
//   1. registers the rbf layer type and checks its backward against finite
//      differences (exit 1 when it is wrong);
//   2. writes the data to DATA_DIR/train.csv and DATA_DIR/test.csv (points
//      generated from a fixed seed: the same files every run);
//   3. loads the spec (a mistake: file:line:column, field, exit 2);
//   4. trains on the deterministic in-memory cluster, or with --in-process on
//      an in-process cluster over real gRPC on loopback ports, as `twinps
//      train --in-memory` / `--in-process` do;
//   5. prints each epoch's metrics and, last, `test accuracy: X` over the
//      test file.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/data/file_dataset.h"
#include "inmemory/in_memory_cluster.h"
#include "core/model/compiled_model.h"
#include "core/model/gradient_check.h"
#include "core/model/spec_loader.h"
#include "core/runtime/random.h"
#include "core/training/model_functions.h"
#include "core/training/trainer.h"
#include "net/in_process_cluster.h"
#include "rbf_layer.h"

namespace {

using namespace twinps;

constexpr int kWorkers = 3;
constexpr int kPs = 2;
constexpr std::int64_t kTrainRecords = 4000;
constexpr std::int64_t kTestRecords = 1000;

// Points around (+-1.5, +-1.5), spread 0.5; label 1 where x * y > 0 (the
// quadrant of the center drawn, XOR of the signs). CSV columns xy_0, xy_1
// (the spec's 2-wide input "xy") and label.
bool write_xor_csv(const std::filesystem::path& path, std::int64_t records, RandomStream random) {
  std::ofstream out(path);
  out << "xy_0,xy_1,label\n";
  for (std::int64_t i = 0; i < records; ++i) {
    const double cx = random.bernoulli(0.5) ? 1.5 : -1.5;
    const double cy = random.bernoulli(0.5) ? 1.5 : -1.5;
    out << random.normal(cx, 0.5) << "," << random.normal(cy, 0.5) << "," << (cx * cy > 0 ? 1 : 0) << "\n";
  }
  return static_cast<bool>(out);
}

// The rbf layer's gradients at random points, as tests/core/layers_test.cc
// checks the built-in layers'. The layer is built from a spec's parameters,
// the way the model builds it.
bool rbf_gradients_hold() {
  model::spec::Layer layer;
  layer.set_name("rbf");
  layer.add_input("xy");
  layer.mutable_custom()->set_type("rbf");
  auto* units = layer.mutable_custom()->add_param();
  units->set_name("units");
  units->set_number(3);
  auto built = model::build_custom_layer(layer, {2});
  if (!built.ok()) {
    std::fprintf(stderr, "custom_model: %s\n", describe(built.status()).c_str());
    return false;
  }
  model::GradientCheckOptions options;
  options.params = {Matrix::Random(3, 2), Matrix::Constant(3, 1, -0.5f)};  // centers, log_gamma
  auto check = model::check_layer_gradients(*built->layer, {2}, options);
  if (!check.ok()) {
    std::fprintf(stderr, "custom_model: rbf gradient check failed: %s\n", describe(check.status()).c_str());
    return false;
  }
  std::printf("rbf gradient check: %lld elements, worst relative error %.2e\n",
              static_cast<long long>(check->elements_checked), check->worst_relative_error);
  return true;
}

StatusOr<training::DataSource> csv_data(const model::CompiledModel& model, const std::filesystem::path& file) {
  data::FileDatasetSpec spec;
  spec.add_patterns(file.string());
  spec.set_format(data::FileDatasetSpec::CSV);
  spec.set_shuffle_buffer(1000);
  spec.set_shuffle_seed(1);
  data::set_columns(model.schema(), spec);
  return training::file_data(spec);
}

training::TrainerCallbacks print_epochs() {
  training::TrainerCallbacks callbacks;
  callbacks.on_epoch = [](const training::EpochResult& e) {
    std::printf("epoch %d: loss %.4f, accuracy %.4f\n", e.epoch + 1, e.train.loss, e.train.accuracy.value_or(0));
    std::fflush(stdout);
  };
  return callbacks;
}

// What `twinps train --in-memory` does: every task on one deterministic engine.
std::optional<StatusOr<training::TrainResult>> train_in_memory(training::Trainer& trainer,
                                                               const FunctionRegistry& registry) {
  InMemoryClusterOptions options;
  options.shape = ClusterShape{kWorkers, kPs};
  options.seed = 1;
  InMemoryCluster cluster(registry, options);
  return cluster.run(trainer.run(cluster.coordinator()));
}

// What `twinps train --in-process` does: every task a gRPC server on a loopback port.
std::optional<StatusOr<training::TrainResult>> train_in_process(training::Trainer& trainer,
                                                                const FunctionRegistry& registry) {
  net::InProcessClusterOptions options;
  options.workers = kWorkers;
  options.ps = kPs;
  options.registry = &registry;
  auto cluster = net::InProcessCluster::start(options);
  if (!cluster.ok()) return StatusOr<training::TrainResult>(cluster.status());
  net::RealNode& node = (*cluster)->coordinator();
  ClusterCoordinator coordinator(node.runtime(), ClusterShape{kWorkers, kPs}, registry, CoordinatorOptions{});
  return block_on(node.executor(), trainer.run(coordinator));
}

int run(const std::string& spec_path, const std::filesystem::path& data_dir, bool in_process) {
  if (Status registered = custom_model::register_rbf_layer(); !registered.ok()) {
    std::fprintf(stderr, "custom_model: %s\n", describe(registered).c_str());
    return 1;
  }
  if (!rbf_gradients_hold()) return 1;

  std::error_code ec;
  std::filesystem::create_directories(data_dir, ec);
  const RandomStream data_random(20261125);
  if (!write_xor_csv(data_dir / "train.csv", kTrainRecords, data_random.fork("train")) ||
      !write_xor_csv(data_dir / "test.csv", kTestRecords, data_random.fork("test"))) {
    std::fprintf(stderr, "custom_model: cannot write the data to %s\n", data_dir.c_str());
    return 2;
  }

  model::LoadedSpec loaded = model::load_model_spec_file(spec_path);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.error_text().c_str());
    return 2;
  }
  auto compiled = model::CompiledModel::compile(loaded.spec);
  if (!compiled.ok()) {
    std::fprintf(stderr, "custom_model: %s: %s\n", spec_path.c_str(), describe(compiled.status()).c_str());
    return 2;
  }
  auto train = csv_data(**compiled, data_dir / "train.csv");
  auto test = csv_data(**compiled, data_dir / "test.csv");
  for (const auto* source : {&train, &test})
    if (!source->ok()) {
      std::fprintf(stderr, "custom_model: %s\n", describe(source->status()).c_str());
      return 2;
    }

  // Every task of the cluster gets the step and data functions (each
  // compiles the spec it is sent, finding "rbf" in this program's registry).
  FunctionRegistry registry;
  training::register_training_functions(registry);
  training::TrainerOptions options;
  options.epochs = loaded.spec.training().epochs();
  options.eval_mode = training::EvalMode::kDirect;  // the test file once, on the coordinator
  training::Trainer trainer(*compiled, registry, *train, *test, options, print_epochs());
  if (Status s = trainer.check(); !s.ok()) {
    std::fprintf(stderr, "custom_model: %s\n", describe(s).c_str());
    return 2;
  }
  std::printf("training %s on %d ps x %d workers (%s)\n", spec_path.c_str(), kPs, kWorkers,
              in_process ? "in-process, gRPC on loopback" : "in-memory");
  auto result = in_process ? train_in_process(trainer, registry) : train_in_memory(trainer, registry);
  if (!result || !result->ok()) {
    std::fprintf(stderr, "custom_model: training failed: %s\n",
                 result ? describe(result->status()).c_str() : "it did not finish");
    return 1;
  }
  const training::TrainResult& r = **result;
  if (!r.eval || !r.eval->accuracy) {
    std::fprintf(stderr, "custom_model: no evaluation of the test data\n");
    return 1;
  }
  std::printf("%lld steps, final loss %.4f\n", static_cast<long long>(r.steps_trained), r.final_loss);
  std::printf("test accuracy: %.4f\n", *r.eval->accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  bool in_process = false;
  std::erase_if(args, [&](const std::string& a) { return a == "--in-process" && (in_process = true); });
  if (args.size() != 2) {
    std::fprintf(stderr, "usage: custom_model MODEL.textproto DATA_DIR [--in-process]\n");
    return 2;
  }
  return run(args[0], args[1], in_process);
}
