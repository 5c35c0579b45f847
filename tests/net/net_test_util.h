#pragma once
// Sample messages with every field set to a non-default value, and field-by-
// field comparisons, for the convert and transport tests.
#include <gtest/gtest.h>

#include <optional>

#include "core/messages/messages.h"

namespace twinps::net::testing {

inline Matrix ramp(std::int64_t rows, std::int64_t cols, float start = 0.5f) {
  Matrix m(rows, cols);
  for (std::int64_t i = 0; i < m.size(); ++i) m.data()[i] = start + static_cast<float>(i) * 0.25f;
  return m;
}

inline Fence sample_fence() { return Fence{7, 42}; }

inline OptimizerConfig sample_optimizer();

inline ShardState sample_shard(ShardId id, std::int64_t rows, std::int64_t cols) {
  ShardState s;
  s.spec = ShardSpec{id, "embedding/part_" + std::to_string(id), VariableKind::kAccumulator, rows, cols};
  s.value = ramp(rows, cols, 1.0f);
  s.slots = {ramp(rows, cols, 2.0f), ramp(rows, cols, 3.0f)};
  s.step = 17;
  s.counter = -5;
  if (id == 1) {  // a shard with its own optimizer (a model's optimizer group)
    s.spec.optimizer = sample_optimizer();
    s.spec.optimizer->kind = OptimizerConfig::Kind::kAdam;
  }
  return s;
}

inline OptimizerConfig sample_optimizer() {
  OptimizerConfig o;
  o.kind = OptimizerConfig::Kind::kRmsprop;
  o.learning_rate.kind = LearningRateSchedule::Kind::kPiecewiseConstant;
  o.learning_rate.initial = 0.125;
  o.learning_rate.decay_steps = 77;
  o.learning_rate.decay_rate = 0.5;
  o.learning_rate.staircase = true;
  o.learning_rate.boundaries = {10, 20};
  o.learning_rate.values = {1.0, 0.5, 0.25};
  o.momentum = 0.9;
  o.nesterov = true;
  o.rho = 0.8;
  o.centered = true;
  o.epsilon = 1e-6;
  o.beta_1 = 0.7;
  o.beta_2 = 0.6;
  o.initial_accumulator_value = 0.3;
  o.lazy_adam = true;
  return o;
}

inline VariableLayout sample_layout() {
  VariableLayout v;
  v.name = "dense/kernel";
  v.shape = {10, 4, 2};
  v.kind = VariableKind::kCounter;
  v.shards = {ShardPlacement{3, 1, 0, 6}, ShardPlacement{4, 2, 6, 4}};
  v.optimizer = sample_optimizer();
  return v;
}

inline std::vector<Value> sample_values(std::int64_t tensor_rows = 3) {
  return {Value{}, Value{2.5}, Value{std::int64_t{-9}}, Value{std::string("hello\0world", 11)},
          Value{ramp(tensor_rows, 4)}, Value{ResourceRef{12}}};
}

// One of every request, every field non-default. `big` scales the tensors.
inline std::vector<Request> sample_requests(std::int64_t big = 8) {
  std::vector<Request> out;
  out.push_back(HealthRequest{});
  out.push_back(CreateShardsRequest{sample_fence(), sample_optimizer(), {sample_shard(1, big, 3), sample_shard(2, 0, 3)},
                                    true});
  out.push_back(PullRequest{{PullItem{1, true, {}}, PullItem{2, false, {5, 0, 3}}}});
  Update dense{1, Update::Op::kApplyGradient, false, {}, ramp(big, 3), 0};
  dense.read_version = 41;  // the version the gradient was computed from
  Update sparse{2, Update::Op::kAssign, true, {4, 1}, ramp(2, 3), 0};
  Update counter{3, Update::Op::kAdd, false, {}, Matrix(), 11};
  out.push_back(PushRequest{sample_fence(), {dense, sparse, counter}, PullRequest{{PullItem{2, false, {1, 0}}}}});
  out.push_back(ExportShardsRequest{{3, 1, 4}});
  out.push_back(FenceRequest{sample_fence()});
  out.push_back(ApplySyncStepRequest{sample_fence(), 17});
  // Sync mode: a push and a closure tagged with their step.
  out.push_back(PushRequest{sample_fence(), {dense}, {}, 16});
  // Exactly-once visitation: a split's push, with its key.
  out.push_back(PushRequest{sample_fence(), {dense}, {}, kNoSyncStep, 0x5eedf00dull});
  out.push_back(SetupWorkerRequest{sample_fence(), {sample_layout(), VariableLayout{"scalar", {}, VariableKind::kTrainable, {}}}});
  out.push_back(CreateResourceRequest{5, 4, "make_iterator", sample_values(big)});
  out.push_back(RunClosureRequest{9, "train_step", sample_values(big), sample_fence(), 3});
  out.push_back(RunClosureRequest{10, "train_step", {}, sample_fence(), 3, 16});
  return out;
}

inline std::vector<Response> sample_responses(std::int64_t big = 8) {
  // emplace with in_place_type: GCC 12 warns (falsely) about moving a variant built from a temporary.
  std::vector<Response> out;
  out.reserve(6);
  out.emplace_back(std::in_place_type<EmptyResponse>);
  out.emplace_back(std::in_place_type<HealthResponse>, HealthResponse{TaskId::evaluator(2), 77});
  out.emplace_back(std::in_place_type<PullResponse>);
  std::get<PullResponse>(out.back()).items = {PulledValue{ramp(big, 5), 0}, PulledValue{Matrix(), 31}};
  std::get<PullResponse>(out.back()).items[0].version = 42;
  out.emplace_back(std::in_place_type<PushResponse>, PushResponse{true, {}});
  std::get<PushResponse>(out.back()).pulled.items = {PulledValue{ramp(2, 3), 0}};
  for (std::int64_t s : {0, 3, 3, 40}) std::get<PushResponse>(out.back()).staleness.record(s);
  std::get<PushResponse>(out.back()).staleness.unmeasured = 2;
  std::get<PushResponse>(out.back()).staleness.dropped = 3;  // sync mode: gradients for a step already applied
  out.emplace_back(std::in_place_type<ExportShardsResponse>);
  std::get<ExportShardsResponse>(out.back()).shards = {sample_shard(1, big, 2), sample_shard(7, 1, 1)};
  out.emplace_back(std::in_place_type<RunClosureResponse>);
  std::get<RunClosureResponse>(out.back()).result = ramp(big, 2);
  std::get<RunClosureResponse>(out.back()).staleness.record(5);
  return out;
}

// ------------------------------------------------------------------ comparisons
// Declared up front so that the vector overload finds each of them.
void expect_eq(const ShardState& a, const ShardState& b);
void expect_eq(const ShardPlacement& a, const ShardPlacement& b);
void expect_eq(const VariableLayout& a, const VariableLayout& b);
void expect_eq(const PullItem& a, const PullItem& b);
void expect_eq(const Update& a, const Update& b);
void expect_eq(const PulledValue& a, const PulledValue& b);
inline void expect_eq(const Matrix& a, const Matrix& b) {
  ASSERT_EQ(a.rows(), b.rows());
  ASSERT_EQ(a.cols(), b.cols());
  EXPECT_TRUE(a == b);
}
inline void expect_eq(const Fence& a, const Fence& b) { EXPECT_TRUE(a == b); }
inline void expect_eq(const Value& a, const Value& b) {
  ASSERT_EQ(a.index(), b.index());
  if (auto* m = std::get_if<Matrix>(&a)) return expect_eq(*m, std::get<Matrix>(b));
  EXPECT_TRUE(a == b);
}
template <typename T>
void expect_eq(const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) expect_eq(a[i], b[i]);
}
inline void expect_eq(std::int64_t a, std::int64_t b) { EXPECT_EQ(a, b); }
inline void expect_eq(const OptimizerConfig& a, const OptimizerConfig& b);
inline void expect_eq(const std::optional<OptimizerConfig>& a, const std::optional<OptimizerConfig>& b) {
  ASSERT_EQ(a.has_value(), b.has_value());
  if (a) expect_eq(*a, *b);
}
inline void expect_eq(const ShardSpec& a, const ShardSpec& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  expect_eq(a.optimizer, b.optimizer);
}
inline void expect_eq(const ShardState& a, const ShardState& b) {
  expect_eq(a.spec, b.spec);
  expect_eq(a.value, b.value);
  expect_eq(a.slots, b.slots);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.counter, b.counter);
}
inline void expect_eq(const LearningRateSchedule& a, const LearningRateSchedule& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.initial, b.initial);
  EXPECT_EQ(a.decay_steps, b.decay_steps);
  EXPECT_EQ(a.decay_rate, b.decay_rate);
  EXPECT_EQ(a.staircase, b.staircase);
  EXPECT_EQ(a.boundaries, b.boundaries);
  EXPECT_EQ(a.values, b.values);
}
inline void expect_eq(const OptimizerConfig& a, const OptimizerConfig& b) {
  EXPECT_EQ(a.kind, b.kind);
  expect_eq(a.learning_rate, b.learning_rate);
  EXPECT_EQ(a.momentum, b.momentum);
  EXPECT_EQ(a.nesterov, b.nesterov);
  EXPECT_EQ(a.rho, b.rho);
  EXPECT_EQ(a.centered, b.centered);
  EXPECT_EQ(a.epsilon, b.epsilon);
  EXPECT_EQ(a.beta_1, b.beta_1);
  EXPECT_EQ(a.beta_2, b.beta_2);
  EXPECT_EQ(a.initial_accumulator_value, b.initial_accumulator_value);
  EXPECT_EQ(a.lazy_adam, b.lazy_adam);
}
inline void expect_eq(const ShardPlacement& a, const ShardPlacement& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.ps, b.ps);
  EXPECT_EQ(a.row_offset, b.row_offset);
  EXPECT_EQ(a.rows, b.rows);
}
inline void expect_eq(const VariableLayout& a, const VariableLayout& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.shape, b.shape);
  EXPECT_EQ(a.kind, b.kind);
  expect_eq(a.shards, b.shards);
  expect_eq(a.optimizer, b.optimizer);
}
inline void expect_eq(const PullItem& a, const PullItem& b) {
  EXPECT_EQ(a.shard, b.shard);
  EXPECT_EQ(a.all_rows, b.all_rows);
  EXPECT_EQ(a.rows, b.rows);
}
inline void expect_eq(const Update& a, const Update& b) {
  EXPECT_EQ(a.shard, b.shard);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.sparse, b.sparse);
  EXPECT_EQ(a.rows, b.rows);
  expect_eq(a.values, b.values);
  EXPECT_EQ(a.counter_delta, b.counter_delta);
  EXPECT_EQ(a.read_version, b.read_version);
}
inline void expect_eq(const PulledValue& a, const PulledValue& b) {
  expect_eq(a.values, b.values);
  EXPECT_EQ(a.counter, b.counter);
  EXPECT_EQ(a.version, b.version);
}

