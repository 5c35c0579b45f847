// Model specs: the examples load; every kind of mistake is reported at its
// file:line:column with the field named, never by a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/model/compiled_model.h"
#include "core/model/spec_loader.h"
#include "examples/custom_model/rbf_layer.h"
#include "tests/sim/test_paths.h"

namespace twinps::model {
namespace {

using ::testing::HasSubstr;
using spec::ModelSpec;

std::filesystem::path examples_dir() { return sim::testing::source_dir() / "examples"; }

// A valid model to start mistakes from: 2 dense features and a bag of ids,
// an MLP with an embedding, binary cross-entropy.
constexpr char kValid[] = R"pb(input { name: "x" dense { width: 2 } }
input { name: "ids" categorical { type: INT64 width: 0 identity_buckets: 100 } }
label { column: "y" }
layer { name: "emb" input: "ids" embedding { dim: 4 combiner: SUM } }
layer { name: "cat" input: ["x", "emb"] concatenate {} }
layer { name: "hidden" input: "cat" dense { units: 8 activation: RELU } }
layer { name: "logit" input: "hidden" dense { units: 1 } }
head { input: "logit" loss: BINARY_CROSS_ENTROPY }
metric: [ACCURACY, AUC]
optimizer { adam {} }
)pb";

std::string all_errors(const LoadedSpec& s) { return s.error_text(); }

// The one error of `text`, as a string; fails the test if there are none.
std::string error_of(const std::string& text) {
  LoadedSpec s = parse_model_spec(text, "m.textproto");
  EXPECT_FALSE(s.ok()) << "expected an error in:\n" << text;
  return all_errors(s);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

TEST(ModelSpecTest, TheValidModelLoads) {
  LoadedSpec s = parse_model_spec(kValid, "m.textproto");
  ASSERT_TRUE(s.ok()) << all_errors(s);
  EXPECT_EQ(s.spec.layer_size(), 4);
  EXPECT_EQ(s.spec.batch_size(), 32) << "the documented default";
}

TEST(ModelSpecTest, EveryExampleSpecLoadsAndCompiles) {
  // examples/custom_model's spec uses the layer type its program registers.
  ASSERT_TRUE(custom_model::register_rbf_layer().ok());
  int found = 0;
  for (const auto& dir : std::filesystem::directory_iterator(examples_dir())) {
    const auto path = dir.path() / "model.textproto";
    if (!std::filesystem::exists(path)) continue;
    ++found;
    LoadedSpec s = load_model_spec_file(path.string());
    EXPECT_TRUE(s.ok()) << all_errors(s);
    if (!s.ok()) continue;
    auto m = CompiledModel::compile(s.spec);
    ASSERT_TRUE(m.ok()) << path << ": " << m.status();
    EXPECT_TRUE((*m)->build_variables(2, /*meta=*/true).ok()) << path;
  }
  EXPECT_GE(found, 1);
}

TEST(ModelSpecTest, SyntaxErrorsHaveLineAndColumn) {
  EXPECT_EQ(error_of("input { name: \"x\" dense { widht: 2 } }"),
            "m.textproto:1:32: Message type \"twinps.model.spec.DenseInput\" has no field named \"widht\".");
}

TEST(ModelSpecTest, UnknownLayerInputIsReportedAtTheInput) {
  const std::string text = replaced(kValid, "input: \"hidden\" dense", "input: \"hiden\" dense");
  EXPECT_EQ(error_of(text),
            "m.textproto:7:23: layer[3].input[0]: \"hiden\" names no input or earlier layer (a layer reads inputs "
            "and layers written before it)");
}

TEST(ModelSpecTest, ALayerCannotReadALaterLayer) {
  // The graph's order is the file's: reading forward would allow cycles.
  std::string text = replaced(kValid, "input: [\"x\", \"emb\"]", "input: [\"x\", \"hidden\"]");
  EXPECT_THAT(error_of(text), HasSubstr("layer[1].input[1]: \"hidden\" names no input or earlier layer"));
}

TEST(ModelSpecTest, KindsOfInputsAreChecked) {
  EXPECT_THAT(error_of(replaced(kValid, "input: \"ids\" embedding", "input: \"x\" embedding")),
              HasSubstr("layer[0].input[0]: \"x\" is not a categorical input: an embedding looks up ids"));
  EXPECT_THAT(error_of(replaced(kValid, "input: [\"x\", \"emb\"]", "input: [\"x\", \"ids\"]")),
              HasSubstr("layer[1].input[1]: \"ids\" is a categorical input: only an embedding reads ids"));
}

TEST(ModelSpecTest, TheHeadMustFitTheLoss) {
  EXPECT_THAT(error_of(replaced(kValid, "dense { units: 1 }", "dense { units: 3 }")),
              HasSubstr("m.textproto:8:8: head.input: \"logit\" is 3 wide; binary cross-entropy takes one logit"));
  const std::string softmax = replaced(replaced(kValid, "dense { units: 1 }", "dense { units: 3 }"),
                                       "BINARY_CROSS_ENTROPY", "SOFTMAX_CROSS_ENTROPY");
  EXPECT_THAT(error_of(softmax), HasSubstr("label.type: softmax cross-entropy takes INT64 class ids or STRING class names"));
  EXPECT_THAT(error_of(softmax), HasSubstr("metric[1]: AUC needs binary cross-entropy"));
}

TEST(ModelSpecTest, LayersThatDoNotReachTheHeadAreErrors) {
  const std::string text = replaced(kValid, "head {", "layer { name: \"dead\" input: \"x\" dense { units: 2 } }\nhead {");
  EXPECT_THAT(error_of(text), HasSubstr("layer[4].name: layer \"dead\" does not lead to the head \"logit\""));
}

TEST(ModelSpecTest, NumbersOutOfRangeNameTheirField) {
  EXPECT_THAT(error_of(replaced(kValid, "dim: 4", "dim: 0")), HasSubstr("m.textproto:4:46: layer[0].embedding.dim: must be >= 1, got 0"));
  EXPECT_THAT(error_of(replaced(kValid, "concatenate {}", "dropout { rate: 1 }")),
              HasSubstr("m.textproto:5:1: layer[1]: a dropout layer reads 1 input, got 2"));
  EXPECT_THAT(error_of(replaced(kValid, "adam {}", "adam { beta_1: 1 }")),
              HasSubstr("m.textproto:10:20: optimizer[0].adam.beta_1: beta_1 must be in [0, 1), got 1"));
  EXPECT_THAT(error_of(replaced(kValid, "adam {}", "adam {} learning_rate { constant: -1 }")),
              HasSubstr("optimizer[0].learning_rate: learning_rate.initial must be > 0, got -1"));
  EXPECT_THAT(error_of(std::string(kValid) + "partitioner { fixed_shards: 0 }"),
              HasSubstr("partitioner: FixedShardsPartitioner: num_shards must be >= 1, got 0"));
  EXPECT_THAT(error_of(std::string(kValid) + "batch_size: 0"), HasSubstr("batch_size: must be >= 1, got 0"));
}

TEST(ModelSpecTest, OptimizerGroupsCoverEveryLayerOnce) {
  const std::string groups = replaced(kValid, "optimizer { adam {} }",
                                      "optimizer { layer: \"emb\" adagrad {} }\n"
                                      "optimizer { layer: [\"hidden\", \"emb\"] sgd {} }");
  const std::string errors = error_of(groups);
  EXPECT_THAT(errors, HasSubstr("optimizer[1].layer[1]: layer \"emb\" is already updated by optimizer[0]"));
  EXPECT_THAT(errors, HasSubstr("m.textproto:7:9: layer[3].name: no optimizer updates layer \"logit\""));
  EXPECT_THAT(error_of(replaced(kValid, "optimizer { adam {} }", "optimizer { layer: \"cat\" adam {} }")),
              HasSubstr("optimizer[0].layer[0]: layer \"cat\" has no variables to optimize"));
  // Single variables by their Keras names, taken out of their layer's group.
  const std::string by_variable = replaced(kValid, "optimizer { adam {} }",
                                           "optimizer { adam {} }\n"
                                           "optimizer { variable: [\"hidden/bias\", \"emb/embeddings\"] adagrad {} }");
  EXPECT_TRUE(parse_model_spec(by_variable, "m.textproto").ok()) << error_of(by_variable);
  const std::string unknown = error_of(replaced(kValid, "optimizer { adam {} }",
                                                "optimizer { adam {} }\n"
                                                "optimizer { variable: [\"hidden/bias\", \"hidden/weights\"] sgd {} }\n"
                                                "optimizer { variable: \"hidden/bias\" sgd {} }"));
  EXPECT_THAT(unknown, HasSubstr("optimizer[1].variable[1]: \"hidden/weights\" names no variable"));
  EXPECT_THAT(unknown, HasSubstr("optimizer[2].variable[0]: variable \"hidden/bias\" is already updated by optimizer[1]"));
  // Groups naming only variables still leave the rest of the layer to a default group.
  EXPECT_THAT(error_of(replaced(kValid, "optimizer { adam {} }",
                                "optimizer { layer: [\"emb\", \"logit\"] adam {} }\n"
                                "optimizer { variable: \"hidden/bias\" sgd {} }")),
              HasSubstr("no optimizer updates layer \"hidden\""));
}

TEST(ModelSpecTest, LabelMappingsAreForBinaryNumericLabels) {
  EXPECT_TRUE(parse_model_spec(replaced(kValid, "label { column: \"y\" }",
                                        "label { column: \"y\" positive_label: 1 negative_label: -1 }"),
                               "m.textproto")
                  .ok());
  EXPECT_THAT(error_of(replaced(kValid, "label { column: \"y\" }", "label { column: \"y\" negative_label: -1 }")),
              HasSubstr("m.textproto:3:21: label.negative_label: needs positive_label"));
  EXPECT_THAT(error_of(replaced(kValid, "label { column: \"y\" }",
                                "label { column: \"y\" positive_label: 1 negative_label: 1 }")),
              HasSubstr("label.negative_label: equals positive_label (1)"));
  EXPECT_THAT(error_of(replaced(kValid, "label { column: \"y\" }",
                                "label { column: \"y\" type: STRING vocabulary { token: [\"a\", \"b\"] } "
                                "positive_label: 1 }")),
              HasSubstr("label.positive_label: STRING labels are mapped by their `vocabulary`"));
}

TEST(ModelSpecTest, VocabularyFilesAreReadBesideTheSpec) {
  const auto dir = std::filesystem::temp_directory_path() / ("twinps_vocab_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir / "words.txt") << "a\r\nb\nc\n";
    std::ofstream(dir / "repeats.txt") << "a\nb\na\n";
  }
  const std::string spec = replaced(kValid, "type: INT64 width: 0 identity_buckets: 100",
                                    "width: 0 vocabulary_file: \"words.txt\"");
  {
    std::ofstream(dir / "model.textproto") << spec;
  }
  LoadedSpec s = load_model_spec_file((dir / "model.textproto").string());
  ASSERT_TRUE(s.ok()) << all_errors(s);
  ASSERT_TRUE(s.spec.input(1).categorical().has_vocabulary());
  EXPECT_THAT(s.spec.input(1).categorical().vocabulary().token(), ::testing::ElementsAre("a", "b", "c"));

  {
    std::ofstream(dir / "model.textproto") << replaced(spec, "words.txt", "missing.txt");
  }
  s = load_model_spec_file((dir / "model.textproto").string());
  EXPECT_THAT(all_errors(s), HasSubstr("model.textproto:2:44: input[1].categorical.vocabulary_file: \""));
  EXPECT_THAT(all_errors(s), HasSubstr("missing.txt\": cannot read the vocabulary: No such file or directory"));

  {
    std::ofstream(dir / "model.textproto") << replaced(spec, "words.txt", "repeats.txt");
  }
  s = load_model_spec_file((dir / "model.textproto").string());
  EXPECT_THAT(all_errors(s), HasSubstr("repeats.txt:3:1: \"a\" repeats line 1"));
  std::filesystem::remove_all(dir);
}

TEST(ModelSpecTest, FilesThatAreNotSpecsAreRefused) {
  EXPECT_THAT(load_model_spec_file("/nonexistent/model.textproto").error_text(),
              HasSubstr("/nonexistent/model.textproto: cannot read the model spec: No such file or directory"));
  EXPECT_THAT(load_model_spec_file("/").error_text(), HasSubstr("/: is a directory, not a model spec file"));
  EXPECT_THAT(error_of(std::string("batch_size: 4\n\x01\x02", 16)), HasSubstr("m.textproto:2:1:"));
}

TEST(ModelSpecTest, SpecsBuiltInCodeAreCheckedToo) {
  ModelSpec spec;
  spec.add_input()->set_name("x");
  auto errors = validate_model_spec(spec, "<code>");
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors.front().to_string(), "<code>: input[0]: choose what the input holds: dense or categorical");
}

}  // namespace
}  // namespace twinps::model
