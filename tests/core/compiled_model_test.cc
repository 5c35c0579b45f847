// Model specs trained on the in-memory cluster (2 ps, 2-3 workers): the
// tutorial as a spec behaves as core/models/tutorial does, an MLP and a
// DLRM-style model reach asserted quality, and what a step pulls and costs
// follows from the spec.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>

#include "core/checkpoint/storage.h"
#include "core/checkpoint/training_checkpoints.h"
#include "core/data/in_memory_records.h"
#include "inmemory/in_memory_cluster.h"
#include "core/model/compiled_model.h"
#include "core/model/spec_loader.h"
#include "core/models/tutorial/tutorial_data.h"
#include "core/variables/sharded_variable.h"
#include "tests/core/record_builder.h"
#include "tests/sim/test_paths.h"

namespace twinps::model {
namespace {

using ::testing::HasSubstr;

std::shared_ptr<const CompiledModel> compile_text(const std::string& text) {
  LoadedSpec s = parse_model_spec(text, "m.textproto");
  EXPECT_TRUE(s.ok()) << s.error_text();
  auto m = CompiledModel::compile(s.spec);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : nullptr;
}

std::shared_ptr<const CompiledModel> tutorial_model() {
  LoadedSpec s = load_model_spec_file((sim::testing::source_dir() / "examples/tutorial/model.textproto").string());
  EXPECT_TRUE(s.ok()) << s.error_text();
  auto m = CompiledModel::compile(s.spec);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : nullptr;
}

// Record sets a test trains on, served to workers by the resource function
// "test/records" with args [set, batch size, shuffle buffer, repeat].
class RecordSets {
 public:
  int add(data::Schema schema, data::RecordBatch records) {
    sets_.push_back({std::move(schema), std::make_shared<const data::RecordBatch>(std::move(records))});
    return static_cast<int>(sets_.size()) - 1;
  }
  void register_functions(FunctionRegistry& registry) const {
    registry.add_resource("test/records", [this](ResourceContext& ctx) -> StatusOr<std::unique_ptr<Resource>> {
      auto arg = [&](std::size_t i) { return std::get<std::int64_t>(ctx.args.at(i)); };
      const auto& set = sets_.at(static_cast<std::size_t>(arg(0)));
      DatasetOptions o;
      o.batch_size = arg(1);
      o.shuffle_buffer = arg(2);
      o.repeat = arg(3);
      auto ds = data::InMemoryRecordDataset::create(set.schema, set.records, o);
      if (!ds.ok()) return ds.status();
      return std::unique_ptr<Resource>(std::move(*ds));
    });
  }

