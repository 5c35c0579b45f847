// A spec whose optimizer groups differ, simulated numerically: every
// variable's shards carry their group's optimizer to the simulated parameter
// servers as they do on the in-memory cluster, so one worker ends with
// bitwise the in-memory run's parameters — and not with those of the same
// spec under one optimizer. On examples/linear (Adagrad for the weights, SGD
// with momentum for the dense layer) and LIBSVM's heart_scale from Debian's
// liblinear-tools (skipped, saying why, without it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "inmemory/in_memory_cluster.h"
#include "core/model/spec_loader.h"
#include "core/training/model_functions.h"
#include "core/training/parameter_hash.h"
#include "core/training/trainer.h"
#include "sim/scenario_loader.h"
#include "sim/simulation.h"
#include "sim/spec_workload.h"
#include "sim/workload.h"
#include "tests/sim/test_paths.h"

namespace twinps::sim {
namespace {

constexpr char kHeartScale[] = "/usr/share/doc/liblinear-tools/examples/heart_scale";

std::shared_ptr<SpecWorkload> linear_workload(bool one_optimizer) {
  model::LoadedSpec loaded =
      model::load_model_spec_file((testing::source_dir() / "examples/linear/model.textproto").string());
  EXPECT_TRUE(loaded.ok()) << loaded.error_text();
  if (one_optimizer) loaded.spec.mutable_optimizer()->RemoveLast();  // Adagrad alone, for every layer
  if (one_optimizer) loaded.spec.mutable_optimizer(0)->clear_layer();
  auto compiled = model::CompiledModel::compile(loaded.spec);
  EXPECT_TRUE(compiled.ok()) << describe(compiled.status());
  data::FileDatasetSpec files;
  files.add_patterns(kHeartScale);
  files.set_format(data::FileDatasetSpec::LIBSVM);
  auto source = training::file_data(files);
  EXPECT_TRUE(source.ok()) << describe(source.status());
  auto w = std::make_shared<SpecWorkload>();
  w->model = *compiled;
  w->train = *source;
  w->eval = *source;
  w->options.epochs = 1;
  w->options.steps_per_epoch = 20;
  w->options.eval_mode = training::EvalMode::kDirect;
  return w;
}

std::uint64_t in_memory_hash(const SpecWorkload& w, std::uint64_t seed) {
  FunctionRegistry registry;
  training::register_training_functions(registry);
  InMemoryClusterOptions o;
  o.shape = ClusterShape{1, 2};
  o.seed = seed;
  InMemoryCluster cluster(registry, o);
  training::Trainer trainer(w.model, registry, w.train, w.eval, w.options);
  auto result = cluster.run(trainer.run(cluster.coordinator()));
  EXPECT_TRUE(result && result->ok()) << (result ? describe(result->status()) : "did not finish");
  auto shards = cluster.run(cluster.coordinator().export_variables());
  EXPECT_TRUE(shards && shards->ok());
  return shards && shards->ok() ? training::parameter_hash(**shards) : 0;
}

std::uint64_t simulated_hash(const std::shared_ptr<SpecWorkload>& w, std::uint64_t seed) {
  const auto dir = std::filesystem::temp_directory_path() / ("twinps_groups_sim_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string text = "name: \"linear\" cluster { workers: 1 ps: 2 } model_spec: \"" +
                           std::filesystem::relative(testing::source_dir() / "examples/linear/model.textproto", dir)
                               .string() +
                           "\" seed: " + std::to_string(seed);
  LoadedScenario loaded = parse_scenario(text, (dir / "scenario.textproto").string());
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(loaded.ok()) << (loaded.errors.empty() ? "" : loaded.errors.front().to_string());
  SimOptions options;
  options.spec = w;
  Simulation simulation(loaded.scenario, options);
  SimResult r = simulation.run();
  EXPECT_TRUE(r.setup_error.ok()) << describe(r.setup_error);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.final_iterations, 20);
  EXPECT_TRUE(r.parameter_hash.has_value());
  return r.parameter_hash.value_or(0);
}

TEST(OptimizerGroupsSimTest, OneWorkerEndsWithTheInMemoryRunsParametersUnderEachGroupsOptimizer) {
  if (!std::filesystem::exists(kHeartScale))
    GTEST_SKIP() << "Debian's liblinear-tools is not installed (" << kHeartScale << " is missing)";
  auto groups = linear_workload(false);
  const std::uint64_t simulated = simulated_hash(groups, 3);
  EXPECT_EQ(simulated, in_memory_hash(*groups, 3));
  // The groups matter: Adagrad for every variable ends elsewhere.
  auto one = linear_workload(true);
  EXPECT_NE(simulated_hash(one, 3), simulated);
}

}  // namespace
}  // namespace twinps::sim
