// The example specs (examples/<name>/model.textproto) trained on their real
// data as users would: per-worker file datasets on an in-memory cluster of
// 2 parameter servers and 3 workers, then evaluated on the held-out files
// from the values the parameter servers hold.
//
// The tests run shortened (a bound the short run reaches, with margin); the
// issue's bar is asserted at full length, run by hand:
//   TWINPS_EXAMPLES_FULL=1      full length (each example's README gives the
//                               command and the figure it reached)
//   TWINPS_EXAMPLE_EVAL_EVERY=N also print the held-out metrics every N
//                               closures (for tuning a spec)
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "core/data/ctr_generator.h"
#include "core/data/file_dataset.h"
#include "inmemory/in_memory_cluster.h"
#include "core/model/compiled_model.h"
#include "core/model/spec_loader.h"
#include "core/variables/sharded_variable.h"

namespace twinps::model {
namespace {

const std::string kSource = TWINPS_SOURCE_DIR;

bool full_length() {
  const char* full = std::getenv("TWINPS_EXAMPLES_FULL");
  return full && std::string(full) == "1";
}

int eval_every() {
  const char* every = std::getenv("TWINPS_EXAMPLE_EVAL_EVERY");
  return every ? std::max(0, std::atoi(every)) : 0;
}

struct ExampleRun {
  std::string spec_path;
  data::FileDatasetSpec train, test;
  int ps = 2, workers = 3;
  int closures = 0;  // closures scheduled, each of steps_per_closure steps
  int steps_per_closure = 10;
};

// The trainable variables' full values, gathered from the parameter servers.
StatusOr<LocalEvaluator::VariableValues> trained_values(InMemoryCluster& cluster) {
  auto& c = cluster.coordinator();
  auto shards = cluster.run(c.export_variables());
  if (!shards) return absl::InternalError("export_variables did not finish");
  if (!shards->ok()) return shards->status();
  std::map<ShardId, const ShardState*> by_id;
  for (const auto& s : **shards) by_id[s.spec.id] = &s;
  LocalEvaluator::VariableValues values;
  for (const VariableLayout& v : c.variables().all()) {
    if (v.kind != VariableKind::kTrainable) continue;
    std::vector<Matrix> pieces;
    for (const auto& shard : v.shards) pieces.push_back(by_id.at(shard.id)->value);
    auto whole = concat_shards(v, pieces);
    if (!whole.ok()) return whole.status();
    values[v.name] = std::move(*whole);
  }
  return values;
}

// Every record of the held-out files, once, in file order.
StatusOr<MetricValues> evaluate_held_out(const std::shared_ptr<const CompiledModel>& m,
                                         const LocalEvaluator::VariableValues& values, data::FileDatasetSpec test) {
  test.set_batch_size(1000);
  test.set_repeat(1);
  test.set_shuffle_buffer(0);
  auto test_data = data::FileDataset::create(test, 0, 1);
  if (!test_data.ok()) return test_data.status();
  auto iterator = (*test_data)->make_iterator(RandomStream(1));
  LocalEvaluator evaluator(m);
  constexpr int kMaxBatches = 100'000;  // 10^8 records: far above any example's test split
  for (int i = 0; i < kMaxBatches; ++i) {
    auto batch = iterator->next();
    if (batch.status().code() == absl::StatusCode::kOutOfRange) return evaluator.result();
    if (!batch.ok()) return batch.status();
    TWINPS_RETURN_IF_ERROR(evaluator.add(values, iterator->schema(), *batch));
  }
  return absl::InternalError("held-out data did not end within " + std::to_string(kMaxBatches) + " batches");
}

void print(const char* when, const MetricValues& r) {
  std::printf("%s: test loss %.4f", when, r.loss);
  if (r.accuracy) std::printf(" accuracy %.4f", *r.accuracy);
  if (r.auc) std::printf(" auc %.4f", *r.auc);
  std::printf(" on %.0f records\n", r.examples);
  std::fflush(stdout);
}

// Trains the spec at `run.spec_path` on `run.train` and returns its metrics
// on every record of `run.test`.
StatusOr<MetricValues> train_and_test(ExampleRun run) {
  LoadedSpec loaded = load_model_spec_file(run.spec_path);
  if (!loaded.ok()) return absl::InvalidArgumentError(loaded.error_text());
  auto compiled = CompiledModel::compile(loaded.spec);
  if (!compiled.ok()) return compiled.status();
  const auto& m = *compiled;
  // IDX and LibSVM files have fixed columns; CSV and TFRecord read the model's.
  if (!run.train.has_idx() && !run.train.has_libsvm()) {
    data::set_columns(m->schema(), run.train);
    data::set_columns(m->schema(), run.test);
  }
  run.train.set_batch_size(m->batch_size());
  run.train.set_repeat(-1);

  FunctionRegistry registry;
  m->register_functions(registry);
  data::register_file_dataset_functions(registry);
  InMemoryClusterOptions o;
  o.shape = ClusterShape{run.workers, run.ps};
  InMemoryCluster cluster(registry, o);
  auto vars = m->build_variables(run.ps);
  if (!vars.ok()) return vars.status();
  auto& c = cluster.coordinator();
  auto started = cluster.run(c.start(vars->layouts, vars->optimizer, vars->initial));
  if (!started) return absl::InternalError("start did not finish");
  TWINPS_RETURN_IF_ERROR(*started);

  // One dataset and iterator per worker for the whole run; training goes on
  // in chunks only so the held-out metrics can be printed between them.
  std::optional<PerWorkerValues> iterator;
  auto train_closures = [&](int closures) -> Task<Status> {
    if (!iterator) {
      PerWorkerDataset ds =
          c.create_per_worker_dataset(data::kFileDatasetFunction, data::file_dataset_args(run.train, run.workers));
      iterator = c.create_per_worker_iterator(ds);
    }
    for (int i = 0; i < closures; ++i) {
      std::vector<Arg> args{*iterator, Value(std::int64_t{run.steps_per_closure})};
      auto rv = co_await c.schedule(m->train_step(), std::move(args));
      if (!rv.ok()) co_return rv.status();
    }
    co_return co_await c.join();
  };
  const int chunk = eval_every() > 0 ? eval_every() : run.closures;
  double seconds = 0;
  for (int done = 0; done < run.closures;) {
    const int n = std::min(chunk, run.closures - done);
    const auto t0 = std::chrono::steady_clock::now();
    auto trained = cluster.run(train_closures(n));
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!trained) return absl::InternalError("training did not finish");
    if (!trained->ok()) return absl::InternalError(describe(*trained));
    done += n;
    if (done < run.closures) {
      auto values = trained_values(cluster);
      if (!values.ok()) return values.status();
      auto r = evaluate_held_out(m, *values, run.test);
      if (!r.ok()) return r.status();
      print(("after " + std::to_string(done) + " closures").c_str(), *r);
    }
  }
  const double examples = static_cast<double>(run.closures) * run.steps_per_closure * m->batch_size();
  std::printf("%s: %d ps x %d workers, %d closures x %d steps, %.0f examples in %.1f s (%.0f examples/s)\n",
              run.spec_path.c_str(), run.ps, run.workers, run.closures, run.steps_per_closure, examples, seconds,
              examples / seconds);

