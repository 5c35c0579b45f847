// Model steps from specs: the arithmetic of a training step (input mapping,
// forward, loss, backward) on one thread, and the tutorial's whole training
// by the trainer on the in-memory cluster.
//
//   build/bin/twinps_core_bench --benchmark_filter=Model
#include <benchmark/benchmark.h>

#include <cstdio>

#include "core/data/in_memory_records.h"
#include "inmemory/in_memory_cluster.h"
#include "core/model/compiled_model.h"
#include "core/model/spec_loader.h"
#include "core/models/tutorial/tutorial_spec.h"
#include "core/training/model_functions.h"
#include "core/training/trainer.h"
#include "tests/bench/tuned_allocator_main.h"

namespace twinps::model {
namespace {

std::shared_ptr<const CompiledModel> compile_or_die(const std::string& text) {
  LoadedSpec s = parse_model_spec(text, "bench.textproto");
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.error_text().c_str());
    std::abort();
  }
  auto m = CompiledModel::compile(s.spec);
  if (!m.ok()) std::abort();
  return *m;
}

data::Column floats(std::int64_t records, int width, RandomStream& r) {
  data::Column c;
  c.type = data::ColumnType::kFloat;
  for (std::int64_t i = 0; i < records * width; ++i) c.floats.push_back(static_cast<float>(r.uniform()));
  for (std::int64_t i = 0; i <= records; ++i) c.offsets.push_back(i * width);
  return c;
}

// One training step's arithmetic, as a worker runs it, without the ps.
void train_step(benchmark::State& state, const CompiledModel& m, const data::Schema& schema,
                const data::RecordBatch& batch) {
  const ModelGraph& g = m.graph();
  RandomStream init(1);
  auto features = g.features().map(schema, batch);
  if (!features.ok()) std::abort();
  auto lookups = g.plan_lookups(*features);
  ModelGraph::Params params;
  for (std::size_t v = 0; v < g.variables().size(); ++v) {
    const auto& var = g.variables()[v];
    const Eigen::Index rows = var.embedding ? static_cast<Eigen::Index>(lookups[v].rows.size()) : storage_rows(var.shape);
    Matrix x(rows, storage_cols(var.shape));
    for (Eigen::Index i = 0; i < x.size(); ++i) x.data()[i] = static_cast<float>(init.uniform(-0.05, 0.05));
    params.values.push_back(std::move(x));
  }
  for (auto _ : state) {
    auto f = g.features().map(schema, batch);
    params.lookups = g.plan_lookups(*f);
    ModelGraph::Tape tape;
    RandomStream step(2);
    const Matrix& logits = g.forward(*f, params, tape, ForwardMode{true, &step});
    const LossResult l = compute_loss(g.loss(), logits, f->labels);
    auto grads = g.backward(*f, params, tape, l.dlogits);
    benchmark::DoNotOptimize(grads);
  }
  state.counters["GFLOP/s"] = benchmark::Counter(g.train_flops(batch.size) * 1e-9 * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate);
  state.counters["examples/s"] =
      benchmark::Counter(static_cast<double>(batch.size * state.iterations()), benchmark::Counter::kIsRate);
}

// The fashion_mnist example's MLP: 784-256-128-10, batch 64.
void BM_ModelTrainStepMlp(benchmark::State& state) {
  auto m = compile_or_die(R"pb(
    input { name: "pixels" dense { width: 784 } }
    label { column: "label" type: INT64 }
    layer { name: "h1" input: "pixels" dense { units: 256 activation: RELU } }
    layer { name: "h2" input: "h1" dense { units: 128 activation: RELU } }
    layer { name: "logits" input: "h2" dense { units: 10 } }
    head { input: "logits" loss: SOFTMAX_CROSS_ENTROPY }
    batch_size: 64
  )pb");
  RandomStream r(3);
  data::Schema schema{{{"pixels", data::ColumnType::kFloat, 784}, {"label", data::ColumnType::kInt64, 1}}};
  data::RecordBatch batch;
  batch.size = 64;
  batch.columns.push_back(floats(64, 784, r));
  data::Column labels;
  labels.type = data::ColumnType::kInt64;
  for (int i = 0; i < 64; ++i) labels.ints.push_back(i % 10);
  for (int i = 0; i <= 64; ++i) labels.offsets.push_back(i);
  batch.columns.push_back(labels);
  train_step(state, *m, schema, batch);
}
BENCHMARK(BM_ModelTrainStepMlp)->Unit(benchmark::kMicrosecond);