 private:
  struct Set {
    data::Schema schema;
    std::shared_ptr<const data::RecordBatch> records;
  };
  std::vector<Set> sets_;
};

std::vector<Value> dataset_args(int set, std::int64_t batch, std::int64_t shuffle, std::int64_t repeat) {
  return {Value(std::int64_t{set}), Value(batch), Value(shuffle), Value(repeat)};
}

// A small training program (the trainer proper is later work): epochs of
// scheduled train closures, the training metrics read after each, then
// distributed evaluation.
struct Program {
  int train_set = 0;
  int eval_set = 0;
  int epochs = 1;
  int steps_per_epoch = 1;
  int steps_per_closure = 1;
  int eval_steps = 0;
  std::int64_t shuffle = 0;
  std::int64_t eval_batch = 0;  // 0: the model's batch size
};
struct Outcome {
  std::vector<MetricValues> epochs;
  MetricValues eval;
  std::int64_t iterations = 0;
};

Task<StatusOr<Outcome>> run_program(ClusterCoordinator& c, const CompiledModel& m, Program p) {
  Outcome out;
  PerWorkerDataset train = c.create_per_worker_dataset("test/records", dataset_args(p.train_set, m.batch_size(), p.shuffle, -1));
  PerWorkerValues iterator = c.create_per_worker_iterator(train);
  for (int epoch = 0; epoch < p.epochs; ++epoch) {
    ParameterClient ps = c.parameter_client();
    TWINPS_CO_RETURN_IF_ERROR(co_await m.reset_metrics(ps, c.variables(), Phase::kTrain));
    for (int step = 0; step < p.steps_per_epoch; step += p.steps_per_closure) {
      const int steps = std::min(p.steps_per_closure, p.steps_per_epoch - step);
      std::vector<Arg> args{iterator, Value(std::int64_t{steps})};
      auto rv = co_await c.schedule(m.train_step(), std::move(args));
      if (!rv.ok()) co_return rv.status();
    }
    TWINPS_CO_RETURN_IF_ERROR(co_await c.join());
    ParameterClient reader = c.parameter_client();
    auto metrics = co_await m.read_metrics(reader, c.variables(), Phase::kTrain);
    if (!metrics.ok()) co_return metrics.status();
    out.epochs.push_back(*metrics);
  }
  if (p.eval_steps > 0) {
    ParameterClient ps = c.parameter_client();
    TWINPS_CO_RETURN_IF_ERROR(co_await m.reset_metrics(ps, c.variables(), Phase::kEval));
    PerWorkerDataset eval = c.create_per_worker_dataset(
        "test/records", dataset_args(p.eval_set, p.eval_batch ? p.eval_batch : m.batch_size(), 0, 1));
    PerWorkerValues eval_iterator = c.create_per_worker_iterator(eval);
    for (int i = 0; i < p.eval_steps; ++i) {
      std::vector<Arg> args{eval_iterator};
      auto rv = co_await c.schedule(m.eval_step(), std::move(args));
      if (!rv.ok()) co_return rv.status();
    }
    TWINPS_CO_RETURN_IF_ERROR(co_await c.join());
    auto metrics = co_await m.read_metrics(ps, c.variables(), Phase::kEval);
    if (!metrics.ok()) co_return metrics.status();
    out.eval = *metrics;
  }
  ParameterClient ps = c.parameter_client();
  ParameterClient::PullBatch pull;
  const std::string iterations = CompiledModel::kIterations;
  const int h = pull.counter(*c.variables().find(iterations));
  auto r = co_await ps.pull(pull);
  if (!r.ok()) co_return r.status();
  out.iterations = r->counter(h);
  co_return out;
}

// Trains `m` on a fresh in-memory cluster; `after` sees the cluster at the end.
StatusOr<Outcome> train_on_cluster(const std::shared_ptr<const CompiledModel>& m, const RecordSets& sets,
                                   const Program& p, int workers, int ps, std::uint64_t seed = 1,
                                   const std::function<void(InMemoryCluster&)>& after = {}) {
  FunctionRegistry registry;
  m->register_functions(registry);
  sets.register_functions(registry);
  InMemoryClusterOptions o;
  o.shape = ClusterShape{workers, ps};
  o.seed = seed;
  InMemoryCluster cluster(registry, o);
  auto vars = m->build_variables(ps);
  if (!vars.ok()) return vars.status();
  auto started = cluster.run(cluster.coordinator().start(vars->layouts, vars->optimizer, vars->initial));
  if (!started) return absl::DeadlineExceededError("start did not finish");
  if (!started->ok()) return *started;
  auto outcome = cluster.run(run_program(cluster.coordinator(), *m, p));
  if (!outcome) return absl::DeadlineExceededError("the program did not finish");
  if (after) after(cluster);
  return *std::move(outcome);
}

// Every variable's full value, read back from the parameter servers.
LocalEvaluator::VariableValues export_values(InMemoryCluster& cluster) {
  auto& c = cluster.coordinator();
  auto shards = cluster.run(c.export_variables());
  EXPECT_TRUE(shards && shards->ok());
  std::map<ShardId, const ShardState*> by_id;
  for (const auto& s : **shards) by_id[s.spec.id] = &s;
  LocalEvaluator::VariableValues values;
  for (const VariableLayout& v : c.variables().all()) {
    if (v.kind != VariableKind::kTrainable) continue;
    std::vector<Matrix> pieces;
    for (const auto& shard : v.shards) pieces.push_back(by_id.at(shard.id)->value);
    auto full = concat_shards(v, pieces);
    EXPECT_TRUE(full.ok());
    values[v.name] = *full;
  }
  return values;
}

// ---------------------------------------------------------------- the tutorial as a spec

// The tutorial's examples as records (core/models/tutorial/tutorial_data.h).
testing::Records tutorial_records(int n, std::uint64_t seed) {
  RandomStream random(seed);
  testing::Records r;
  r.schema = tutorial::schema();
  r.batch = tutorial::generate_records(n, random);
  return r;
}

TEST(CompiledModelTest, TheTutorialSpecPlacesVariablesAsTheTutorialDoes) {
  auto m = tutorial_model();
  ASSERT_TRUE(m);
  auto vars = m->build_variables(2);
  ASSERT_TRUE(vars.ok()) << vars.status();
  // Embedding(8, 20) by FixedShardsPartitioner(2) over 2 ps, then the dense
  // layer's kernel (also 2 shards: 20 rows) and bias, then iterations and
  // the accuracy metric, round robin in creation order (spec V1).
  const auto& emb = vars->layouts[0];
  EXPECT_EQ(emb.name, "embedding/embeddings");
  EXPECT_EQ(emb.shape, (Shape{8, 20})) << "7 words + 1 OOV index";
  ASSERT_EQ(emb.shards.size(), 2u);
  EXPECT_EQ(emb.shards[0].rows, 4);
  EXPECT_EQ(emb.shards[1].rows, 4);
  EXPECT_EQ(emb.shards[0].ps, 0);
  EXPECT_EQ(emb.shards[1].ps, 1);
  const char* names[] = {"embedding/embeddings", "dense/kernel", "dense/bias", "iterations", "accuracy/total",
                         "accuracy/count"};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(vars->layouts[i].name, names[i]);
  EXPECT_EQ(vars->optimizer.kind, OptimizerConfig::Kind::kRmsprop);
}

// ---------------------------------------------------------------- an MLP

// Three classes by distance from the origin (rings): no linear model separates them.
testing::Records ring_records(int n, std::uint64_t seed) {
  RandomStream r(seed);
  std::vector<std::vector<float>> xs;
  std::vector<std::vector<std::int64_t>> ys;
  while (static_cast<int>(xs.size()) < n) {
    const double x = r.uniform(-3, 3), y = r.uniform(-3, 3);
    const double radius = std::sqrt(x * x + y * y);
    if (radius >= 3 || std::abs(radius - 1) < 0.1 || std::abs(radius - 2) < 0.1) continue;  // a margin between rings
    xs.push_back({static_cast<float>(x), static_cast<float>(y)});
    ys.push_back({static_cast<std::int64_t>(radius)});
  }
  testing::Records out;
  out.add("xy", testing::float_column(xs), 2).add("ring", testing::int_column(ys), 1);
  return out;
}

constexpr char kMlp[] = R"pb(
  name: "rings"
  input { name: "xy" dense { width: 2 } }
  label { column: "ring" type: INT64 }
  layer { name: "hidden1" input: "xy" dense { units: 32 activation: RELU } }
  layer { name: "hidden2" input: "hidden1" dense { units: 32 activation: RELU } }
  layer { name: "logits" input: "hidden2" dense { units: 3 } }
  head { input: "logits" loss: SOFTMAX_CROSS_ENTROPY }
  metric: [LOSS, ACCURACY]
  optimizer { adam {} learning_rate { constant: 0.01 } }
  partitioner { fixed_shards: 2 }
  batch_size: 32
  init_seed: 3
)pb";

TEST(CompiledModelTest, AnMlpLearnsRingsOnTwoPsAndThreeWorkers) {
  auto m = compile_text(kMlp);
  ASSERT_TRUE(m);
  RecordSets sets;
  testing::Records train = ring_records(2000, 1), test = ring_records(500, 2);
  Program p;
  p.train_set = sets.add(train.schema, train.batch);
  p.eval_set = sets.add(test.schema, test.batch);
  p.epochs = 8;
  p.steps_per_epoch = 60;
  p.steps_per_closure = 5;
  p.shuffle = 2000;
  p.eval_steps = 5;
  p.eval_batch = 100;
  LocalEvaluator::VariableValues trained;
  auto outcome = train_on_cluster(m, sets, p, 3, 2, 7, [&](InMemoryCluster& c) { trained = export_values(c); });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  for (const auto& e : outcome->epochs) std::printf("loss %.4f accuracy %.4f\n", e.loss, *e.accuracy);
  std::printf("test: loss %.4f accuracy %.4f on %.0f examples\n", outcome->eval.loss, *outcome->eval.accuracy,
              outcome->eval.examples);
  EXPECT_EQ(outcome->iterations, 480);
  EXPECT_LT(outcome->epochs.back().loss, outcome->epochs.front().loss / 3);
  EXPECT_EQ(outcome->eval.examples, 500);
  EXPECT_GE(*outcome->eval.accuracy, 0.95) << "held-out points";

  // Every worker reads the whole evaluation set (per-worker datasets, as in
  // TensorFlow's tutorial), so the distributed evaluation's 500 records are
  // not the 500 test points once each; the held-out accuracy proper is the
  // trained values' on every test point, evaluated here.
  LocalEvaluator local(m);
  ASSERT_TRUE(local.add(trained, test.schema, test.batch).ok());
  std::printf("held out: accuracy %.4f on %.0f points\n", *local.result().accuracy, local.result().examples);
  EXPECT_EQ(local.result().examples, 500);
  EXPECT_GE(*local.result().accuracy, 0.95);
}

TEST(CompiledModelTest, LocalEvaluationGivesTheDistributedEvaluationsMetrics) {
  // One worker evaluates the test set once, in order: a side-car evaluator
  // with the trained values must see the same metrics.
  auto m = compile_text(kMlp);
  ASSERT_TRUE(m);
  RecordSets sets;
  testing::Records train = ring_records(500, 1), test = ring_records(200, 2);
  Program p;
  p.train_set = sets.add(train.schema, train.batch);
  p.eval_set = sets.add(test.schema, test.batch);
  p.epochs = 2;
  p.steps_per_epoch = 20;
  p.eval_steps = 4;
  p.eval_batch = 50;
  LocalEvaluator::VariableValues trained;
  auto outcome = train_on_cluster(m, sets, p, 1, 2, 3, [&](InMemoryCluster& c) { trained = export_values(c); });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  LocalEvaluator local(m);
  for (std::size_t begin = 0; begin < 200; begin += 50) {
    std::vector<std::size_t> rows;
    for (std::size_t i = begin; i < begin + 50; ++i) rows.push_back(i);
    ASSERT_TRUE(local.add(trained, test.schema, data::take_records(test.batch, rows)).ok());
  }
  EXPECT_EQ(outcome->iterations, 40);
  EXPECT_EQ(local.result().examples, 200);
  EXPECT_EQ(outcome->eval.examples, 200);
  EXPECT_EQ(*local.result().accuracy, *outcome->eval.accuracy);
  EXPECT_NEAR(local.result().loss, outcome->eval.loss, 1e-6);
  trained.erase("hidden2/bias");
  EXPECT_THAT(std::string(local.add(trained, test.schema, test.batch).message()),
              HasSubstr("no value for variable \"hidden2/bias\""));
}

TEST(CompiledModelTest, TrainingIsDeterministicForASeed) {
  auto m = compile_text(kMlp);
  ASSERT_TRUE(m);
  RecordSets sets;
  testing::Records train = ring_records(300, 1);
  Program p;
  p.train_set = sets.add(train.schema, train.batch);
  p.epochs = 2;
  p.steps_per_epoch = 6;
  p.shuffle = 300;
  auto a = train_on_cluster(m, sets, p, 2, 2, 5);
  auto b = train_on_cluster(m, sets, p, 2, 2, 5);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->epochs.back().loss, b->epochs.back().loss) << "the same seed: the same run, bit for bit";
}

