#include "core/model/custom_layer.h"

#include <cmath>
#include <map>
#include <set>

#include "core/config/text_proto.h"

namespace twinps::model {

namespace {

// Type name -> factory. Written at a program's start, read afterwards (see
// the header); a function-local static so registration from static
// initializers of other files is safe too.
std::map<std::string, CustomLayerFactory, std::less<>>& registry() {
  static std::map<std::string, CustomLayerFactory, std::less<>> factories;
  return factories;
}

std::string quoted(std::string_view s) { return "\"" + config::printable(s) + "\""; }

Status param_error(std::string_view name, const std::string& message) {
  return absl::InvalidArgumentError("param " + quoted(name) + ": " + message);
}

std::string shape_text(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The storage a variable of `shape` has, as a Shape ([n] and [n, 1] both n x 1).
Shape storage(const Shape& s) { return {storage_rows(s), storage_cols(s)}; }

}  // namespace

const spec::CustomParam* CustomLayerParams::find(std::string_view name) const {
  for (const auto& p : custom_->param())
    if (p.name() == name) return &p;
  return nullptr;
}

StatusOr<double> CustomLayerParams::number(std::string_view name, std::optional<double> fallback) const {
  const spec::CustomParam* p = find(name);
  if (p == nullptr) {
    if (fallback) return *fallback;
    return param_error(name, "required (a number)");
  }
  if (!p->has_number()) return param_error(name, "must be a number (param { name: " + quoted(name) + " number: ... })");
  if (!std::isfinite(p->number())) return param_error(name, "must be finite");
  return p->number();
}

StatusOr<std::int64_t> CustomLayerParams::integer(std::string_view name, std::optional<std::int64_t> fallback,
                                                  std::int64_t min, std::int64_t max) const {
  auto v = number(name, fallback ? std::optional<double>(static_cast<double>(*fallback)) : std::nullopt);
  if (!v.ok()) return v.status();
  if (*v != std::floor(*v) || *v < static_cast<double>(min) || *v > static_cast<double>(max))
    return param_error(name, "must be a whole number in [" + std::to_string(min) + ", " + std::to_string(max) +
                                 "], got " + config::printable(std::to_string(*v)));
  return static_cast<std::int64_t>(*v);
}

StatusOr<std::string> CustomLayerParams::text(std::string_view name, std::optional<std::string> fallback) const {
  const spec::CustomParam* p = find(name);
  if (p == nullptr) {
    if (fallback) return *fallback;
    return param_error(name, "required (a text)");
  }
  if (!p->has_text()) return param_error(name, "must be a text (param { name: " + quoted(name) + " text: \"...\" })");
  return p->text();
}

Status register_custom_layer(std::string type, CustomLayerFactory factory) {
  if (type.empty()) return absl::InvalidArgumentError("a custom layer type needs a name");
  if (!factory) return absl::InvalidArgumentError("custom layer type " + quoted(type) + ": no factory given");
  auto [it, inserted] = registry().emplace(std::move(type), std::move(factory));
  if (!inserted) return absl::AlreadyExistsError("custom layer type " + quoted(it->first) + " is already registered");
  return absl::OkStatus();
}

std::vector<std::string> custom_layer_types() {
  std::vector<std::string> out;
  for (const auto& [type, factory] : registry()) out.push_back(type);
  return out;
}

StatusOr<CustomLayerBuild> build_custom_layer(const spec::Layer& layer, std::vector<Eigen::Index> input_widths) {
  const spec::Custom& custom = layer.custom();
  if (custom.type().empty()) return absl::InvalidArgumentError("required: the registered layer type");
  auto it = registry().find(custom.type());
  if (it == registry().end()) {
    std::string known;
    for (const auto& type : custom_layer_types()) known += (known.empty() ? "" : ", ") + quoted(type);
    return absl::InvalidArgumentError("no custom layer type " + quoted(custom.type()) +
                                      " is registered in this program (" +
                                      (known.empty() ? std::string("it registers none") : "it registers " + known) +
                                      "; see docs/extending.md)");
  }
  std::set<std::string_view> param_names;
  for (const auto& p : custom.param()) {
    if (p.name().empty()) return absl::InvalidArgumentError("a param needs a name");
    if (!param_names.insert(p.name()).second) return param_error(p.name(), "given twice");
    if (p.value_case() == spec::CustomParam::VALUE_NOT_SET) return param_error(p.name(), "give a number or a text");
  }

  const std::string type = quoted(custom.type());
  auto built = it->second(CustomLayerArgs{layer.name(), std::move(input_widths), CustomLayerParams(custom)});
  if (!built.ok()) return built.status();
  if (!built->layer) return absl::InternalError("custom layer type " + type + " built no layer");
  if (built->layer->output_width() < 1)
    return absl::InternalError("custom layer type " + type + " has output width " +
                               std::to_string(built->layer->output_width()) + " (must be >= 1)");
  const std::vector<Shape> shapes = built->layer->param_shapes();
  if (shapes.size() != built->variables.size())
    return absl::InternalError("custom layer type " + type + " lists " + std::to_string(built->variables.size()) +
                               " variables but its param_shapes() " + std::to_string(shapes.size()));
  std::set<std::string> names;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const CustomVariable& v = built->variables[i];
    if (v.name.empty() || v.name.find('/') != std::string::npos || !names.insert(v.name).second)
      return absl::InternalError("custom layer type " + type + ": variable name " + quoted(v.name) +
                                 " must be non-empty, without '/', and unique");
    bool positive = !v.shape.empty();
    for (auto d : v.shape) positive &= d >= 1;
    if (!positive)
      return absl::InternalError("custom layer type " + type + ": variable " + quoted(v.name) + " has shape " +
                                 shape_text(v.shape) + " (every dimension must be >= 1)");
    if (storage(v.shape) != storage(shapes[i]))
      return absl::InternalError("custom layer type " + type + ": variable " + quoted(v.name) + " has shape " +
                                 shape_text(v.shape) + " but the layer's param_shapes() says " + shape_text(shapes[i]));
  }
  return built;
}

}  // namespace twinps::model
