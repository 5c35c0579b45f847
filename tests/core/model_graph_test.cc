// The input layer (columns to features) and the layer graph: whole models'
// gradients, chained from the layers' own, against finite differences.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "core/model/graph.h"
#include "core/model/spec_loader.h"
#include "tests/core/record_builder.h"

namespace twinps::model {
namespace {

using ::testing::HasSubstr;
using testing::float_column;
using testing::int_column;
using testing::Records;
using testing::string_column;

std::shared_ptr<const ModelGraph> graph_of(const std::string& text) {
  LoadedSpec s = parse_model_spec(text, "m.textproto");
  EXPECT_TRUE(s.ok()) << s.error_text();
  auto g = ModelGraph::build(s.spec);
  EXPECT_TRUE(g.ok()) << g.status();
  return g.ok() ? *g : nullptr;
}

// DLRM-like, with a wide part added to the logit: a bottom MLP read by two
// layers (its gradients must add up), weighted and plain bags, dropout.
constexpr char kDlrm[] = R"pb(
input { name: "dense" dense { width: 3 } }
input { name: "c1" categorical { type: INT64 width: 0 identity_buckets: 10 weight_column: "w1" } }
input { name: "c2" categorical { type: STRING width: 1 hash_buckets: 7 } }
label { column: "y" }
layer { name: "bottom" input: "dense" dense { units: 4 activation: TANH } }
layer { name: "e1" input: "c1" embedding { dim: 4 combiner: SQRTN } }
layer { name: "e2" input: "c2" embedding { dim: 4 } }
layer { name: "dot" input: ["bottom", "e1", "e2"] dot_interaction {} }
layer { name: "cat" input: ["bottom", "dot"] concatenate {} }
layer { name: "drop" input: "cat" dropout { rate: 0.3 } }
layer { name: "top" input: "drop" dense { units: 1 } }
layer { name: "wide" input: "c2" embedding { dim: 1 combiner: SUM } }
layer { name: "logit" input: ["top", "wide"] add {} }
head { input: "logit" loss: BINARY_CROSS_ENTROPY }
)pb";

Records dlrm_records() {
  Records r;
  r.add("dense", float_column({{0.5f, -1, 2}, {1, 0.25f, -0.5f}, {-2, 1, 0}, {0.1f, 0.2f, 0.3f}}), 3)
      .add("c1", int_column({{1, 4, 1}, {}, {9}, {2, 3}}), 0)
      .add("w1", float_column({{0.5f, 2, 1}, {}, {1.5f}, {1, -1}}), 0)
      .add("c2", string_column({{"a"}, {"b"}, {"a"}, {"zz"}}), 1)
      .add("y", float_column({{1}, {0}, {1}, {0}}), 1);
  return r;
}

// Checks dL/d(every parameter) of the whole graph against central differences.
void check_graph_gradients(const ModelGraph& g, const Features& f) {
  RandomStream init(11);
  ModelGraph::Params params;
  params.lookups = g.plan_lookups(f);
  for (std::size_t v = 0; v < g.variables().size(); ++v) {
    const auto& var = g.variables()[v];
    const Eigen::Index rows = var.embedding ? static_cast<Eigen::Index>(params.lookups[v].rows.size())
                                            : storage_rows(var.shape);
    Matrix m(rows, storage_cols(var.shape));
    for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = static_cast<float>(init.uniform(-0.8, 0.8));
    params.values.push_back(std::move(m));
  }
  auto loss = [&] {
    RandomStream dropout(5);  // the same mask every time
    ModelGraph::Tape tape;
    const Matrix& logits = g.forward(f, params, tape, ForwardMode{true, &dropout});
    return compute_loss(g.loss(), logits, f.labels).loss;
  };
  RandomStream dropout(5);
  ModelGraph::Tape tape;
  const Matrix& logits = g.forward(f, params, tape, ForwardMode{true, &dropout});
  const LossResult l = compute_loss(g.loss(), logits, f.labels);
  const std::vector<Matrix> grads = g.backward(f, params, tape, l.dlogits);
  ASSERT_EQ(grads.size(), params.values.size());
  for (std::size_t v = 0; v < grads.size(); ++v) {
    SCOPED_TRACE(g.variables()[v].name);
    ASSERT_EQ(grads[v].rows(), params.values[v].rows());
    ASSERT_EQ(grads[v].cols(), params.values[v].cols());
    Matrix& x = params.values[v];
    for (Eigen::Index i = 0; i < x.size(); ++i) {
      const float saved = x.data()[i];
      const float step = 1e-2f;
      x.data()[i] = saved + step;
      const double up = loss();
      x.data()[i] = saved - step;
      const double down = loss();
      x.data()[i] = saved;
      const double numeric = (up - down) / (2.0 * step);
      EXPECT_NEAR(grads[v].data()[i], numeric, 2e-3 * std::max(1.0, std::abs(numeric))) << "element " << i;
    }
  }
}

TEST(ModelGraphTest, DlrmWithAWidePartHasTheGradientsOfItsLoss) {
  auto g = graph_of(kDlrm);
  ASSERT_TRUE(g);
  Records r = dlrm_records();
  auto f = g->features().map(r.schema, r.batch);
  ASSERT_TRUE(f.ok()) << f.status();
  check_graph_gradients(*g, *f);
}

TEST(ModelGraphTest, SoftmaxMlpHasTheGradientsOfItsLoss) {
  auto g = graph_of(R"pb(
    input { name: "x" dense { width: 4 } }
    input { name: "tag" categorical { vocabulary { token: ["p", "q"] } } }
    label { column: "class" type: INT64 }
    layer { name: "tag_emb" input: "tag" embedding { dim: 2 } }
    layer { name: "cat" input: ["x", "tag_emb"] concatenate {} }
    layer { name: "h1" input: "cat" dense { units: 5 activation: SIGMOID } }
    layer { name: "h2" input: "h1" dense { units: 5 activation: TANH use_bias: false } }
    layer { name: "out" input: "h2" dense { units: 3 } }
    head { input: "out" loss: SOFTMAX_CROSS_ENTROPY }
  )pb");
  ASSERT_TRUE(g);
  Records r;
  r.add("x", float_column({{1, 2, 3, 4}, {-1, 0, 1, 0}, {0.5f, 0.5f, -0.5f, 2}}), 4)
      .add("tag", string_column({{"p"}, {"unknown"}, {"q"}}), 1)
      .add("class", int_column({{2}, {0}, {1}}), 1);
  auto f = g->features().map(r.schema, r.batch);
  ASSERT_TRUE(f.ok()) << f.status();
  check_graph_gradients(*g, *f);
}

TEST(ModelGraphTest, VariablesAreNamedAndOrderedAsKerasCreatesThem) {
  auto g = graph_of(kDlrm);
  ASSERT_TRUE(g);
  std::vector<std::string> names;
  for (const auto& v : g->variables()) names.push_back(v.name);
  EXPECT_THAT(names, ::testing::ElementsAre("bottom/kernel", "bottom/bias", "e1/embeddings", "e2/embeddings",
                                            "top/kernel", "top/bias", "wide/embeddings"));
  EXPECT_EQ(g->variables()[2].shape, (Shape{11, 4})) << "rows default to the input's id count: 10 and 1 OOV bucket";
  EXPECT_EQ(g->variables()[3].shape, (Shape{7, 4}));
  EXPECT_EQ(g->variables()[4].shape, (Shape{7, 1})) << "top reads bottom (4) and three dot products";
}

// ---------------------------------------------------------------- the input layer

TEST(FeaturesTest, VocabulariesFollowStringLookup) {
  auto g = graph_of(R"pb(
    input { name: "f" categorical { width: 3 vocabulary { token: ["a", "b", "c"] } num_oov_buckets: 2 } }
    label { column: "y" type: STRING vocabulary { token: ["yes", "no"] } }
    layer { name: "e" input: "f" embedding { dim: 2 } }
    layer { name: "d" input: "e" dense { units: 1 } }
    head { input: "d" loss: BINARY_CROSS_ENTROPY }
  )pb");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->features().id_count(0), 5);
  Records r;
  r.add("f", string_column({{"c", "a", "zzz"}}), 3).add("y", string_column({{"no"}}), 1);
  auto f = g->features().map(r.schema, r.batch);
  ASSERT_TRUE(f.ok()) << f.status();
  const RowIds& ids = f->bags[0].ids;
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 4) << "2 OOV ids first, then the tokens: c is 2 + 2";
  EXPECT_EQ(ids[1], 2);
  EXPECT_EQ(ids[2], static_cast<std::int64_t>(fingerprint("zzz") % 2)) << "an unknown token hashes into the OOV ids";
  EXPECT_EQ(f->labels(0, 0), 1.0f) << "\"no\" is class 1";
}