// ---------------------------------------------------------------- DLRM on a hidden click model

constexpr char kDlrm[] = R"pb(
  name: "dlrm"
  input { name: "dense" dense { width: 2 } }
  input { name: "user" categorical { type: INT64 identity_buckets: 100 } }
  input { name: "item" categorical { type: STRING hash_buckets: 1000 } }
  input { name: "history" categorical { type: INT64 width: 0 identity_buckets: 50 mean_list_length: 3 } }
  label { column: "click" }
  layer { name: "bottom" input: "dense" dense { units: 8 activation: RELU } }
  layer { name: "user_emb" input: "user" embedding { dim: 8 partitioner { fixed_shards: 2 } } }
  layer { name: "item_emb" input: "item" embedding { dim: 8 partitioner { fixed_shards: 2 } } }
  layer { name: "history_emb" input: "history" embedding { dim: 8 combiner: MEAN } }
  layer { name: "interact" input: ["bottom", "user_emb", "item_emb", "history_emb"] dot_interaction {} }
  layer { name: "top_in" input: ["bottom", "interact", "user_emb", "item_emb", "history_emb"] concatenate {} }
  layer { name: "top" input: "top_in" dense { units: 16 activation: RELU } }
  layer { name: "logit" input: "top" dense { units: 1 } }
  head { input: "logit" loss: BINARY_CROSS_ENTROPY }
  metric: [AUC, ACCURACY]
  optimizer { adam {} learning_rate { constant: 0.01 } }
  batch_size: 64
)pb";

