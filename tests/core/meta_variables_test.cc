// Meta variables (timing-only simulation): variables whose shards hold a
// shape and no values, read and written through ParameterClient's ordinary
// calls with meta tensors. The simulator's timings rest on one promise:
// a step on meta variables sends exactly the messages, of exactly the sizes,
// that the same step on real variables sends, and the ps counts them alike.
#include <gtest/gtest.h>

#include "core/variables/initializers.h"
#include "core/worker/step_context.h"
#include "inmemory/in_memory_cluster.h"

namespace twinps {
namespace {

// Records the pulls and pushes each worker sends and what comes back, by size and rows.
class RecordingTransport final : public Transport {
 public:
  struct Seen {
    std::string name;
    std::size_t request_bytes = 0;
    std::int64_t request_rows = 0;
    std::size_t response_bytes = 0;
    bool operator==(const Seen&) const = default;
  };
  RecordingTransport(std::unique_ptr<Transport> inner, std::vector<Seen>* seen)
      : inner_(std::move(inner)), seen_(seen) {}

  void call(const TaskId& to, Request request, CallOptions options, ResponseCallback done) override {
    const MessageShape shape = message_shape(request);
    if (!shape.data_plane) return inner_->call(to, std::move(request), std::move(options), std::move(done));
    const std::size_t at = seen_->size();
    seen_->push_back(Seen{request_name(request), shape.bytes, shape.rows, 0});
    inner_->call(to, std::move(request), std::move(options),
                 [seen = seen_, at, done = std::move(done)](StatusOr<Response> r) mutable {
                   if (r.ok()) (*seen)[at].response_bytes = wire_size(*r);
                   done(std::move(r));
                 });
  }
  void serve(CallHandler handler) override { inner_->serve(std::move(handler)); }

