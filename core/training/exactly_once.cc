#include "core/training/exactly_once.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/data/in_memory_records.h"
#include "core/training/model_functions.h"
#include "core/worker/step_context.h"

namespace twinps::training {

StatusOr<std::unique_ptr<RecordTable>> RecordTable::read(const data::RecordDatasetResource& dataset,
                                                         RandomStream random, std::int64_t expected) {
  auto table = std::make_unique<RecordTable>();
  table->schema_ = dataset.schema();
  auto iterator = dataset.make_iterator(random);
  for (;;) {
    auto batch = iterator->next();
    if (!batch.ok()) {
      if (batch.status().code() == StatusCode::kOutOfRange) break;
      return batch.status();
    }
    data::append_records(table->records_, *batch);
  }
  if (table->size() != expected) {
    const std::int64_t skipped = iterator->stats().records_skipped;
    return absl::FailedPreconditionError(
        "exactly-once visitation numbers every training record, but " + std::to_string(table->size()) + " of the " +
        std::to_string(expected) + " records counted could be read" +
        (skipped > 0 ? " (" + std::to_string(skipped) + " bad records skipped)" : std::string()) +
        ": repair or drop the bad records, or train at least once");
  }
  return table;
}

std::vector<std::int64_t> epoch_order(std::int64_t records, std::uint64_t seed, std::int64_t epoch, bool shuffle) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(records));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (shuffle) {
    RandomStream random = RandomStream(seed).fork("epoch order", static_cast<std::uint64_t>(epoch));
    random.shuffle(order);
  }
  return order;
}

std::string pack_ids(std::span<const std::int64_t> ids) {
  std::string bytes(ids.size() * sizeof(std::int64_t), '\0');
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto v = static_cast<std::uint64_t>(ids[i]);
    for (std::size_t b = 0; b < 8; ++b) bytes[i * 8 + b] = static_cast<char>((v >> (8 * b)) & 0xff);
  }
  return bytes;
}

StatusOr<std::vector<std::int64_t>> unpack_ids(const std::string& bytes) {
  if (bytes.size() % sizeof(std::int64_t) != 0)
    return absl::InvalidArgumentError("record ids: " + std::to_string(bytes.size()) +
                                      " bytes is not a whole number of 8-byte ids");
  std::vector<std::int64_t> ids(bytes.size() / 8);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::uint64_t v = 0;
    for (std::size_t b = 0; b < 8; ++b) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes[i * 8 + b])) << (8 * b);
    ids[i] = static_cast<std::int64_t>(v);
  }
  return ids;
}

namespace {

StatusOr<std::unique_ptr<Resource>> build_table(ResourceContext& ctx) {
  const auto* dataset = dynamic_cast<const data::RecordDatasetResource*>(ctx.parent);
  if (!dataset) return absl::InvalidArgumentError(std::string(kRecordTableFunction) + " needs a record dataset as its parent");
  if (ctx.args.size() != 1 || !std::holds_alternative<std::int64_t>(ctx.args[0]))
    return absl::InvalidArgumentError(std::string(kRecordTableFunction) + " takes [expected records]");
  auto table = RecordTable::read(*dataset, ctx.random, std::get<std::int64_t>(ctx.args[0]));
  if (!table.ok()) return table.status();
  return std::unique_ptr<Resource>(std::move(*table));
}

// The split's record ids, checked against the table.
StatusOr<std::vector<std::size_t>> split_rows(const StepContext& ctx, const RecordTable& table) {
  const auto* packed = std::get_if<std::string>(&ctx.args()[2]);
  if (!packed) return absl::InvalidArgumentError("the split's record ids (argument 2) must be packed ids");
  auto ids = unpack_ids(*packed);
  if (!ids.ok()) return ids.status();
  if (ids->empty()) return absl::InvalidArgumentError("a split of no records");
  std::vector<std::size_t> rows;
  rows.reserve(ids->size());
  for (std::int64_t id : *ids) {
    if (id < 0 || id >= table.size())
      return absl::InvalidArgumentError("record id " + std::to_string(id) + " is outside the training data's " +
                                        std::to_string(table.size()) + " records");
    rows.push_back(static_cast<std::size_t>(id));
  }
  return rows;
}

Task<StatusOr<Value>> train_split(StepContext& ctx) {
  auto model = ctx.resource<ModelResource>(0);
  if (!model.ok()) co_return model.status();
  auto table = ctx.resource<RecordTable>(1);
  if (!table.ok()) co_return table.status();
  if (ctx.args().size() != 4) co_return absl::InvalidArgumentError(std::string(kTrainSplitStep) + " takes [model, table, ids, key]");
  const auto* key = std::get_if<std::int64_t>(&ctx.args()[3]);
  if (!key || *key < 1) co_return absl::InvalidArgumentError("the split key (argument 3) must be a positive integer");
  auto rows = split_rows(ctx, **table);
  if (!rows.ok()) co_return rows.status();
  auto visits = ctx.variable(model::CompiledModel::kVisits);
  if (!visits.ok()) co_return visits.status();

  const model::CompiledModel& m = (*model)->model();
  const std::int64_t batch = m.batch_size();
  const auto n = static_cast<std::int64_t>(rows->size());
  // The split's records in its order, batched; no shuffle: the order is the coordinator's.
  auto records = std::make_shared<const data::RecordBatch>(data::take_records((*table)->records(), *rows));
  DatasetOptions options;
  options.batch_size = batch;
  auto dataset = data::InMemoryRecordDataset::create((*table)->schema(), std::move(records), options);
  if (!dataset.ok()) co_return dataset.status();
  auto iterator = (*dataset)->make_iterator(ctx.random().fork("split"));

  ctx.ps().set_split(static_cast<std::uint64_t>(*key));
  // Step i's examples are counted in step i's push, applied with its gradients.
  auto count_visits = [&](std::int64_t step, ParameterClient::PushBatch& push) {
    const std::int64_t begin = step * batch, end = std::min(n, begin + batch);
    RowIds ids;
    for (std::int64_t i = begin; i < end; ++i) ids.push_back(static_cast<std::int64_t>((*rows)[static_cast<std::size_t>(i)]));
    push.add_rows(**visits, std::move(ids), Matrix::Ones(end - begin, 1));
  };
  auto loss = co_await m.run_train_steps(ctx, *iterator, (n + batch - 1) / batch, count_visits);
  if (!loss.ok()) co_return loss.status();
  StepReport report;
  report.loss = *loss;
  report.records_read = n;
  co_return report.to_value();
}

}  // namespace

Task<StatusOr<std::vector<std::int64_t>>> read_visit_counts(ClusterCoordinator& coordinator) {
  const VariableLayout* v = coordinator.variables().find(model::CompiledModel::kVisits);
  if (!v) co_return std::vector<std::int64_t>{};
  ParameterClient ps = coordinator.parameter_client();
  ParameterClient::PullBatch pull;
  const int h = pull.dense(*v);
  auto r = co_await ps.pull(pull);
  if (!r.ok()) co_return r.status();
  const Matrix& m = r->value(h);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(m.rows()));
  for (Eigen::Index i = 0; i < m.rows(); ++i) counts[static_cast<std::size_t>(i)] = std::llround(m(i, 0));
  co_return counts;
}

void register_exactly_once_functions(FunctionRegistry& registry) {
  registry.add_resource(kRecordTableFunction, build_table);
  registry.add_step(kTrainSplitStep, train_split);
}

}  // namespace twinps::training