// Clicks drawn from a hidden logistic model of user and item affinities.
struct ClickData {
  testing::Records records;
  std::vector<double> probability;  // the hidden model's, per record
};
ClickData click_records(int n, std::uint64_t seed) {
  RandomStream hidden(99);  // the same hidden model for every data set
  std::vector<double> user_bias(100), item_bias(200), history_bias(50);
  for (auto& b : user_bias) b = hidden.normal(0, 1);
  for (auto& b : item_bias) b = hidden.normal(0, 1);
  for (auto& b : history_bias) b = hidden.normal(0, 1);
  RandomStream r(seed);
  std::vector<std::vector<float>> dense, click;
  std::vector<std::vector<std::int64_t>> user, history;
  std::vector<std::vector<std::string>> item;
  ClickData out;
  for (int i = 0; i < n; ++i) {
    const auto u = static_cast<std::int64_t>(r.below(100));
    const auto it = static_cast<std::int64_t>(r.below(200));
    std::vector<std::int64_t> h;
    double hist = 0;
    for (std::uint64_t k = 0, len = 1 + r.below(5); k < len; ++k) {
      h.push_back(static_cast<std::int64_t>(r.below(50)));
      hist += history_bias[static_cast<std::size_t>(h.back())] / static_cast<double>(len);
    }
    const double d0 = r.uniform(-1, 1), d1 = r.uniform(-1, 1);
    const double z = 1.5 * user_bias[static_cast<std::size_t>(u)] + 1.5 * item_bias[static_cast<std::size_t>(it)] +
                     hist + 2 * d0 - d1;
    const double p = 1 / (1 + std::exp(-z));
    out.probability.push_back(p);
    dense.push_back({static_cast<float>(d0), static_cast<float>(d1)});
    user.push_back({u});
    item.push_back({"item" + std::to_string(it)});
    history.push_back(std::move(h));
    click.push_back({r.bernoulli(p) ? 1.0f : 0.0f});
  }
  out.records.add("dense", testing::float_column(dense), 2)
      .add("user", testing::int_column(user), 1)
      .add("item", testing::string_column(item), 1)
      .add("history", testing::int_column(history), 0)
      .add("click", testing::float_column(click), 1);
  return out;
}