 private:
  std::unique_ptr<Transport> inner_;
  std::vector<Seen>* seen_;
};

// An embedding over both ps and a dense tower on ps 1.
std::vector<VariableLayout> layouts() {
  return {VariableLayout{"emb", {10, 4}, VariableKind::kTrainable, {{1, 0, 0, 5}, {2, 1, 5, 5}}},
          VariableLayout{"tower", {3, 4}, VariableKind::kTrainable, {{3, 1, 0, 3}}}};
}

struct Outcome {
  std::vector<RecordingTransport::Seen> seen;  // the worker's calls
  std::vector<ParameterStoreStats> stores;
  std::optional<MetaTensor> emb_read, tower_read;
  std::vector<std::int64_t> steps;  // each shard's version afterwards, in id order
};

// One step, written once: a lookup with a repeated id, a dense read, then a
// gradient for each. Real values, or meta tensors of the same shapes.
Outcome run_step(bool meta) {
  Outcome out;
  FunctionRegistry registry;
  registry.add_step("step", [&out, meta](StepContext& ctx) -> Task<StatusOr<Value>> {
    auto emb = ctx.variable("emb");
    auto tower = ctx.variable("tower");
    if (!emb.ok() || !tower.ok()) co_return absl::InternalError("no variables");
    const RowIds ids{1, 7, 7, 8, 2};
    ParameterClient::PullBatch pull;
    const int looked_up = pull.rows(**emb, ids);
    const int whole = pull.dense(**tower);
    auto read = co_await ctx.ps().pull(pull);
    if (!read.ok()) co_return read.status();
    out.emb_read = read->meta(looked_up);
    out.tower_read = read->meta(whole);
    ParameterClient::PushBatch push;
    if (meta) {
      push.gradient_rows(**emb, ids, MetaTensor{5, 4});
      push.gradient(**tower, MetaTensor{3, 4});
    } else {
      push.gradient_rows(**emb, ids, Matrix::Ones(5, 4));
      push.gradient(**tower, Matrix::Ones(3, 4));
    }
    Status pushed = co_await ctx.ps().push(push);
    if (!pushed.ok()) co_return pushed;
    co_return Value(std::int64_t{1});
  });
  InMemoryClusterOptions o;
  o.shape = ClusterShape{1, 2};
  o.wrap_transport = [&out](const TaskId& task, Executor&, std::unique_ptr<Transport> inner) -> std::unique_ptr<Transport> {
    if (task.job != Job::kWorker) return inner;
    return std::make_unique<RecordingTransport>(std::move(inner), &out.seen);
  };
  InMemoryCluster cluster(registry, o);
  std::vector<ShardState> initial;
  for (const auto& v : layouts()) {
    auto states = meta ? meta_shard_states(v) : shard_states(v, Matrix::Zero(v.rows(), v.cols()));
    for (auto& s : states) initial.push_back(std::move(s));
  }
  auto& c = cluster.coordinator();
  auto started = cluster.run(c.start(layouts(), OptimizerConfig{}, initial));
  EXPECT_TRUE(started && started->ok());
  auto rv = cluster.run(c.schedule("step"));
  EXPECT_TRUE(rv && rv->ok());
  auto joined = cluster.run(c.join());
  EXPECT_TRUE(joined && joined->ok()) << (joined ? describe(*joined) : "join did not finish");
  for (int ps = 0; ps < 2; ++ps) {
    out.stores.push_back(cluster.ps(ps)->store().stats());
    // Held in a local: a range-for over a member of the temporary StatusOr
    // would outlive it.
    const auto exported = cluster.ps(ps)->store().export_shards({});
    EXPECT_TRUE(exported.ok()) << exported.status();
    if (exported.ok())
      for (const auto& s : exported->shards) out.steps.push_back(s.step);
  }
  return out;
}

TEST(MetaVariablesTest, AStepSendsWhatTheRealStepSendsAndThePsCountsItAlike) {
  const Outcome real = run_step(false);
  const Outcome meta = run_step(true);
  std::vector<std::string> names;
  for (const auto& s : real.seen) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Pull", "Pull", "Push", "Push"})) << "a pull and a push to each ps";
  EXPECT_EQ(meta.seen, real.seen) << "same calls, same bytes and rows both ways";
  for (std::size_t ps = 0; ps < 2; ++ps) {
    EXPECT_EQ(meta.stores[ps].bytes_pulled, real.stores[ps].bytes_pulled) << "ps " << ps;
    EXPECT_EQ(meta.stores[ps].bytes_pushed, real.stores[ps].bytes_pushed) << "ps " << ps;
    EXPECT_EQ(meta.stores[ps].rows_updated, real.stores[ps].rows_updated) << "ps " << ps;
    EXPECT_EQ(meta.stores[ps].optimizer_steps, real.stores[ps].optimizer_steps) << "ps " << ps;
  }
  EXPECT_EQ(meta.steps, real.steps);
  EXPECT_EQ(meta.steps, (std::vector<std::int64_t>{1, 1, 1})) << "every shard moved one version";
  // Reads give the shape the values would have: a row per id, the whole tower.
  EXPECT_EQ(meta.emb_read, (MetaTensor{5, 4}));
  EXPECT_EQ(meta.tower_read, (MetaTensor{3, 4}));
  EXPECT_FALSE(real.emb_read.has_value());
}

TEST(MetaVariablesTest, AMetaGradientOfTheWrongShapeIsRefusedNamingTheVariable) {
  FunctionRegistry registry;
  Status refused;
  registry.add_step("step", [&refused](StepContext& ctx) -> Task<StatusOr<Value>> {
    auto emb = ctx.variable("emb");
    if (!emb.ok()) co_return emb.status();
    ParameterClient::PushBatch push;
    push.gradient_rows(**emb, {1, 2}, MetaTensor{3, 4});  // 3 rows for 2 ids
    refused = co_await ctx.ps().push(push);
    co_return Value(std::int64_t{1});
  });
  InMemoryClusterOptions o;
  o.shape = ClusterShape{1, 2};
  InMemoryCluster cluster(registry, o);
  std::vector<ShardState> initial;
  for (const auto& v : layouts())
    for (auto& s : meta_shard_states(v)) initial.push_back(std::move(s));
  auto& c = cluster.coordinator();
  ASSERT_TRUE(cluster.run(c.start(layouts(), OptimizerConfig{}, initial)));
  ASSERT_TRUE(cluster.run(c.schedule("step")));
  ASSERT_TRUE(cluster.run(c.join()));
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("variable \"emb\": a meta tensor of 3x4 for 2 row ids of 10x4"), std::string::npos)
      << refused;
}

}  // namespace
}  // namespace twinps
