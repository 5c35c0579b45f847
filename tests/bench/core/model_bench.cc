// Model steps from specs: the arithmetic of a training step (input mapping,
// forward, loss, backward) on one thread, and whole training on the
// in-memory cluster against the hand-written tutorial step.
//
//   build/bin/twinps_core_bench --benchmark_filter=Model
#include <benchmark/benchmark.h>

#include <cstdio>

#include "core/data/in_memory_records.h"
#include "core/local/local_cluster.h"
#include "core/model/compiled_model.h"
#include "core/model/spec_loader.h"
#include "core/models/tutorial/tutorial.h"
#include "net/allocator_tuning.h"

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

// The tutorial trained on the in-memory cluster (2 ps, 3 workers, batch 8,
// 100 steps): the hand-written step functions against the spec's.
void BM_ModelTutorialTraining(benchmark::State& state) {
  const bool spec = state.range(0) == 1;
  const int steps = 100;
  tutorial::Config config;
  config.epochs = 1;
  config.steps_per_epoch = steps;
  std::shared_ptr<const CompiledModel> m;
  std::shared_ptr<data::RecordBatch> records;
  data::Schema schema{{{"features", data::ColumnType::kString, 3}, {"label", data::ColumnType::kString, 1}}};
  if (spec) {
    m = compile_or_die(R"pb(
      input { name: "features" categorical { width: 3 vocabulary { token: ["avenger", "ironman", "batman", "hulk", "spiderman", "kingkong", "wonder_woman"] } } }
      label { column: "label" type: STRING vocabulary { token: ["yes", "no"] } }
      layer { name: "embedding" input: "features" embedding { dim: 20 } }
      layer { name: "dense" input: "embedding" dense { units: 1 } }
      head { input: "dense" loss: BINARY_CROSS_ENTROPY }
      metric: ACCURACY
      optimizer { rmsprop {} learning_rate { constant: 0.1 } }
      partitioner { fixed_shards: 2 }
      batch_size: 8
    )pb");
    records = std::make_shared<data::RecordBatch>();
    records->size = 200;
    data::Column f, l;
    f.type = l.type = data::ColumnType::kString;
    f.offsets = l.offsets = {0};
    RandomStream r(1);
    for (int i = 0; i < 200; ++i) {
      bool avenger = false;
      for (std::size_t pick : r.sample(7, 3)) {
        f.strings.push_back(tutorial::kFeatureVocab[pick]);
        avenger |= pick == 0;
      }
      l.strings.push_back(avenger ? "yes" : "no");
      f.offsets.push_back(static_cast<std::int64_t>(f.strings.size()));
      l.offsets.push_back(static_cast<std::int64_t>(l.strings.size()));
    }
    records->columns = {f, l};
  }
  for (auto _ : state) {
    FunctionRegistry registry;
    LocalClusterOptions o;
    o.shape = ClusterShape{3, 2};
    if (spec) {
      m->register_functions(registry);
      registry.add_resource("bench/records", [&](ResourceContext&) -> StatusOr<std::unique_ptr<Resource>> {
        DatasetOptions d;
        d.batch_size = 8;
        d.shuffle_buffer = 200;
        d.repeat = -1;
        auto ds = data::InMemoryRecordDataset::create(schema, records, d);
        if (!ds.ok()) return ds.status();
        return std::unique_ptr<Resource>(std::move(*ds));
      });
      LocalCluster cluster(registry, o);
      auto vars = m->build_variables(2);
      cluster.run(cluster.coordinator().start(vars->layouts, vars->optimizer, vars->initial));
      auto program = [&](ClusterCoordinator& c) -> Task<Status> {
        PerWorkerDataset ds = c.create_per_worker_dataset("bench/records");
        PerWorkerValues it = c.create_per_worker_iterator(ds);
        for (int i = 0; i < steps; ++i) {
          std::vector<Arg> args{it};
          auto rv = co_await c.schedule(m->train_step(), std::move(args));
          if (!rv.ok()) co_return rv.status();
        }
        co_return co_await c.join();
      };
      auto done = cluster.run(program(cluster.coordinator()));
      if (!done || !done->ok()) std::abort();
    } else {
      tutorial::register_functions(registry);
      LocalCluster cluster(registry, o);
      auto model = tutorial::build_model(2, config);
      cluster.run(cluster.coordinator().start(model->variables, model->optimizer, model->initial));
      auto done = cluster.run(tutorial::train(cluster.coordinator(), config));
      if (!done || !done->ok()) std::abort();
    }
  }
  state.counters["steps/s"] = benchmark::Counter(static_cast<double>(steps * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ModelTutorialTraining)->Arg(0)->Arg(1)->ArgName("spec")->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace twinps::model

// As in `twinps serve` (a worker process): freed tensor memory stays mapped,
// so a step's buffers are not fresh pages every time.
int main(int argc, char** argv) {
  twinps::net::tune_allocator_for_large_tensors();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