// The ROC AUC of scores against labels, exactly (pairs ranked right; ties half).
double exact_auc(const std::vector<double>& scores, const std::vector<float>& labels) {
  std::vector<std::size_t> order(scores.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  double positives = 0, negatives_below = 0, area = 0;
  for (std::size_t i : order) {
    if (labels[i] > 0.5f) {
      area += negatives_below;
      ++positives;
    } else {
      ++negatives_below;
    }
  }
  return area / (positives * negatives_below);
}

TEST(CompiledModelTest, DlrmLearnsAHiddenClickModel) {
  auto m = compile_text(kDlrm);
  ASSERT_TRUE(m);
  RecordSets sets;
  ClickData train = click_records(20000, 1), test = click_records(2000, 2);
  Program p;
  p.train_set = sets.add(train.records.schema, train.records.batch);
  p.eval_set = sets.add(test.records.schema, test.records.batch);
  p.epochs = 5;
  p.steps_per_epoch = 100;
  p.steps_per_closure = 10;
  p.shuffle = 20000;
  p.eval_steps = 10;
  p.eval_batch = 200;
  auto outcome = train_on_cluster(m, sets, p, 2, 2, 3);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  const double bound = exact_auc(test.probability, test.records.batch.columns[4].floats);
  for (const auto& e : outcome->epochs) std::printf("loss %.4f auc %.4f\n", e.loss, *e.auc);
  std::printf("test auc %.4f (the hidden model's own: %.4f), accuracy %.4f\n", *outcome->eval.auc, bound,
              *outcome->eval.accuracy);
  EXPECT_EQ(outcome->eval.examples, 2000);
  EXPECT_GE(*outcome->eval.auc, bound - 0.04) << "close to the model that drew the clicks";
  EXPECT_LE(*outcome->eval.auc, bound + 0.02);
}

// ---------------------------------------------------------------- what steps move

TEST(CompiledModelTest, PullsAndPushesCarryEachDistinctRowOnce) {
  // Dedup happens twice: EmbeddingLayer::plan() asks ParameterClient for the
  // batch's distinct rows only, and ParameterClient itself (plan_lookup,
  // split_sparse) sends each shard a row once however often a caller names it.
  auto m = compile_text(R"pb(
    input { name: "ids" categorical { type: INT64 width: 0 identity_buckets: 100 } }
    label { column: "y" }
    layer { name: "e" input: "ids" embedding { dim: 4 combiner: SUM } }
    layer { name: "d" input: "e" dense { units: 1 use_bias: false } }
    head { input: "d" loss: BINARY_CROSS_ENTROPY }
    batch_size: 4
  )pb");
  ASSERT_TRUE(m);
  testing::Records r;
  r.add("ids", testing::int_column({{5, 5, 7}, {7, 9}, {5}, {9, 9, 9}}), 0)
      .add("y", testing::float_column({{1}, {0}, {1}, {0}}), 1);
  RecordSets sets;
  Program p;
  p.train_set = sets.add(r.schema, r.batch);
  FunctionRegistry registry;
  m->register_functions(registry);
  sets.register_functions(registry);
  InMemoryClusterOptions o;
  o.shape = ClusterShape{1, 1};
  InMemoryCluster cluster(registry, o);
  auto vars = m->build_variables(1);
  ASSERT_TRUE(vars.ok());
  ASSERT_TRUE(cluster.run(cluster.coordinator().start(vars->layouts, vars->optimizer, vars->initial))->ok());
  const ParameterStoreStats before = cluster.ps(0)->store().stats();
  auto outcome = cluster.run(run_program(cluster.coordinator(), *m, p));
  ASSERT_TRUE(outcome && outcome->ok());
  const ParameterStoreStats& after = cluster.ps(0)->store().stats();
  // The step pulled 3 distinct rows of 4 floats and the 4x1 kernel, and
  // wrote 3 rows (ids 5, 7, 9), the kernel and its metrics.
  const std::uint64_t step_pull = 3 * 4 * 4 + 4 * 4;
  const std::uint64_t program_reads = 2 * 4 + 8;  // the loss metric's two scalars, iterations
  EXPECT_EQ(after.bytes_pulled - before.bytes_pulled - program_reads, step_pull);
  EXPECT_EQ(after.rows_updated - before.rows_updated, 3u + 4u + /* metric resets and adds */ 2 * 2 + 1);
}

TEST(CompiledModelTest, StepCostFollowsTheSpec) {
  auto m = tutorial_model();
  ASSERT_TRUE(m);
  const StepCost& c = m->step_cost();
  ASSERT_EQ(c.variables.size(), 3u);
  EXPECT_EQ(c.variables[0].name, "embedding/embeddings");
  // 8 x 3 uniform draws from 8 rows: 8 (1 - (7/8)^24) distinct rows expected.
  EXPECT_NEAR(c.variables[0].rows_per_step, 8 * (1 - std::pow(7.0 / 8, 24)), 1e-9);
  EXPECT_EQ(c.variables[1].bytes_pulled, 20 * 4) << "the kernel, whole";
  // Dense(20 -> 1) forward 2*8*20 + 8 (bias); backward 4*8*20 + 2*8; the
  // mean of 3 rows of 20 per record, forward and backward; the loss.
  const double expected = (2 * 8 * 20 + 8) + (4 * 8 * 20 + 2 * 8) + 2 * (2 * 24 * 20) + 4 * 8;
  EXPECT_DOUBLE_EQ(c.train_flops, expected);

  // The expected distinct rows under a Zipf law, against a count of draws.
  RandomStream r(1);
  const std::int64_t rows = 1000;
  std::vector<double> cdf(rows);
  double total = 0;
  for (std::int64_t i = 0; i < rows; ++i) cdf[static_cast<std::size_t>(i)] = total += std::pow(i + 1.0, -1.1);
  double distinct = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    std::vector<bool> seen(rows);
    for (int d = 0; d < 500; ++d) {
      const double u = r.uniform() * total;
      seen[static_cast<std::size_t>(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin())] = true;
    }
    distinct += static_cast<double>(std::count(seen.begin(), seen.end(), true));
  }
  EXPECT_NEAR(expected_distinct_rows(rows, 500, 1.1), distinct / trials, 2.0);

  // Large tables are summed in buckets beyond the first 65536 ranks: against
  // the exact sum of every row's term.
  for (double s : {0.8, 1.0, 1.2}) {
    const std::int64_t big = 400000;
    const double draws = 20000;
    double norm = 0;
    for (std::int64_t i = 1; i <= big; ++i) norm += std::pow(static_cast<double>(i), -s);
    double exact = 0;
    for (std::int64_t i = 1; i <= big; ++i) exact += -std::expm1(draws * std::log1p(-std::pow(static_cast<double>(i), -s) / norm));
    EXPECT_NEAR(expected_distinct_rows(big, draws, s), exact, 1e-4 * exact) << "zipf exponent " << s;
  }
}

TEST(CompiledModelTest, BadDataFailsTheStepNamingTheColumn) {
  auto m = tutorial_model();
  ASSERT_TRUE(m);
  testing::Records r = tutorial_records(16, 1);
  r.schema.columns[1].name = "target";
  RecordSets sets;
  Program p;
  p.train_set = sets.add(r.schema, r.batch);
  auto outcome = train_on_cluster(m, sets, p, 1, 1);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(outcome.status().message(), HasSubstr("column \"label\": the data has no such column"));
}

