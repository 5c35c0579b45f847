// Custom layers (core/model/custom_layer.h): a type registered in C++ is
// built from a spec's `custom` layer with its variables named and placed
// like a built-in layer's; an unregistered type or a parameter the type
// refuses is an error at the field, with line:column; the finite-difference
// check (core/model/gradient_check.h) passes examples/custom_model's rbf
// layer and catches a wrong backward.
#include <gtest/gtest.h>

#include "core/model/compiled_model.h"
#include "core/model/custom_layer.h"
#include "core/model/gradient_check.h"
#include "core/model/spec_loader.h"
#include "examples/custom_model/rbf_layer.h"
#include "tests/sim/test_paths.h"

namespace twinps::model {
namespace {

constexpr char kSpec[] = R"pb(input { name: "xy" dense { width: 2 } }
label { column: "label" }
layer { name: "rbf" input: "xy"
        custom { type: "rbf" param { name: "units" number: 5 } } }
layer { name: "logit" input: "rbf" dense { units: 1 } }
head { input: "logit" loss: BINARY_CROSS_ENTROPY }
optimizer { adam {} }
)pb";

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

class CustomLayerTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(custom_model::register_rbf_layer().ok()); }
};

TEST_F(CustomLayerTest, ARegisteredTypeBuildsItsVariablesAsTheModelsOwn) {
  LoadedSpec s = parse_model_spec(kSpec, "m.textproto");
  ASSERT_TRUE(s.ok()) << s.error_text();
  auto model = CompiledModel::compile(s.spec);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& vars = (*model)->graph().variables();
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[0].name, "rbf/centers");
  EXPECT_EQ(vars[0].shape, (Shape{5, 2}));
  EXPECT_EQ(vars[1].name, "rbf/log_gamma");
  EXPECT_EQ(vars[1].shape, (Shape{5}));
  EXPECT_EQ(vars[2].name, "logit/kernel");
  EXPECT_EQ(vars[2].shape, (Shape{5, 1})) << "the dense layer reads the custom layer's 5 outputs";
  // The variables are placed on the parameter servers, round-robin in creation order.
  auto built = (*model)->build_variables(2);
  ASSERT_TRUE(built.ok()) << built.status();
  EXPECT_EQ(built->layouts[0].name, "rbf/centers");
  // Its FLOPs count in the step's cost (timing-only simulation, the tuner).
  EXPECT_GT((*model)->step_cost().train_flops, 32 * 5 * (2 * 2 + 4));
}

TEST_F(CustomLayerTest, OptimizerGroupsNameACustomLayersVariables) {
  const std::string text = replaced(kSpec, "optimizer { adam {} }",
                                    "optimizer { adam {} }\noptimizer { variable: \"rbf/log_gamma\" sgd {} }");
  LoadedSpec s = parse_model_spec(text, "m.textproto");
  ASSERT_TRUE(s.ok()) << s.error_text();
  const std::string wrong = replaced(kSpec, "optimizer { adam {} }",
                                     "optimizer { adam {} }\noptimizer { variable: \"rbf/gamma\" sgd {} }");
  EXPECT_NE(parse_model_spec(wrong, "m.textproto").error_text().find("\"rbf/gamma\" names no variable"),
            std::string::npos);
}

TEST_F(CustomLayerTest, AnUnregisteredTypeIsAnErrorAtTheTypeField) {
  LoadedSpec s = parse_model_spec(replaced(kSpec, "type: \"rbf\"", "type: \"rbff\""), "m.textproto");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error_text(),
            "m.textproto:4:18: layer[0].custom.type: no custom layer type \"rbff\" is registered in this program "
            "(it registers \"rbf\"; see docs/extending.md)");
  LoadedSpec none = parse_model_spec(replaced(kSpec, "type: \"rbf\"", "type: \"\""), "m.textproto");
  EXPECT_EQ(none.error_text(),
            "m.textproto:4:18: layer[0].custom.type: required: the name the program registered the layer type under");
}