TEST(FeaturesTest, HashingIsFixed) {
  // These numbers must never change: every trained row depends on them.
  // (Computed independently: FNV-1a 64, then SplitMix64's finalizer.)
  EXPECT_EQ(fingerprint(""), 0xf52a15e9a9b5e89bull);
  EXPECT_EQ(fingerprint("avenger"), 0xb84c199c9051671cull);
  EXPECT_EQ(fingerprint("12"), 0xdeda4d8152107906ull);
}

TEST(FeaturesTest, IdentityIdsWithOovPoliciesAndWeights) {
  const std::string base = R"pb(
    input { name: "ids" categorical { type: INT64 width: 0 identity_buckets: 4 weight_column: "w" POLICY } }
    label { column: "y" }
    layer { name: "e" input: "ids" embedding { dim: 2 combiner: SUM } }
    layer { name: "d" input: "e" dense { units: 1 } }
    head { input: "d" loss: BINARY_CROSS_ENTROPY }
  )pb";
  auto with = [&](const std::string& policy) {
    std::string text = base;
    text.replace(text.find("POLICY"), 6, policy);
    return graph_of(text);
  };
  Records r;
  r.add("ids", int_column({{0, 7, 3}, {}}), 0).add("w", float_column({{0.5f, 2, 3}, {}}), 0).add("y", float_column({{1}, {0}}), 1);

  auto ignore = with("oov: OOV_IGNORE");
  auto f = ignore->features().map(r.schema, r.batch);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->bags[0].ids, (RowIds{0, 3})) << "7 is dropped, and its weight with it";
  EXPECT_EQ(f->bags[0].weights, (std::vector<float>{0.5f, 3}));
  EXPECT_EQ(f->bags[0].offsets, (std::vector<std::int64_t>{0, 2, 2}));

  auto buckets = with("num_oov_buckets: 3");
  EXPECT_EQ(buckets->features().id_count(0), 7);
  f = buckets->features().map(r.schema, r.batch);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->bags[0].ids[1], 4 + static_cast<std::int64_t>(fingerprint("7") % 3)) << "after the identity range";

  auto error = with("oov: OOV_ERROR");
  EXPECT_THAT(error->features().map(r.schema, r.batch).status().message(),
              HasSubstr("column \"ids\": id 7 is outside [0, 4) (oov: OOV_ERROR) in record 0"));
}