// ---------------------------------------------------------------- optimizer groups

// Two id features, each with its own embedding, concatenated into one logit.
// Every variable has another update rule: Adagrad (the first variable's, so
// the cluster's), RMSprop, Adam and, for the bias alone, SGD with momentum.
constexpr char kFourOptimizers[] = R"pb(
  input { name: "a" categorical { type: INT64 identity_buckets: 5 oov: OOV_IGNORE } }
  input { name: "b" categorical { type: INT64 identity_buckets: 5 oov: OOV_IGNORE } }
  label { column: "y" }
  layer { name: "ea" input: "a" embedding { dim: 2 initializer { uniform { min: -0.5 max: 0.5 } } } }
  layer { name: "eb" input: "b" embedding { dim: 2 initializer { uniform { min: -0.5 max: 0.5 } } } }
  layer { name: "cat" input: ["ea", "eb"] concatenate {} }
  layer { name: "d" input: "cat" dense { units: 1 bias_initializer { constant: 0.1 } } }
  head { input: "d" loss: BINARY_CROSS_ENTROPY }
  optimizer { layer: "ea" adagrad { initial_accumulator_value: 0.1 } learning_rate { constant: 0.5 } }
  optimizer { layer: "eb" rmsprop { rho: 0.8 } learning_rate { constant: 0.05 } }
  optimizer { adam { beta_1: 0.8 beta_2: 0.9 } learning_rate { constant: 0.02 } }
  optimizer { variable: "d/bias" sgd { momentum: 0.9 } learning_rate { constant: 0.1 } }
  batch_size: 4
  init_seed: 7
)pb";

// Ids and labels of 8 records: two batches of 4, ids repeating within a batch.
testing::Records four_optimizer_records() {
  testing::Records r;
  r.add("a", testing::int_column({{0}, {1}, {0}, {3}, {1}, {1}, {4}, {0}}), 1)
      .add("b", testing::int_column({{2}, {2}, {4}, {0}, {3}, {2}, {0}, {1}}), 1)
      .add("y", testing::float_column({{1}, {0}, {1}, {0}, {0}, {1}, {1}, {0}}), 1);
  return r;
}

// The model's parameters in double precision, and its step by hand:
// logit = [ea[a], eb[b]] . k + bias, the mean binary cross-entropy, and each
// group's update rule written out from Keras's formulas.
struct HandModel {
  std::vector<std::vector<double>> ea, eb, ea_acc, eb_rms;  // rows x 2
  std::vector<double> k, k_m, k_v;                          // 4
  double bias = 0, bias_momentum = 0;
  int kernel_steps = 0;

  static std::vector<std::vector<double>> rows_of(const Matrix& m) {
    std::vector<std::vector<double>> out(static_cast<std::size_t>(m.rows()));
    for (Eigen::Index r = 0; r < m.rows(); ++r)
      for (Eigen::Index c = 0; c < m.cols(); ++c) out[static_cast<std::size_t>(r)].push_back(m(r, c));
    return out;
  }

  void step(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b, const std::vector<double>& y) {
    const double n = static_cast<double>(a.size());
    std::map<std::int64_t, std::vector<double>> dea, deb;  // summed per distinct row
    std::vector<double> dk(4, 0.0);
    double dbias = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      const auto& xa = ea[static_cast<std::size_t>(a[i])];
      const auto& xb = eb[static_cast<std::size_t>(b[i])];
      const double x[4] = {xa[0], xa[1], xb[0], xb[1]};
      double z = bias;
      for (int j = 0; j < 4; ++j) z += x[j] * k[static_cast<std::size_t>(j)];
      const double g = (1 / (1 + std::exp(-z)) - y[i]) / n;  // d(mean loss)/d(logit)
      for (int j = 0; j < 4; ++j) dk[static_cast<std::size_t>(j)] += g * x[j];
      dbias += g;
      auto& ga = dea.try_emplace(a[i], 2, 0.0).first->second;
      auto& gb = deb.try_emplace(b[i], 2, 0.0).first->second;
      for (int j = 0; j < 2; ++j) {
        ga[static_cast<std::size_t>(j)] += g * k[static_cast<std::size_t>(j)];
        gb[static_cast<std::size_t>(j)] += g * k[static_cast<std::size_t>(j + 2)];
      }
    }
    const double eps = 1e-7;
    // Adagrad on the rows the batch touched: acc += g^2; w -= lr g / (sqrt(acc) + eps).
    for (const auto& [r, g] : dea)
      for (std::size_t j = 0; j < 2; ++j) {
        auto& acc = ea_acc[static_cast<std::size_t>(r)][j];
        acc += g[j] * g[j];
        ea[static_cast<std::size_t>(r)][j] -= 0.5 * g[j] / (std::sqrt(acc) + eps);
      }
    // RMSprop on the touched rows: rms = rho rms + (1 - rho) g^2; w -= lr g / (sqrt(rms) + eps).
    for (const auto& [r, g] : deb)
      for (std::size_t j = 0; j < 2; ++j) {
        auto& rms = eb_rms[static_cast<std::size_t>(r)][j];
        rms = 0.8 * rms + 0.2 * g[j] * g[j];
        eb[static_cast<std::size_t>(r)][j] -= 0.05 * g[j] / (std::sqrt(rms) + eps);
      }
    // Adam, dense: bias-corrected rate lr sqrt(1 - b2^t) / (1 - b1^t).
    ++kernel_steps;
    const double alpha = 0.02 * std::sqrt(1 - std::pow(0.9, kernel_steps)) / (1 - std::pow(0.8, kernel_steps));
    for (std::size_t j = 0; j < 4; ++j) {
      k_m[j] = 0.8 * k_m[j] + 0.2 * dk[j];
      k_v[j] = 0.9 * k_v[j] + 0.1 * dk[j] * dk[j];
      k[j] -= alpha * k_m[j] / (std::sqrt(k_v[j]) + eps);
    }
    // SGD with momentum: accum = momentum accum - lr g; w += accum.
    bias_momentum = 0.9 * bias_momentum - 0.1 * dbias;
    bias += bias_momentum;
  }
};

