#pragma once
// A model spec's layer graph, built once: nodes in the spec's order (inputs,
// then layers), each layer with the nodes it reads and the variables it
// owns. forward() runs the layers in order on one batch; backward() runs
// their backward passes in reverse, summing the gradients that flow into a
// node from every layer that reads it. The graph only chains layers: every
// derivative is a layer's own (core/model/layers.h).
//
// Immutable after build(); a step keeps its intermediate values in its own
// Tape, so one graph serves every worker thread.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/model/features.h"
#include "core/model/layers.h"
#include "core/model/losses.h"
#include "core/runtime/cost_model.h"
#include "core/variables/initializers.h"
#include "core/variables/partitioner.h"
#include "model/model_spec.pb.h"

namespace twinps::model {

// The kernel kinds of ModelGraph::train_kernels beside the layers' own kinds.
inline constexpr char kEmbeddingKernel[] = "embedding";
inline constexpr char kLossKernel[] = "loss";
// The input layer (FeatureMapper::map): dense values scaled into matrices,
// and categorical values turned into ids (vocabulary, hash or identity).
inline constexpr char kDenseFeaturesKernel[] = "features/dense";
inline constexpr char kCategoricalFeaturesKernel[] = "features/categorical";

class ModelGraph {
 public:
  // A variable a layer owns, in creation order (the spec's layer order;
  // within a layer Keras's order: kernel, then bias).
  struct Variable {
    std::string name;  // "<layer>/embeddings", "<layer>/kernel", "<layer>/bias"
    Shape shape;
    Initializer initializer;
    PartitionerPtr partitioner;  // the layer's own; null: the model's
    bool has_own_partitioner = false;
    int layer = 0;               // index into spec.layer
    bool embedding = false;      // read by rows, updated sparsely
    double zipf_exponent = 0;    // embeddings: the declared access skew
  };

  // `spec` must be valid (core/model/spec_loader.h).
  static StatusOr<std::shared_ptr<const ModelGraph>> build(const spec::ModelSpec& spec);

  const spec::ModelSpec& spec() const { return spec_; }
  const FeatureMapper& features() const { return features_; }
  const std::vector<Variable>& variables() const { return variables_; }
  LossKind loss() const { return loss_; }
  Eigen::Index head_width() const { return width_[static_cast<std::size_t>(head_)]; }

  // The values one step computes with: per variable, the whole value
  // (dense) or the distinct rows its lookup plan lists (embeddings).
  struct Params {
    std::vector<Matrix> values;
    std::vector<EmbeddingLayer::Lookup> lookups;  // per variable; empty for dense ones
  };
  // The rows each embedding needs for `features` (Params::lookups).
  std::vector<EmbeddingLayer::Lookup> plan_lookups(const Features& features) const;

  // Per node: its output and what its layer saved for backward.
  struct Tape {
    std::vector<Matrix> out;
    std::vector<Saved> saved;
  };
  // The logits, [batch x head width]; `tape` keeps the intermediate values.
  const Matrix& forward(const Features& features, const Params& params, Tape& tape, const ForwardMode& mode) const;
  // dL/d(variable) per variable: the full gradient of a dense variable, or
  // one row per lookups[v].rows entry of an embedding.
  std::vector<Matrix> backward(const Features& features, const Params& params, const Tape& tape,
                               const Matrix& dlogits) const;

  // Floating-point operations of a training step (forward, loss, backward)
  // and of an evaluation step (forward) on `batch` records, with each
  // categorical input holding its width (or mean_list_length) ids per record.
  double train_flops(std::int64_t batch) const;
  double eval_flops(std::int64_t batch) const;
  // The same train step layer by layer, for cost models that price each
  // kind of kernel apart (a dense layer's matrix products run slower at
  // narrow shapes than their FLOPs say; an embedding's cost is per id
  // looked up): one kernel per layer, its kind the layer's ("dense",
  // "embedding", "concatenate" ...) and "loss" for the head, with the
  // FLOPs its forward and backward pass do (train_flops less the input
  // gradients of dense layers that read only features, never computed), the
  // bytes of its parameters (an embedding's: the rows it gathers) and the
  // input elements it reads (an embedding's: the ids). Before the layers,
  // the input layer's kernels: the dense values and the categorical ids it
  // maps, with the records.
  std::vector<KernelWork> train_kernels(std::int64_t batch) const;
  // Reading `batch` records for this model as `read_kernel` reads them
  // (RecordIteratorResource::read_kernel). A reader's work is per record,
  // per field and per value (a tf.train.Example's features are a map of
  // named lists, a CSV line's fields are split first): its inputs are the
  // fields it parses (records x the model's columns, the label's included)
  // and its bytes the values they hold, 4 bytes each (the inputs' widths or
  // mean list lengths, and the label's).
  KernelWork read_kernel(std::string_view read_kernel, std::int64_t batch) const;
  // Ids per record of categorical input `input` (its width, or the declared
  // mean list length).
  double ids_per_record(int input) const;

 private:
  struct Node {
    int input = -1;           // index into spec.input, or -1 for a layer
    int layer = -1;           // index into spec.layer
    std::vector<int> reads;   // node indices
    std::vector<int> params;  // variable indices
    std::unique_ptr<Layer> op;                 // every layer but embeddings
    std::unique_ptr<EmbeddingLayer> embedding;
  };

  explicit ModelGraph(spec::ModelSpec spec, FeatureMapper features)
      : spec_(std::move(spec)), features_(std::move(features)) {}

  spec::ModelSpec spec_;
  FeatureMapper features_;
  std::vector<Node> nodes_;
  std::vector<Eigen::Index> width_;  // per node
  std::vector<Variable> variables_;
  int head_ = 0;
  LossKind loss_ = LossKind::kBinaryCrossEntropy;
};

}  // namespace twinps::model