TEST(FeaturesTest, DenseInputsAreTransformed) {
  auto g = graph_of(R"pb(
    input { name: "counts" dense { type: INT64 width: 2 log1p: true shift: 1 scale: 2 } }
    label { column: "y" }
    layer { name: "d" input: "counts" dense { units: 1 } }
    head { input: "d" loss: BINARY_CROSS_ENTROPY }
  )pb");
  Records r;
  r.add("counts", int_column({{0, 3}}), 2).add("y", float_column({{1}}), 1);
  auto f = g->features().map(r.schema, r.batch);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_FLOAT_EQ(f->dense[0](0, 0), (0 - 1) * 2.0f);
  EXPECT_FLOAT_EQ(f->dense[0](0, 1), (std::log1p(3.0f) - 1) * 2.0f);
}

TEST(FeaturesTest, BadDataNamesTheColumnAndRecord) {
  auto g = graph_of(kDlrm);
  Records r = dlrm_records();
  r.schema.columns[4].name = "label";  // the model reads "y"
  EXPECT_THAT(g->features().map(r.schema, r.batch).status().message(),
              HasSubstr("column \"y\": the data has no such column"));

  r = dlrm_records();
  r.batch.columns[4] = float_column({{1}, {0}, {2}, {0}});
  EXPECT_THAT(g->features().map(r.schema, r.batch).status().message(),
              HasSubstr("column \"y\": record 2 has the label 2.000000: binary cross-entropy takes labels in [0, 1]"));

  r = dlrm_records();
  r.batch.columns[2] = float_column({{0.5f, 2, 1}, {}, {1.5f}, {1}});
  EXPECT_THAT(g->features().map(r.schema, r.batch).status().message(),
              HasSubstr("column \"w1\": record 3 has 1 weights for 2 values of \"c1\""));

  // From files, the record is named by its file and line.
  r = dlrm_records();
  r.batch.columns[4] = float_column({{1}, {0}, {2}, {0}});
  r.batch.files = std::make_shared<const std::vector<std::string>>(std::vector<std::string>{"a.csv", "b.csv"});
  r.batch.origins = {{0, 9, 10}, {0, 10, 11}, {1, 1, 2}, {1, 2, 3}};
  EXPECT_THAT(g->features().map(r.schema, r.batch).status().message(),
              HasSubstr("column \"y\": b.csv:2 (record 1) has the label 2.000000"));

  r = dlrm_records();
  r.schema.columns[0].type = data::ColumnType::kInt64;
  r.batch.columns[0] = int_column({{1, 2, 3}, {1, 2, 3}, {1, 2, 3}, {1, 2, 3}});
  EXPECT_THAT(g->features().map(r.schema, r.batch).status().message(),
              HasSubstr("column \"dense\": holds INT64 values; the model reads FLOAT"));
}