  auto values = trained_values(cluster);
  if (!values.ok()) return values.status();
  auto r = evaluate_held_out(m, *values, run.test);
  if (r.ok()) print("end", *r);
  return r;
}

// ------------------------------------------------------------ fashion_mnist

constexpr char kFashion[] = "/usr/share/datasets/fashion-mnist";

TEST(ExamplesTest, FashionMnistMlpOnTheDebianPackagesImages) {
  const std::string dir = kFashion;
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << dir
                 << "/train-images-idx3-ubyte.gz is missing): apt-get install dataset-fashion-mnist to run this test";
  ExampleRun run;
  run.spec_path = kSource + "/examples/fashion_mnist/model.textproto";
  run.train.add_patterns(dir + "/train-images-idx3-ubyte.gz");
  run.train.mutable_idx()->add_labels_patterns(dir + "/train-labels-idx1-ubyte.gz");
  run.train.set_shuffle_buffer(10000);
  run.test.add_patterns(dir + "/t10k-images-idx3-ubyte.gz");
  run.test.mutable_idx()->add_labels_patterns(dir + "/t10k-labels-idx1-ubyte.gz");
  // 60,000 training images in batches of 64: 938 steps an epoch.
  // Shortened: one epoch (94 closures x 10 steps); full: ten epochs.
  run.closures = full_length() ? 938 : 94;
  auto r = train_and_test(run);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->examples, 10000);
  ASSERT_TRUE(r->accuracy.has_value());
  // The bar at full length; the shortened run reached 0.8156
  // (deterministic: the in-memory cluster runs on one seeded engine).
  EXPECT_GE(*r->accuracy, full_length() ? 0.87 : 0.80);
}

// ------------------------------------------------------------ ctr

int env_int(const char* name, int otherwise) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : otherwise;
}

