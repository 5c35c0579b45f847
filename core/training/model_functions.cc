#include "core/training/model_functions.h"

#include "core/model/spec_loader.h"
#include "core/training/data_source.h"
#include "core/training/exactly_once.h"
#include "core/worker/step_context.h"

namespace twinps::training {

std::vector<Value> model_args(const model::spec::ModelSpec& spec) { return {Value(spec.SerializeAsString())}; }

Value StepReport::to_value() const {
  Matrix m(1, 5);
  m << static_cast<float>(loss), static_cast<float>(records_read), static_cast<float>(records_skipped),
      static_cast<float>(files_cut_short), static_cast<float>(passes_completed);
  return Value(std::move(m));
}

StatusOr<StepReport> StepReport::from_value(const Value& v) {
  const auto* m = std::get_if<Matrix>(&v);
  if (!m || m->rows() != 1 || m->cols() != 5) return absl::InvalidArgumentError("not a training step's report");
  StepReport r;
  r.loss = (*m)(0, 0);
  r.records_read = static_cast<std::int64_t>((*m)(0, 1));
  r.records_skipped = static_cast<std::int64_t>((*m)(0, 2));
  r.files_cut_short = static_cast<std::int64_t>((*m)(0, 3));
  r.passes_completed = static_cast<std::int64_t>((*m)(0, 4));
  return r;
}

namespace {

StatusOr<std::unique_ptr<Resource>> compile_shipped(ResourceContext& ctx) {
  if (ctx.args.size() != 1 || !std::holds_alternative<std::string>(ctx.args[0]))
    return absl::InvalidArgumentError(std::string(kModelFunction) + " takes [serialized ModelSpec]");
  model::spec::ModelSpec spec;
  if (!spec.ParseFromString(std::get<std::string>(ctx.args[0])))
    return absl::InvalidArgumentError(std::string(kModelFunction) + ": the argument is not a serialized ModelSpec");
  // Checked again here: a worker trusts nothing it is sent.
  auto errors = model::validate_model_spec(spec, "<shipped model spec>");
  if (!errors.empty()) return absl::InvalidArgumentError(errors.front().to_string());
  auto compiled = model::CompiledModel::compile(spec);
  if (!compiled.ok()) return compiled.status();
  return std::unique_ptr<Resource>(std::make_unique<ModelResource>(*std::move(compiled)));
}

Task<StatusOr<Value>> train_step(StepContext& ctx) {
  auto model = ctx.resource<ModelResource>(0);
  if (!model.ok()) co_return model.status();
  auto iterator = ctx.resource<data::RecordIteratorResource>(1);
  if (!iterator.ok()) co_return iterator.status();
  std::int64_t steps = 1;
  if (ctx.args().size() > 2) {
    const auto* n = std::get_if<std::int64_t>(&ctx.args()[2]);
    if (!n || *n < 1) co_return absl::InvalidArgumentError("the step count (argument 2) must be a positive integer");
    steps = *n;
  }
  const data::ReadStats before = (*iterator)->stats();
  auto loss = co_await (*model)->model().run_train_steps(ctx, **iterator, steps);
  if (!loss.ok()) co_return loss.status();
  const data::ReadStats& after = (*iterator)->stats();
  StepReport r;
  r.loss = *loss;
  r.records_read = after.records_read - before.records_read;
  r.records_skipped = after.records_skipped - before.records_skipped;
  r.files_cut_short = after.files_cut_short - before.files_cut_short;
  r.passes_completed = after.passes_completed - before.passes_completed;
  co_return r.to_value();
}

Task<StatusOr<Value>> eval_step(StepContext& ctx) {
  auto model = ctx.resource<ModelResource>(0);
  if (!model.ok()) co_return model.status();
  auto iterator = ctx.resource<data::RecordIteratorResource>(1);
  if (!iterator.ok()) co_return iterator.status();
  auto loss = co_await (*model)->model().run_eval_step(ctx, **iterator);
  if (!loss.ok()) co_return loss.status();
  co_return Value(*loss);
}

}  // namespace

void register_model_functions(FunctionRegistry& registry) {
  registry.add_resource(kModelFunction, compile_shipped);
  registry.add_step(kTrainStep, train_step);
  registry.add_step(kEvalStep, eval_step);
}

void register_training_functions(FunctionRegistry& registry) {
  register_model_functions(registry);
  register_data_functions(registry);
  register_exactly_once_functions(registry);
}

}  // namespace twinps::training
