#pragma once
// Custom layers: layer types a program adds in C++ and its model specs use by
// name (docs/extending.md). The program registers a factory under a type
// name before it loads a spec; a spec's `custom { type: "NAME" param {...} }`
// layer is then built by that factory, given the layer's name, its inputs'
// widths and its parameters. What the factory returns is an ordinary Layer
// (core/model/layers.h: forward, backward, FLOPs) and the variables it owns,
// so the rest is the built-in layers' path: variables created, sharded and
// placed like theirs, pulled whole every step, updated by the layer's
// optimizer group, checkpointed, simulated and priced.
//
//   model::register_custom_layer("rbf", [](const model::CustomLayerArgs& args)
//       -> StatusOr<model::CustomLayerBuild> {
//     auto units = args.params.integer("units");            // required
//     if (!units.ok()) return units.status();
//     ...
//     return model::CustomLayerBuild{std::make_unique<RbfLayer>(...), {{"centers", {*units, in}, init}}};
//   });
//
// Every program that compiles the spec needs the type: the coordinator and
// every worker. The in-memory and in-process clusters run them all in the
// program that registered it; a cluster of separate `twinps serve`
// processes does not know it (the spec is an error there, at `type`).
//
// Register at start, before any spec is loaded and any cluster starts: the
// registry is read without a lock by every worker thread.
// core/model/gradient_check.h checks a layer's backward against finite
// differences, as the built-in layers are checked.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/layers.h"
#include "core/runtime/status.h"
#include "core/variables/initializers.h"
#include "model/model_spec.pb.h"  // generated from core/model/model_spec.proto

namespace twinps::model {

// A custom layer's `param` entries, as its factory reads them. Each accessor
// returns INVALID_ARGUMENT naming the parameter when it is missing (and no
// fallback is given) or of the wrong kind; the spec check reports it at the
// layer's `custom` field, with the file's line and column.
class CustomLayerParams {
 public:
  explicit CustomLayerParams(const spec::Custom& custom) : custom_(&custom) {}

  StatusOr<double> number(std::string_view name, std::optional<double> fallback = std::nullopt) const;
  // A number that is a whole number in [min, max].
  StatusOr<std::int64_t> integer(std::string_view name, std::optional<std::int64_t> fallback = std::nullopt,
                                 std::int64_t min = 1, std::int64_t max = std::int64_t{1} << 40) const;
  StatusOr<std::string> text(std::string_view name, std::optional<std::string> fallback = std::nullopt) const;
  bool has(std::string_view name) const { return find(name) != nullptr; }

 private:
  const spec::CustomParam* find(std::string_view name) const;
  const spec::Custom* custom_;
};

struct CustomLayerArgs {
  std::string layer_name;                 // the spec's `name`
  std::vector<Eigen::Index> input_widths;  // of its `input`s, in order (at least one)
  CustomLayerParams params;
};

// A variable the layer owns, named "<layer>/<name>" in checkpoints, optimizer
// groups and summaries. Its value is passed to forward() and backward() as
// a [shape[0] x product of the rest] matrix (a vector [n] is n x 1), in the
// order listed; the layer's param_shapes() must list the same shapes.
struct CustomVariable {
  std::string name;
  Shape shape;
  Initializer initializer = Initializer::glorot_uniform();
};

struct CustomLayerBuild {
  std::unique_ptr<Layer> layer;
  std::vector<CustomVariable> variables;
};

// INVALID_ARGUMENT (say which parameter or input is wrong) for a layer it
// cannot build.
using CustomLayerFactory = std::function<StatusOr<CustomLayerBuild>(const CustomLayerArgs&)>;

// Registers `factory` under `type`. ALREADY_EXISTS when the type is taken,
// INVALID_ARGUMENT for an empty type or factory.
Status register_custom_layer(std::string type, CustomLayerFactory factory);

// The registered types, sorted.
std::vector<std::string> custom_layer_types();

// Builds the custom layer `layer` (its kind must be `custom`) on inputs of
// `input_widths`, and checks what the factory returned: a layer, variable
// names unique and well-formed, shapes positive and equal to the layer's
// param_shapes(). INVALID_ARGUMENT naming the type for an unregistered one.
StatusOr<CustomLayerBuild> build_custom_layer(const spec::Layer& layer, std::vector<Eigen::Index> input_widths);

}  // namespace twinps::model
