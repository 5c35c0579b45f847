// twinps model: check a model spec and show what it builds — the layers with
// their output widths, the variables with their shards and parameter servers
// for --ps N, and what one training step computes and moves (the numbers the
// simulator's cost model and the tuner use). Exit 0 for a valid spec, 2 for
// bad input (flags, the spec: each problem as file:line:column: field: message).
#include <cstdio>
#include <string>

#include "core/model/compiled_model.h"
#include "core/model/spec_loader.h"
#include "core/ps/optimizer.h"
#include "tools/cli.h"
#include "tools/commands/commands.h"

namespace twinps::cli {

namespace {

std::string layer_kind(const model::spec::Layer& l) {
  switch (l.kind_case()) {
    case model::spec::Layer::kEmbedding: return "embedding";
    case model::spec::Layer::kDense: return "dense";
    case model::spec::Layer::kConcatenate: return "concatenate";
    case model::spec::Layer::kDropout: return "dropout";
    case model::spec::Layer::kDotInteraction: return "dot_interaction";
    case model::spec::Layer::kAdd: return "add";
    case model::spec::Layer::kCustom: return "custom " + l.custom().type();
    case model::spec::Layer::KIND_NOT_SET: break;
  }
  return "?";
}

std::string shape_text(const Shape& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? " x " : "") + std::to_string(s[i]);
  return out.empty() ? "scalar" : out;
}

std::string bytes_text(double b) {
  if (b >= 1 << 20) return format("%.2f MiB", b / (1 << 20));
  if (b >= 1 << 10) return format("%.1f KiB", b / (1 << 10));
  return format("%.0f B", b);
}

}  // namespace

// What each ps holds: shards and bytes (4 per value), under the spec's placement.
void print_per_ps(const model::CompiledModel::Variables& variables, int num_ps, bool automatic) {
  std::vector<double> bytes(static_cast<std::size_t>(num_ps), 0);
  std::vector<int> shards(static_cast<std::size_t>(num_ps), 0);
  for (const auto& v : variables.layouts)
    for (const auto& s : v.shards) {
      bytes[static_cast<std::size_t>(s.ps)] += 4.0 * static_cast<double>(s.rows * v.cols());
      ++shards[static_cast<std::size_t>(s.ps)];
    }
  std::printf("\nheld per ps (%s placement):\n", automatic ? "automatic" : "round-robin");
  for (int p = 0; p < num_ps; ++p)
    std::printf("  ps %-3d %4d shards  %s\n", p, shards[static_cast<std::size_t>(p)],
                bytes_text(bytes[static_cast<std::size_t>(p)]).c_str());
}

int run_model(int argc, char** argv) {
  std::string path;
  int num_ps = 1;
  po::options_description opts("twinps model options");
  opts.add_options()("help,h", "show this help")
      ("spec", po::value(&path), "the model spec (Protobuf text format, schema core/model/model_spec.proto)")
      ("ps", value_or(&num_ps, 1)->notifier(in_range(1, 100000)), "parameter servers to place the variables on");
  po::positional_options_description positional;
  positional.add("spec", 1);
  po::variables_map vm;
  const std::string usage = "usage: twinps model SPEC [--ps N]";
  if (int rc = parse(argc, argv, usage, opts, vm, &positional); rc >= 0) return rc;
  if (!vm.count("spec")) {
    std::fprintf(stderr, "twinps model: which spec? (%s)\n", usage.c_str());
    return kExitBadInput;
  }

  model::LoadedSpec loaded = model::load_model_spec_file(path);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "twinps model: %s\n", e.to_string().c_str());
    return kExitBadInput;
  }
  auto compiled = model::CompiledModel::compile(loaded.spec);
  if (!compiled.ok()) {
    std::fprintf(stderr, "twinps model: %s: %s\n", path.c_str(), std::string(compiled.status().message()).c_str());
    return kExitBadInput;
  }
  const model::CompiledModel& m = **compiled;
  auto variables = m.build_variables(num_ps, /*meta=*/true);
  if (!variables.ok()) {
    std::fprintf(stderr, "twinps model: %s: %s\n", path.c_str(), std::string(variables.status().message()).c_str());
    return kExitBadInput;
  }

  const auto& spec = m.spec();
  std::printf("model %s: %d inputs, %d layers, batch %d, %s\n", spec.name().empty() ? path.c_str() : spec.name().c_str(),
              spec.input_size(), spec.layer_size(), spec.batch_size(),
              model::spec::Loss_Name(spec.head().loss()).c_str());
  std::printf("\ncolumns read:\n");
  for (const auto& c : m.schema().columns)
    std::printf("  %-24s %s%s\n", c.name.c_str(),
                c.type == data::ColumnType::kFloat ? "float" : c.type == data::ColumnType::kInt64 ? "int64" : "string",
                c.width == 0 ? " list" : c.width == 1 ? "" : format(" x %d", c.width).c_str());
  std::printf("\nlayers:\n");
  for (const auto& l : spec.layer()) {
    std::string inputs;
    for (const auto& in : l.input()) inputs += (inputs.empty() ? "" : ", ") + in;
    std::printf("  %-24s %-16s <- %s\n", l.name().c_str(), layer_kind(l).c_str(), inputs.c_str());
  }
  std::printf("\nvariables on %d ps:\n", num_ps);
  for (const auto& v : variables->layouts) {
    std::string where;
    for (const auto& s : v.shards) where += (where.empty() ? "ps " : ", ") + std::to_string(s.ps);
    // Which optimizer group updates it (a model's groups may differ).
    const std::string rule =
        v.kind == VariableKind::kTrainable ? "  " + describe(v.optimizer.value_or(variables->optimizer)) : "";
    std::printf("  %-28s %-16s %3zu shard%s  %s%s\n", v.name.c_str(), shape_text(v.shape).c_str(), v.shards.size(),
                v.shards.size() == 1 ? " " : "s", where.c_str(), rule.c_str());
  }
  print_per_ps(*variables, num_ps, spec.placement() == model::spec::AUTO);
  const model::StepCost& cost = m.step_cost();
  std::printf("\none training step (batch %lld):\n", static_cast<long long>(m.batch_size()));
  Table t;
  t.row("compute", format("%.3f MFLOP (evaluation %.3f)", cost.train_flops / 1e6, cost.eval_flops / 1e6));
  t.row("pulled", bytes_text(cost.bytes_pulled));
  t.row("pushed", bytes_text(cost.bytes_pushed));
  for (const auto& v : cost.variables)
    if (v.embedding)
      t.row(v.name + " rows", format("%.1f distinct of %lld per step", v.rows_per_step,
                                     static_cast<long long>(v.shape[0])));
  t.print();
  return kExitOk;
}

}  // namespace twinps::cli