struct RequestEq {
  const Request& other;
  void operator()(const HealthRequest&) const {}
  void operator()(const CreateShardsRequest& a) const {
    auto& b = std::get<CreateShardsRequest>(other);
    expect_eq(a.fence, b.fence);
    expect_eq(a.optimizer, b.optimizer);
    expect_eq(a.shards, b.shards);
    EXPECT_EQ(a.replace_existing, b.replace_existing);
  }
  void operator()(const PullRequest& a) const { expect_eq(a.items, std::get<PullRequest>(other).items); }
  void operator()(const PushRequest& a) const {
    auto& b = std::get<PushRequest>(other);
    expect_eq(a.fence, b.fence);
    expect_eq(a.updates, b.updates);
    expect_eq(a.then_pull.items, b.then_pull.items);
    EXPECT_EQ(a.sync_step, b.sync_step);
    EXPECT_EQ(a.split_key, b.split_key);
  }
  void operator()(const ExportShardsRequest& a) const { EXPECT_EQ(a.shards, std::get<ExportShardsRequest>(other).shards); }
  void operator()(const FenceRequest& a) const { expect_eq(a.fence, std::get<FenceRequest>(other).fence); }
  void operator()(const ApplySyncStepRequest& a) const {
    expect_eq(a.fence, std::get<ApplySyncStepRequest>(other).fence);
    EXPECT_EQ(a.step, std::get<ApplySyncStepRequest>(other).step);
  }
  void operator()(const SetupWorkerRequest& a) const {
    auto& b = std::get<SetupWorkerRequest>(other);
    expect_eq(a.fence, b.fence);
    expect_eq(a.variables, b.variables);
  }
  void operator()(const CreateResourceRequest& a) const {
    auto& b = std::get<CreateResourceRequest>(other);
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_EQ(a.fn, b.fn);
    expect_eq(a.args, b.args);
  }
  void operator()(const RunClosureRequest& a) const {
    auto& b = std::get<RunClosureRequest>(other);
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.fn, b.fn);
    expect_eq(a.args, b.args);
    expect_eq(a.fence, b.fence);
    EXPECT_EQ(a.worker_incarnation, b.worker_incarnation);
    EXPECT_EQ(a.sync_step, b.sync_step);
  }
};
inline void expect_eq(const Request& a, const Request& b) {
  ASSERT_EQ(a.index(), b.index()) << request_name(a) << " vs " << request_name(b);
  std::visit(RequestEq{b}, a);
}