// A Criteo-shaped DLRM: 13 dense features, 26 hashed string features,
// embeddings of 16, batch 512.
void BM_ModelTrainStepDlrm(benchmark::State& state) {
  std::string text = "input { name: \"dense\" dense { width: 13 log1p: true } }\n";
  std::string interact = "\"bottom\"";
  std::string layers = "layer { name: \"bottom\" input: \"dense\" dense { units: 16 activation: RELU } }\n";
  for (int i = 0; i < 26; ++i) {
    const std::string c = "C" + std::to_string(i);
    text += "input { name: \"" + c + "\" categorical { hash_buckets: 100000 } }\n";
    layers += "layer { name: \"" + c + "_emb\" input: \"" + c + "\" embedding { dim: 16 } }\n";
    interact += ", \"" + c + "_emb\"";
  }
  text += "label { column: \"click\" }\n" + layers;
  text += "layer { name: \"interact\" input: [" + interact + "] dot_interaction {} }\n";
  text += "layer { name: \"top_in\" input: [\"bottom\", \"interact\"] concatenate {} }\n";
  text += "layer { name: \"top\" input: \"top_in\" dense { units: 64 activation: RELU } }\n";
  text += "layer { name: \"logit\" input: \"top\" dense { units: 1 } }\n";
  text += "head { input: \"logit\" loss: BINARY_CROSS_ENTROPY }\nbatch_size: 512\n";
  auto m = compile_or_die(text);
  RandomStream r(4);
  data::Schema schema;
  data::RecordBatch batch;
  batch.size = 512;
  schema.columns.push_back({"dense", data::ColumnType::kFloat, 13});
  batch.columns.push_back(floats(512, 13, r));
  for (int i = 0; i < 26; ++i) {
    schema.columns.push_back({"C" + std::to_string(i), data::ColumnType::kString, 1});
    data::Column c;
    c.type = data::ColumnType::kString;
    for (int k = 0; k < 512; ++k) {
      c.strings.push_back(std::to_string(r.below(5000)));
      c.offsets.push_back(k);
    }
    c.offsets.push_back(512);
    batch.columns.push_back(std::move(c));
  }
  schema.columns.push_back({"click", data::ColumnType::kFloat, 1});
  data::Column click;
  click.type = data::ColumnType::kFloat;
  for (int k = 0; k < 512; ++k) {
    click.floats.push_back(static_cast<float>(r.below(2)));
    click.offsets.push_back(k);
  }
  click.offsets.push_back(512);
  batch.columns.push_back(std::move(click));
  train_step(state, *m, schema, batch);
}
BENCHMARK(BM_ModelTrainStepDlrm)->Unit(benchmark::kMicrosecond);

// The tutorial's spec trained by the trainer on the in-memory cluster (2 ps,
// 3 workers, batch 8, 100 steps, the spec shipped to the workers).
void BM_ModelTutorialTraining(benchmark::State& state) {
  const int steps = 100;
  auto m = compile_or_die(std::string(tutorial::spec_text()));
  FunctionRegistry registry;
  training::register_training_functions(registry);
  training::TrainerOptions options;
  options.epochs = 1;
  options.steps_per_epoch = steps;
  for (auto _ : state) {
    InMemoryClusterOptions o;
    o.shape = ClusterShape{3, 2};
    InMemoryCluster cluster(registry, o);
    training::Trainer trainer(m, registry, training::tutorial_data(1, 200, 200), std::nullopt, options);
    auto done = cluster.run(trainer.run(cluster.coordinator()));
    if (!done || !done->ok()) std::abort();
  }
  state.counters["steps/s"] = benchmark::Counter(static_cast<double>(steps * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ModelTutorialTraining)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace twinps::model

int main(int argc, char** argv) { return twinps::bench::run_with_tuned_allocator(argc, argv); }