TEST(ExamplesTest, CtrWideAndDeepOnTheGeneratedClickLog) {
  // The click log `twinps datagen ctr --train-files 6` writes (six training
  // files: two per worker), written here so the test needs nothing else.
  const auto dir = std::filesystem::temp_directory_path() / ("twinps_examples_ctr_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct RemovedAtExit {
    std::filesystem::path dir;
    ~RemovedAtExit() { std::filesystem::remove_all(dir); }
  } removed{dir};
  data::CtrOptions o;
  o.examples = env_int("TWINPS_CTR_EXAMPLES", full_length() ? 1'000'000 : 200'000);
  o.train_files = 6;
  auto summary = data::generate_ctr(dir.string(), o);
  ASSERT_TRUE(summary.ok()) << summary.status();
  std::printf("hidden model test auc: %.4f\n", summary->hidden_test_auc);

  ExampleRun run;
  run.spec_path = kSource + "/examples/ctr/model.textproto";
  run.train.add_patterns((dir / "train-*.tfrecord").string());
  run.train.set_shuffle_buffer(10000);
  run.test.add_patterns((dir / "test-*.tfrecord").string());
  // Shortened: 200,000 examples, one epoch (71 closures x 10 steps of 256).
  // Full: 1,000,000 examples, two epochs (704 closures).
  const double steps_per_epoch = static_cast<double>(summary->train_examples) / 256;
  const int epochs = env_int("TWINPS_CTR_EPOCHS", full_length() ? 2 : 1);
  run.closures = static_cast<int>(std::ceil(epochs * steps_per_epoch / run.steps_per_closure));
  auto r = train_and_test(run);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->examples, summary->test_examples);
  ASSERT_TRUE(r->auc.has_value());
  std::printf("auc %.4f, hidden model's %.4f: %.4f below\n", *r->auc, summary->hidden_test_auc,
              summary->hidden_test_auc - *r->auc);
  // The hidden model's AUC on the same test records is the best any model
  // can reach. The bar at full length is 0.01 below it; shortened,
  // the run ends 0.0246 below (deterministic), asserted within 0.035.
  EXPECT_GE(*r->auc, summary->hidden_test_auc - (full_length() ? 0.01 : 0.035));
  EXPECT_LE(*r->auc, summary->hidden_test_auc + 0.005) << "above the best reachable: the AUC is miscounted";
}

// ------------------------------------------------------------ linear

constexpr char kHeartScale[] = "/usr/share/doc/liblinear-tools/examples/heart_scale";

TEST(ExamplesTest, LinearLogisticRegressionOnLibsvmHeartScale) {
  if (!std::filesystem::exists(kHeartScale))
    GTEST_SKIP() << "Debian's liblinear-tools is not installed (" << kHeartScale
                 << " is missing): apt-get install liblinear-tools to run this test";
  // examples/run's split: the first 200 lines to train on, the last 70 to test.
  const auto dir = std::filesystem::temp_directory_path() / ("twinps_examples_linear_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  struct RemovedAtExit {
    std::filesystem::path dir;
    ~RemovedAtExit() { std::filesystem::remove_all(dir); }
  } removed{dir};
  {
    std::ifstream in(kHeartScale);
    std::ofstream train(dir / "train.libsvm"), test(dir / "test.libsvm");
    std::string line;
    for (int n = 0; std::getline(in, line); ++n) (n < 200 ? train : test) << line << "\n";
  }
  ExampleRun run;
  run.spec_path = kSource + "/examples/linear/model.textproto";
  run.train.add_patterns((dir / "train.libsvm").string());
  run.train.mutable_libsvm();  // LibSVM's fixed columns: label, indices, values
  run.test.add_patterns((dir / "test.libsvm").string());
  run.test.mutable_libsvm();
  // 200 records in batches of 10: 20 steps an epoch. Shortened: 5 epochs
  // (10 closures x 10 steps); full: the spec's 20 epochs.
  run.closures = full_length() ? 40 : 10;
  auto r = train_and_test(run);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->examples, 70);
  ASSERT_TRUE(r->accuracy.has_value());
  ASSERT_TRUE(r->auc.has_value());
  // Plain logistic regression fitted to the optimum (numpy_reference.py)
  // gets accuracy 0.8857 and AUC 0.9247 on these 70 records; this run
  // reaches 0.8286 / 0.9256 shortened and 0.8286 / 0.9285 at full length
  // (deterministic; one record is 0.014 of accuracy).
  EXPECT_GE(*r->accuracy, 0.80);
  EXPECT_GE(*r->auc, 0.90);
}

}  // namespace
}  // namespace twinps::model