struct ResponseEq {
  const Response& other;
  void operator()(const EmptyResponse&) const {}
  void operator()(const HealthResponse& a) const {
    auto& b = std::get<HealthResponse>(other);
    EXPECT_EQ(a.task, b.task);
    EXPECT_EQ(a.incarnation, b.incarnation);
  }
  void operator()(const PullResponse& a) const { expect_eq(a.items, std::get<PullResponse>(other).items); }
  void operator()(const PushResponse& a) const {
    EXPECT_EQ(a.duplicate, std::get<PushResponse>(other).duplicate);
    expect_eq(a.pulled.items, std::get<PushResponse>(other).pulled.items);
    EXPECT_EQ(a.staleness, std::get<PushResponse>(other).staleness);
  }
  void operator()(const ExportShardsResponse& a) const {
    expect_eq(a.shards, std::get<ExportShardsResponse>(other).shards);
  }
  void operator()(const RunClosureResponse& a) const {
    expect_eq(a.result, std::get<RunClosureResponse>(other).result);
    EXPECT_EQ(a.staleness, std::get<RunClosureResponse>(other).staleness);
  }
};
inline void expect_eq(const Response& a, const Response& b) {
  ASSERT_EQ(a.index(), b.index());
  std::visit(ResponseEq{b}, a);
}

}  // namespace twinps::net::testing