// Every trainable variable's full value and slots, from the parameter servers.
struct VariableState {
  Matrix value;
  std::vector<Matrix> slots;
  std::optional<OptimizerConfig> optimizer;  // what its shards were created with
};
std::map<std::string, VariableState> export_states(InMemoryCluster& cluster) {
  auto& c = cluster.coordinator();
  auto shards = cluster.run(c.export_variables());
  EXPECT_TRUE(shards && shards->ok());
  std::map<ShardId, const ShardState*> by_id;
  for (const auto& s : **shards) by_id[s.spec.id] = &s;
  std::map<std::string, VariableState> out;
  for (const VariableLayout& v : c.variables().all()) {
    if (v.kind != VariableKind::kTrainable) continue;
    VariableState& st = out[v.name];
    const ShardState& first = *by_id.at(v.shards.front().id);
    st.optimizer = first.spec.optimizer;
    for (std::size_t k = 0; k <= first.slots.size(); ++k) {
      std::vector<Matrix> pieces;
      for (const auto& shard : v.shards) {
        const ShardState& s = *by_id.at(shard.id);
        EXPECT_EQ(s.spec.optimizer, st.optimizer) << v.name << ": every shard has its variable's optimizer";
        pieces.push_back(k == 0 ? s.value : s.slots.at(k - 1));
      }
      auto full = concat_shards(v, pieces);
      EXPECT_TRUE(full.ok());
      (k == 0 ? st.value : st.slots.emplace_back()) = *full;
    }
  }
  return out;
}

void expect_near(const Matrix& got, const std::vector<std::vector<double>>& want, const std::string& what) {
  ASSERT_EQ(got.rows(), static_cast<Eigen::Index>(want.size())) << what;
  for (Eigen::Index r = 0; r < got.rows(); ++r)
    for (Eigen::Index c = 0; c < got.cols(); ++c) {
      const double w = want[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)];
      EXPECT_NEAR(got(r, c), w, 2e-5 + 2e-5 * std::abs(w)) << what << " [" << r << "," << c << "]";
    }
}
std::vector<std::vector<double>> column(const std::vector<double>& v) {
  std::vector<std::vector<double>> out;
  for (double x : v) out.push_back({x});
  return out;
}

TEST(CompiledModelTest, EachOptimizerGroupUpdatesItsVariablesAsItsRuleSays) {
  auto m = compile_text(kFourOptimizers);
  ASSERT_TRUE(m);
  testing::Records r = four_optimizer_records();
  RecordSets sets;
  Program p;
  p.train_set = sets.add(r.schema, r.batch);
  p.steps_per_epoch = 2;  // one worker, one step per closure: batch 1, then batch 2

  auto vars = m->build_variables(2);
  ASSERT_TRUE(vars.ok()) << vars.status();
  EXPECT_EQ(vars->optimizer.kind, OptimizerConfig::Kind::kAdagrad) << "the first variable's";
  std::map<std::string, const VariableLayout*> layout;
  for (const auto& v : vars->layouts) layout[v.name] = &v;
  EXPECT_FALSE(layout.at("ea/embeddings")->optimizer) << "the cluster's optimizer: nothing of its own";
  ASSERT_TRUE(layout.at("eb/embeddings")->optimizer);
  EXPECT_EQ(layout.at("eb/embeddings")->optimizer->kind, OptimizerConfig::Kind::kRmsprop);
  ASSERT_TRUE(layout.at("d/kernel")->optimizer);
  EXPECT_EQ(layout.at("d/kernel")->optimizer->kind, OptimizerConfig::Kind::kAdam);
  ASSERT_TRUE(layout.at("d/bias")->optimizer);
  EXPECT_EQ(layout.at("d/bias")->optimizer->kind, OptimizerConfig::Kind::kSgd);
  EXPECT_FALSE(layout.at("iterations")->optimizer);

  // The initial values, from the variables' initial shards (one shard each).
  HandModel hand;
  for (const auto& s : vars->initial) {
    if (s.spec.name == "ea/embeddings") hand.ea = HandModel::rows_of(s.value);
    if (s.spec.name == "eb/embeddings") hand.eb = HandModel::rows_of(s.value);
    if (s.spec.name == "d/kernel") hand.k = HandModel::rows_of(s.value.transpose()).front();
    if (s.spec.name == "d/bias") hand.bias = s.value(0, 0);
  }
  ASSERT_EQ(hand.ea.size(), 5u);
  ASSERT_EQ(hand.k.size(), 4u);
  hand.ea_acc.assign(5, {0.1, 0.1});
  hand.eb_rms.assign(5, {0.0, 0.0});
  hand.k_m.assign(4, 0.0);
  hand.k_v.assign(4, 0.0);
  hand.step({0, 1, 0, 3}, {2, 2, 4, 0}, {1, 0, 1, 0});
  hand.step({1, 1, 4, 0}, {3, 2, 0, 1}, {0, 1, 1, 0});

  std::map<std::string, VariableState> got;
  auto outcome = train_on_cluster(m, sets, p, /*workers=*/1, /*ps=*/2, 1,
                                  [&](InMemoryCluster& cluster) { got = export_states(cluster); });
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->iterations, 2);

  const VariableState& ea = got.at("ea/embeddings");
  EXPECT_FALSE(ea.optimizer);
  ASSERT_EQ(ea.slots.size(), 1u) << "adagrad: accumulator";
  expect_near(ea.value, hand.ea, "ea (adagrad)");
  expect_near(ea.slots[0], hand.ea_acc, "ea accumulator");
  EXPECT_EQ(ea.slots[0](2, 0), 0.1f) << "row 2 was never touched: its accumulator is the initial value";

  const VariableState& eb = got.at("eb/embeddings");
  ASSERT_TRUE(eb.optimizer);
  EXPECT_EQ(eb.optimizer->kind, OptimizerConfig::Kind::kRmsprop);
  ASSERT_EQ(eb.slots.size(), 1u) << "rmsprop without momentum: rms";
  expect_near(eb.value, hand.eb, "eb (rmsprop)");
  expect_near(eb.slots[0], hand.eb_rms, "eb rms");

  const VariableState& kernel = got.at("d/kernel");
  ASSERT_EQ(kernel.slots.size(), 2u) << "adam: m, v";
  expect_near(kernel.value, column(hand.k), "kernel (adam)");
  expect_near(kernel.slots[0], column(hand.k_m), "kernel m");
  expect_near(kernel.slots[1], column(hand.k_v), "kernel v");

  const VariableState& bias = got.at("d/bias");
  ASSERT_EQ(bias.slots.size(), 1u) << "sgd with momentum: momentum";
  expect_near(bias.value, {{hand.bias}}, "bias (sgd with momentum)");
  expect_near(bias.slots[0], {{hand.bias_momentum}}, "bias momentum");
}

