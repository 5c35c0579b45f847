// A model spec trained on files: CSV written to disk, read by per-worker file
// datasets (core/data/file_dataset.h) whose columns come from the spec, on
// the in-memory cluster; the held-out file evaluated from the trained values.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/data/file_dataset.h"
#include "inmemory/in_memory_cluster.h"
#include "core/model/compiled_model.h"
#include "core/model/spec_loader.h"
#include "core/variables/sharded_variable.h"

namespace twinps::model {
namespace {

constexpr char kSpec[] = R"pb(
  input { name: "xy" dense { width: 2 } }
  input { name: "quadrant" categorical { vocabulary { token: ["ne", "nw", "sw", "se"] } } }
  label { column: "ring" type: INT64 }
  layer { name: "q" input: "quadrant" embedding { dim: 2 } }
  layer { name: "in" input: ["xy", "q"] concatenate {} }
  layer { name: "h1" input: "in" dense { units: 32 activation: RELU } }
  layer { name: "h2" input: "h1" dense { units: 32 activation: RELU } }
  layer { name: "logits" input: "h2" dense { units: 3 } }
  head { input: "logits" loss: SOFTMAX_CROSS_ENTROPY }
  metric: ACCURACY
  optimizer { adam {} learning_rate { constant: 0.01 } }
  batch_size: 32
)pb";

// Points in three rings, with the quadrant as a string feature, as CSV.
void write_rings(const std::filesystem::path& path, int n, std::uint64_t seed) {
  RandomStream r(seed);
  std::ofstream out(path);
  out << "ring,xy,quadrant\n";
  for (int written = 0; written < n;) {
    const double x = r.uniform(-3, 3), y = r.uniform(-3, 3);
    const double radius = std::sqrt(x * x + y * y);
    if (radius >= 3 || std::abs(radius - 1) < 0.1 || std::abs(radius - 2) < 0.1) continue;
    const char* q = x >= 0 ? (y >= 0 ? "ne" : "se") : (y >= 0 ? "nw" : "sw");
    out << static_cast<int>(radius) << "," << x << " " << y << "," << q << "\n";
    ++written;
  }
}

TEST(ModelFilesTest, ASpecTrainsOnCsvFilesReadByPerWorkerFileDatasets) {
  const auto dir = std::filesystem::temp_directory_path() / ("twinps_model_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 4; ++i) write_rings(dir / ("train-" + std::to_string(i) + ".csv"), 500, 10 + i);
  write_rings(dir / "test.csv", 500, 99);

  LoadedSpec loaded = parse_model_spec(kSpec, "rings.textproto");
  ASSERT_TRUE(loaded.ok()) << loaded.error_text();
  auto compiled = CompiledModel::compile(loaded.spec);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const auto& m = *compiled;

  // The files' columns are the ones the model reads.
  data::FileDatasetSpec train;
  train.add_patterns((dir / "train-*.csv").string());
  data::set_columns(m->schema(), train);
  train.set_batch_size(m->batch_size());
  train.set_shuffle_buffer(1000);
  train.set_repeat(-1);

  FunctionRegistry registry;
  m->register_functions(registry);
  data::register_file_dataset_functions(registry);
  InMemoryClusterOptions o;
  o.shape = ClusterShape{2, 2};
  InMemoryCluster cluster(registry, o);
  auto vars = m->build_variables(2);
  ASSERT_TRUE(vars.ok());
  auto& c = cluster.coordinator();
  ASSERT_TRUE(cluster.run(c.start(vars->layouts, vars->optimizer, vars->initial))->ok());
  auto program = [&]() -> Task<Status> {
    PerWorkerDataset ds = c.create_per_worker_dataset(data::kFileDatasetFunction, data::file_dataset_args(train, 2));
    PerWorkerValues it = c.create_per_worker_iterator(ds);
    for (int i = 0; i < 40; ++i) {
      std::vector<Arg> args{it, Value(std::int64_t{10})};
      auto rv = co_await c.schedule(m->train_step(), std::move(args));
      if (!rv.ok()) co_return rv.status();
    }
    co_return co_await c.join();
  };
  auto trained = cluster.run(program());
  ASSERT_TRUE(trained && trained->ok()) << (trained ? describe(*trained) : "did not finish");

  // The held-out file, read whole, evaluated from the values on the ps.
  auto shards = cluster.run(c.export_variables());
  ASSERT_TRUE(shards && shards->ok());
  std::map<ShardId, const ShardState*> by_id;
  for (const auto& s : **shards) by_id[s.spec.id] = &s;
  LocalEvaluator::VariableValues values;
  for (const VariableLayout& v : c.variables().all()) {
    if (v.kind != VariableKind::kTrainable) continue;
    std::vector<Matrix> pieces;
    for (const auto& shard : v.shards) pieces.push_back(by_id.at(shard.id)->value);
    values[v.name] = *concat_shards(v, pieces);
  }
  data::FileDatasetSpec test = train;
  test.clear_patterns();
  test.add_patterns((dir / "test.csv").string());
  test.set_shuffle_buffer(0);
  test.set_repeat(1);
  auto test_data = data::FileDataset::create(test, 0, 1);
  ASSERT_TRUE(test_data.ok()) << test_data.status();
  auto iterator = (*test_data)->make_iterator(RandomStream(1));
  LocalEvaluator evaluator(m);
  for (;;) {
    auto batch = iterator->next();
    if (batch.status().code() == absl::StatusCode::kOutOfRange) break;
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_TRUE(evaluator.add(values, iterator->schema(), *batch).ok());
  }
  std::printf("test.csv: accuracy %.4f loss %.4f on %.0f records\n", *evaluator.result().accuracy,
              evaluator.result().loss, evaluator.result().examples);
  EXPECT_EQ(evaluator.result().examples, 500);
  EXPECT_GE(*evaluator.result().accuracy, 0.95);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace twinps::model
