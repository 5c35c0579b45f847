#include "sim/spec_workload.h"

#include <cmath>

#include <google/protobuf/text_format.h>

#include "core/model/spec_loader.h"
#include "sim/scenario_loader.h"

namespace twinps::sim {

namespace {

// The spec's and the scenario's Partitioner messages have the same fields
// under the same numbers (both are TensorFlow's three partitioners).
scenario::Partitioner scenario_partitioner(const model::spec::Partitioner& p) {
  scenario::Partitioner out;
  out.ParseFromString(p.SerializeAsString());
  return out;
}

scenario::Optimizer::Kind optimizer_kind(OptimizerConfig::Kind kind) {
  switch (kind) {
    case OptimizerConfig::Kind::kSgd: return scenario::Optimizer::SGD;
    case OptimizerConfig::Kind::kAdagrad: return scenario::Optimizer::ADAGRAD;
    case OptimizerConfig::Kind::kRmsprop: return scenario::Optimizer::RMSPROP;
    case OptimizerConfig::Kind::kAdam: return scenario::Optimizer::ADAM;
  }
  return scenario::Optimizer::SGD;
}

}  // namespace

StatusOr<scenario::SyntheticModel> synthetic_model_of(const model::CompiledModel& model, std::string_view read_kernel) {
  const auto& spec = model.spec();
  const auto& variables = model.graph().variables();
  const model::StepCost& cost = model.step_cost();
  scenario::SyntheticModel out;
  out.set_batch_size(static_cast<std::int32_t>(spec.batch_size()));
  out.set_step_gflops(cost.train_flops / 1e9);
  std::vector<KernelWork> kernels = model.graph().train_kernels(spec.batch_size());
  if (!read_kernel.empty()) kernels.push_back(model.graph().read_kernel(read_kernel, spec.batch_size()));
  for (const KernelWork& k : kernels) {
    auto* sk = out.add_step_kernel();
    sk->set_kind(std::string(k.kind));
    sk->set_flops(k.flops);
    sk->set_bytes(k.bytes);
    sk->set_inputs(k.inputs);
    if (k.records > 0) sk->set_records(k.records);
  }
  out.set_steps_per_closure(static_cast<std::int32_t>(spec.training().steps_per_execution()));
  if (spec.has_partitioner()) *out.mutable_partitioner() = scenario_partitioner(spec.partitioner());
  if (spec.placement() == model::spec::AUTO) out.set_placement(scenario::AUTO);
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const auto& v = variables[i];
    const auto& traffic = cost.variables[i];
    auto* s = out.add_variable();
    s->set_name(v.name);
    for (auto d : v.shape) s->add_shape(d);
    if (v.embedding) {
      // Drawn with replacement by the synthetic step, which pulls and
      // updates the distinct rows: on average traffic.rows_per_step.
      s->set_rows_per_step(std::max<std::int64_t>(1, std::llround(traffic.lookups_per_step)));
      s->set_zipf_exponent(v.zipf_exponent);
    }
    if (v.has_own_partitioner) {
      const auto& layer = spec.layer(v.layer);
      if (layer.has_embedding() && layer.embedding().has_partitioner()) {
        *s->mutable_partitioner() = scenario_partitioner(layer.embedding().partitioner());
      } else if (layer.has_dense() && layer.dense().has_partitioner()) {
        *s->mutable_partitioner() = scenario_partitioner(layer.dense().partitioner());
      } else if (layer.has_custom() && layer.custom().has_partitioner()) {
        *s->mutable_partitioner() = scenario_partitioner(layer.custom().partitioner());
      } else {
        return absl::InvalidArgumentError("variable \"" + v.name + "\" has a partitioner of its own the simulator cannot read");
      }
    }
  }
  // The synthetic model has one optimizer: the cluster's (the first variable's). A variable
  // whose optimizer group differs is priced with it too (its slots in resource estimates).
  auto vars = model.build_variables(1, /*meta=*/true);
  if (!vars.ok()) return vars.status();
  out.mutable_optimizer()->set_kind(optimizer_kind(vars->optimizer.kind));
  out.mutable_optimizer()->set_learning_rate(vars->optimizer.learning_rate.initial);
  return out;
}

}  // namespace twinps::sim

namespace twinps::sim {

TimedModel load_timed_model_file(const std::string& path) {
  TimedModel out;
  auto text = config::read_text_file(path, "model", out.errors);
  if (!text) return out;
  // Which schema is it? Parsed under each, silently; the one that parses wins.
  google::protobuf::TextFormat::ParseInfoTree tree;
  std::vector<config::TextProtoError> as_synthetic, as_spec;
  scenario::SyntheticModel synthetic;
  model::spec::ModelSpec spec;
  const bool is_synthetic = config::parse_text_proto(*text, path, "synthetic model", synthetic, tree, as_synthetic);
  const bool is_spec = !is_synthetic && config::parse_text_proto(*text, path, "model spec", spec, tree, as_spec);
  if (is_synthetic) {
    LoadedModel loaded = parse_model(*text, path);
    out.model = std::move(loaded.model);
    out.errors = std::move(loaded.errors);
    return out;
  }
  if (!is_spec) {
    // Neither: the schema whose parse got further is likelier the one meant.
    auto where = [](const std::vector<config::TextProtoError>& e) {
      return e.empty() ? std::pair<int, int>{0, 0} : std::pair<int, int>{e.front().line, e.front().column};
    };
    const bool spec_first = where(as_spec) >= where(as_synthetic);
    auto add = [&](std::vector<config::TextProtoError>& errors, const char* schema) {
      if (errors.empty()) return;
      auto e = errors.front();
      e.message = std::string("not a ") + schema + ": " + e.message;
      out.errors.push_back(std::move(e));
    };
    add(spec_first ? as_spec : as_synthetic,
        spec_first ? "model spec (core/model/model_spec.proto)" : "synthetic model (scenario.SyntheticModel)");
    add(spec_first ? as_synthetic : as_spec,
        spec_first ? "synthetic model (scenario.SyntheticModel)" : "model spec (core/model/model_spec.proto)");
    return out;
  }
  out.from_spec = true;
  model::LoadedSpec loaded = model::parse_model_spec(*text, path);
  if (!loaded.ok()) {
    out.errors = std::move(loaded.errors);
    return out;
  }
  auto compiled = model::CompiledModel::compile(loaded.spec);
  auto timed = compiled.ok() ? synthetic_model_of(**compiled) : StatusOr<scenario::SyntheticModel>(compiled.status());
  if (!timed.ok()) {
    out.errors.push_back(config::TextProtoError{path, 0, 0, "", std::string(timed.status().message())});
    return out;
  }
  out.model = std::move(*timed);
  return out;
}

}  // namespace twinps::sim