TEST(CompiledModelTest, CheckpointsKeepEachGroupsSlotsAndRefuseAnotherGroupsOptimizer) {
  auto m = compile_text(kFourOptimizers);
  ASSERT_TRUE(m);
  testing::Records r = four_optimizer_records();
  RecordSets sets;
  Program p;
  p.train_set = sets.add(r.schema, r.batch);
  p.steps_per_epoch = 3;
  InMemoryStorage storage;
  CheckpointManager manager(storage, 2);
  std::map<std::string, VariableState> trained;
  auto outcome = train_on_cluster(m, sets, p, 2, /*ps=*/2, 1, [&](InMemoryCluster& cluster) {
    trained = export_states(cluster);
    auto saved = cluster.run(save_checkpoint(cluster.coordinator(), manager));
    ASSERT_TRUE(saved && saved->ok()) << (saved ? saved->status().ToString() : "did not finish");
  });
  ASSERT_TRUE(outcome.ok()) << outcome.status();

  // Restored into one ps (every variable's shards cut anew), each variable
  // has its own optimizer's slots back, and its shards that optimizer.
  {
    FunctionRegistry registry;
    m->register_functions(registry);
    InMemoryClusterOptions o;
    o.shape = ClusterShape{1, 1};
    InMemoryCluster cluster(registry, o);
    auto vars = m->build_variables(1);
    ASSERT_TRUE(vars.ok());
    auto start = restore_or_initialize(&manager, vars->layouts, vars->optimizer, vars->initial);
    ASSERT_TRUE(start.ok()) << start.status();
    ASSERT_TRUE(start->restored_from);
    ASSERT_TRUE(cluster.run(cluster.coordinator().start(vars->layouts, vars->optimizer, start->shards))->ok());
    auto restored = export_states(cluster);
    for (const auto& [name, want] : trained) {
      const VariableState& have = restored.at(name);
      EXPECT_EQ(have.optimizer, want.optimizer) << name;
      EXPECT_EQ(have.value, want.value) << name;
      ASSERT_EQ(have.slots.size(), want.slots.size()) << name;
      for (std::size_t k = 0; k < want.slots.size(); ++k) EXPECT_EQ(have.slots[k], want.slots[k]) << name << " slot " << k;
    }
    EXPECT_EQ(restored.at("d/kernel").slots.size(), 2u);
  }

  // A program whose group for "eb" is Adam now cannot take RMSprop's slots.
  std::string changed = kFourOptimizers;
  changed.replace(changed.find("rmsprop { rho: 0.8 }"), std::string("rmsprop { rho: 0.8 }").size(), "adam {}");
  auto other = compile_text(changed);
  ASSERT_TRUE(other);
  auto vars = other->build_variables(2);
  ASSERT_TRUE(vars.ok());
  auto start = restore_or_initialize(&manager, vars->layouts, vars->optimizer, vars->initial);
  ASSERT_FALSE(start.ok());
  EXPECT_EQ(start.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(start.status().message(), HasSubstr("variable 'eb/embeddings'"));
  EXPECT_THAT(start.status().message(), HasSubstr("(rms) by rmsprop, the target optimizer adam uses 2 (m, v)"));
}

}  // namespace
}  // namespace twinps::model