TEST_F(CustomLayerTest, ParametersTheTypeRefusesAreErrorsAtTheLayersCustomField) {
  const std::string no_units = replaced(kSpec, "param { name: \"units\" number: 5 }", "");
  EXPECT_EQ(parse_model_spec(no_units, "m.textproto").error_text(),
            "m.textproto:4:9: layer[0].custom: param \"units\": required (a number)");
  const std::string text_units = replaced(kSpec, "number: 5", "text: \"five\"");
  EXPECT_NE(parse_model_spec(text_units, "m.textproto").error_text().find("param \"units\": must be a number"),
            std::string::npos);
  const std::string fractional = replaced(kSpec, "number: 5", "number: 2.5");
  EXPECT_NE(parse_model_spec(fractional, "m.textproto").error_text().find("param \"units\": must be a whole number"),
            std::string::npos);
  const std::string twice = replaced(kSpec, "number: 5 }", "number: 5 } param { name: \"units\" number: 6 }");
  EXPECT_NE(parse_model_spec(twice, "m.textproto").error_text().find("param \"units\": given twice"),
            std::string::npos);
}

TEST_F(CustomLayerTest, ATypeIsRegisteredOnce) {
  EXPECT_EQ(register_custom_layer("rbf", [](const CustomLayerArgs&) -> StatusOr<CustomLayerBuild> {
              return absl::UnimplementedError("never built");
            }).code(),
            StatusCode::kAlreadyExists);
  EXPECT_TRUE(custom_model::register_rbf_layer().ok()) << "registering the same layer again is harmless";
  EXPECT_EQ(register_custom_layer("", nullptr).code(), StatusCode::kInvalidArgument);
}

TEST_F(CustomLayerTest, TheExampleSpecLoadsCompilesAndIsPlaced) {
  const auto path = sim::testing::source_dir() / "examples/custom_model/model.textproto";
  LoadedSpec s = load_model_spec_file(path.string());
  ASSERT_TRUE(s.ok()) << s.error_text();
  auto model = CompiledModel::compile(s.spec);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE((*model)->build_variables(2, /*meta=*/true).ok());
}

TEST_F(CustomLayerTest, TheRbfLayersGradientsMatchFiniteDifferences) {
  custom_model::RbfLayer layer(3, 4);
  GradientCheckOptions options;
  RandomStream r(5);
  Matrix centers(4, 3), log_gamma(4, 1);
  for (Eigen::Index i = 0; i < centers.size(); ++i) centers.data()[i] = static_cast<float>(r.uniform(-1, 1));
  for (Eigen::Index i = 0; i < log_gamma.size(); ++i) log_gamma.data()[i] = static_cast<float>(r.uniform(-1, 0));
  options.params = {centers, log_gamma};
  auto check = check_layer_gradients(layer, {3}, options);
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(check->elements_checked, 4 * 3 + 4 * 3 + 4);  // inputs, centers, log_gamma
  EXPECT_LT(check->worst_relative_error, 2e-3);
}

// out = x * w (one input, one 1x1 parameter), with a backward that forgets
// the factor w on the input's gradient: the check must name the input.
class WrongBackwardLayer final : public Layer {
 public:
  std::string_view kind() const override { return "wrong"; }
  Eigen::Index output_width() const override { return 2; }
  std::vector<Shape> param_shapes() const override { return {{1, 1}}; }
  void forward(std::span<const Matrix* const> inputs, std::span<const Matrix* const> params, Matrix& out, Saved&,
               const ForwardMode&) const override {
    out = *inputs[0] * (*params[0])(0, 0);
  }
  void backward(std::span<const Matrix* const> inputs, std::span<const Matrix* const>, const Matrix&,
                const Matrix& dout, const Saved&, std::span<Matrix* const> dinputs,
                std::span<Matrix> dparams) const override {
    *dinputs[0] += dout;  // should be dout * w
    dparams[0] = Matrix::Constant(1, 1, inputs[0]->cwiseProduct(dout).sum());
  }
  double forward_flops(std::int64_t) const override { return 0; }
  double backward_flops(std::int64_t) const override { return 0; }
};

TEST(GradientCheckTest, AWrongBackwardIsNamedByElement) {
  WrongBackwardLayer layer;
  GradientCheckOptions options;
  options.params = {Matrix::Constant(1, 1, 3.0f)};
  auto check = check_layer_gradients(layer, {2}, options);
  ASSERT_FALSE(check.ok());
  EXPECT_NE(std::string(check.status().message()).find("input 0 element 0: backward gives"), std::string::npos)
      << check.status();
}

}  // namespace
}  // namespace twinps::model