TEST(FeaturesTest, BinaryLabelsWrittenAsTwoOtherValuesAreMapped) {
  // LibSVM's +1 / -1 as the 1 / 0 targets of binary cross-entropy.
  const std::string base = R"pb(
    input { name: "x" dense { width: 1 } }
    label { column: "y" positive_label: 1 NEGATIVE }
    layer { name: "d" input: "x" dense { units: 1 } }
    head { input: "d" loss: BINARY_CROSS_ENTROPY }
  )pb";
  auto with = [&](const std::string& negative) {
    std::string text = base;
    text.replace(text.find("NEGATIVE"), 8, negative);
    return graph_of(text);
  };
  Records r;
  r.add("x", float_column({{0}, {0}, {0}}), 1).add("y", float_column({{1}, {-1}, {1}}), 1);
  auto both = with("negative_label: -1");
  auto f = both->features().map(r.schema, r.batch);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->labels, (Matrix(3, 1) << 1, 0, 1).finished());

  // With both values named, a third is an error naming the record.
  r.batch.columns[1] = float_column({{1}, {-1}, {2}});
  EXPECT_THAT(both->features().map(r.schema, r.batch).status().message(),
              HasSubstr("column \"y\": record 2 has the label 2.000000: neither positive_label 1.000000 nor "
                        "negative_label -1.000000"));
  // With only positive_label, every other value is the negative class.
  auto one_vs_rest = with("");
  f = one_vs_rest->features().map(r.schema, r.batch);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->labels, (Matrix(3, 1) << 1, 0, 0).finished());
}

}  // namespace
}  // namespace twinps::model
