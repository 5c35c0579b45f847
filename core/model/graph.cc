#include "core/model/graph.h"

#include <map>

#include "core/model/custom_layer.h"
#include "core/model/spec_convert.h"

namespace twinps::model {

namespace {

Activation activation_of(spec::Activation a) {
  switch (a) {
    case spec::RELU: return Activation::kRelu;
    case spec::SIGMOID: return Activation::kSigmoid;
    case spec::TANH: return Activation::kTanh;
    default: return Activation::kNone;
  }
}

Combiner combiner_of(spec::Combiner c) {
  switch (c) {
    case spec::SUM: return Combiner::kSum;
    case spec::SQRTN: return Combiner::kSqrtn;
    default: return Combiner::kMean;
  }
}

LossKind loss_of(spec::Loss l) {
  switch (l) {
    case spec::SOFTMAX_CROSS_ENTROPY: return LossKind::kSoftmaxCrossEntropy;
    case spec::MEAN_SQUARED_ERROR: return LossKind::kMeanSquaredError;
    default: return LossKind::kBinaryCrossEntropy;
  }
}

}  // namespace

StatusOr<std::shared_ptr<const ModelGraph>> ModelGraph::build(const spec::ModelSpec& spec) {
  std::map<std::string, int> node_of;
  std::vector<Node> nodes;
  std::vector<Eigen::Index> width;
  for (int i = 0; i < spec.input_size(); ++i) {
    node_of[spec.input(i).name()] = static_cast<int>(nodes.size());
    Node n;
    n.input = i;
    nodes.push_back(std::move(n));
    width.push_back(spec.input(i).has_dense() ? spec.input(i).dense().width() : 0);
  }
  std::vector<Variable> variables;
  auto add_variable = [&](Node& node, Variable v) {
    node.params.push_back(static_cast<int>(variables.size()));
    variables.push_back(std::move(v));
  };
  for (int li = 0; li < spec.layer_size(); ++li) {
    const spec::Layer& l = spec.layer(li);
    Node node;
    node.layer = li;
    std::vector<Eigen::Index> in_widths;
    for (const auto& name : l.input()) {
      auto it = node_of.find(name);
      if (it == node_of.end())
        return absl::InvalidArgumentError("layer \"" + l.name() + "\" reads \"" + name +
                                          "\", which is no input or earlier layer (check the spec first)");
      node.reads.push_back(it->second);
      in_widths.push_back(width[static_cast<std::size_t>(it->second)]);
    }
    auto own_partitioner = [&](bool has, const spec::Partitioner& p, Variable& v) -> Status {
      if (!has) return absl::OkStatus();
      auto made = make_partitioner(p);
      if (!made.ok()) return made.status();
      v.partitioner = *made;
      v.has_own_partitioner = true;
      return absl::OkStatus();
    };
    Eigen::Index out_width = 0;
    switch (l.kind_case()) {
      case spec::Layer::kEmbedding: {
        const spec::Embedding& e = l.embedding();
        const int input = nodes[static_cast<std::size_t>(node.reads.at(0))].input;
        if (input < 0 || !spec.input(input).has_categorical())
          return absl::InvalidArgumentError("embedding \"" + l.name() + "\" must read a categorical input");
        Variable v;
        v.name = l.name() + "/embeddings";
        v.shape = {e.has_rows() ? e.rows() : 0, e.dim()};  // rows filled in below, from the input's id count
        v.initializer = make_initializer(e.initializer(), Initializer::uniform(-0.05, 0.05));
        TWINPS_RETURN_IF_ERROR(own_partitioner(e.has_partitioner(), e.partitioner(), v));
        v.layer = li;
        v.embedding = true;
        v.zipf_exponent = e.access().zipf_exponent();
        add_variable(node, std::move(v));
        node.embedding = std::make_unique<EmbeddingLayer>(e.dim(), combiner_of(e.combiner()));
        out_width = e.dim();
        break;
      }
      case spec::Layer::kDense: {
        const spec::Dense& d = l.dense();
        auto op = std::make_unique<DenseLayer>(in_widths.at(0), d.units(), activation_of(d.activation()), d.use_bias());
        const auto shapes = op->param_shapes();
        Variable kernel;
        kernel.name = l.name() + "/kernel";
        kernel.shape = shapes[0];
        kernel.initializer = make_initializer(d.kernel_initializer(), Initializer::glorot_uniform());
        TWINPS_RETURN_IF_ERROR(own_partitioner(d.has_partitioner(), d.partitioner(), kernel));
        kernel.layer = li;
        if (d.use_bias()) {
          Variable bias = kernel;
          bias.name = l.name() + "/bias";
          bias.shape = shapes[1];
          bias.initializer = make_initializer(d.bias_initializer(), Initializer::zeros());
          add_variable(node, std::move(kernel));
          add_variable(node, std::move(bias));
        } else {
          add_variable(node, std::move(kernel));
        }
        out_width = d.units();
        node.op = std::move(op);
        break;
      }
      case spec::Layer::kConcatenate: node.op = std::make_unique<ConcatenateLayer>(in_widths); break;
      case spec::Layer::kAdd: node.op = std::make_unique<AddLayer>(l.input_size(), in_widths.at(0)); break;
      case spec::Layer::kDropout: node.op = std::make_unique<DropoutLayer>(l.dropout().rate(), in_widths.at(0)); break;
      case spec::Layer::kDotInteraction:
        node.op = std::make_unique<DotInteractionLayer>(l.input_size(), in_widths.at(0),
                                                        l.dot_interaction().self_interaction());
        break;
      case spec::Layer::kCustom: {
        auto built = build_custom_layer(l, in_widths);
        if (!built.ok())
          return Status(built.status().code(), "layer \"" + l.name() + "\": " + std::string(built.status().message()));
        for (auto& cv : built->variables) {
          Variable v;
          v.name = l.name() + "/" + cv.name;
          v.shape = std::move(cv.shape);
          v.initializer = cv.initializer;
          TWINPS_RETURN_IF_ERROR(own_partitioner(l.custom().has_partitioner(), l.custom().partitioner(), v));
          v.layer = li;
          add_variable(node, std::move(v));
        }
        node.op = std::move(built->layer);
        break;
      }
      case spec::Layer::KIND_NOT_SET:
        return absl::InvalidArgumentError("layer \"" + l.name() + "\" has no kind");
    }
    if (node.op) out_width = node.op->output_width();
    node_of[l.name()] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(node));
    width.push_back(out_width);
  }
  auto head = node_of.find(spec.head().input());
  if (head == node_of.end() || nodes[static_cast<std::size_t>(head->second)].layer < 0)
    return absl::InvalidArgumentError("the head reads \"" + spec.head().input() + "\", which is no layer");

  auto mapper = FeatureMapper::create(spec, width[static_cast<std::size_t>(head->second)]);
  if (!mapper.ok()) return mapper.status();
  // An embedding's rows default to its input's id count.
  for (Variable& v : variables) {
    if (!v.embedding) continue;
    const auto& l = spec.layer(v.layer);
    const int input = nodes[static_cast<std::size_t>(node_of.at(l.input(0)))].input;
    const std::int64_t ids = mapper->id_count(input);
    if (v.shape[0] == 0) v.shape[0] = ids;
    if (v.shape[0] < ids)
      return absl::InvalidArgumentError("embedding \"" + l.name() + "\" has " + std::to_string(v.shape[0]) +
                                        " rows for " + std::to_string(ids) + " ids");
  }

  auto graph = std::shared_ptr<ModelGraph>(new ModelGraph(spec, std::move(*mapper)));
  graph->nodes_ = std::move(nodes);
  graph->width_ = std::move(width);
  graph->variables_ = std::move(variables);
  graph->head_ = head->second;
  graph->loss_ = loss_of(spec.head().loss());
  return std::shared_ptr<const ModelGraph>(std::move(graph));
}

std::vector<EmbeddingLayer::Lookup> ModelGraph::plan_lookups(const Features& features) const {
  std::vector<EmbeddingLayer::Lookup> out(variables_.size());
  for (const Node& n : nodes_) {
    if (!n.embedding) continue;
    const int input = nodes_[static_cast<std::size_t>(n.reads[0])].input;
    out[static_cast<std::size_t>(n.params[0])] = EmbeddingLayer::plan(features.bags[static_cast<std::size_t>(input)]);
  }
  return out;
}

const Matrix& ModelGraph::forward(const Features& features, const Params& params, Tape& tape,
                                  const ForwardMode& mode) const {
  tape.out.resize(nodes_.size());
  tape.saved.resize(nodes_.size());
  // A dropout layer draws its own stream: adding a layer elsewhere does not
  // change its mask.
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& n = nodes_[i];
    if (n.input >= 0) {
      if (spec_.input(n.input).has_dense()) tape.out[i] = features.dense[static_cast<std::size_t>(n.input)];
      continue;
    }
    if (n.embedding) {
      const int input = nodes_[static_cast<std::size_t>(n.reads[0])].input;
      const auto v = static_cast<std::size_t>(n.params[0]);
      n.embedding->forward(features.bags[static_cast<std::size_t>(input)], params.lookups[v], params.values[v],
                           tape.out[i]);
      continue;
    }
    std::vector<const Matrix*> in, p;
    for (int r : n.reads) in.push_back(&tape.out[static_cast<std::size_t>(r)]);
    for (int v : n.params) p.push_back(&params.values[static_cast<std::size_t>(v)]);
    ForwardMode layer_mode = mode;
    RandomStream layer_random;
    if (mode.training && mode.random) {
      layer_random = mode.random->fork(spec_.layer(n.layer).name());
      layer_mode.random = &layer_random;
    }
    n.op->forward(in, p, tape.out[i], tape.saved[i], layer_mode);
  }
  return tape.out[static_cast<std::size_t>(head_)];
}

std::vector<Matrix> ModelGraph::backward(const Features& features, const Params& params, const Tape& tape,
                                         const Matrix& dlogits) const {
  std::vector<Matrix> grads(variables_.size());
  // dL/d(out) of every layer node; data inputs need none.
  std::vector<Matrix> dout(nodes_.size());
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].layer >= 0) dout[i] = Matrix::Zero(tape.out[i].rows(), tape.out[i].cols());
  dout[static_cast<std::size_t>(head_)] += dlogits;
  for (std::size_t k = nodes_.size(); k-- > 0;) {
    const Node& n = nodes_[k];
    if (n.layer < 0) continue;
    if (n.embedding) {
      const int input = nodes_[static_cast<std::size_t>(n.reads[0])].input;
      const auto v = static_cast<std::size_t>(n.params[0]);
      n.embedding->backward(features.bags[static_cast<std::size_t>(input)], params.lookups[v], dout[k], grads[v]);
      continue;
    }
    std::vector<const Matrix*> in, p;
    std::vector<Matrix*> din;
    for (int r : n.reads) {
      in.push_back(&tape.out[static_cast<std::size_t>(r)]);
      din.push_back(nodes_[static_cast<std::size_t>(r)].layer >= 0 ? &dout[static_cast<std::size_t>(r)] : nullptr);
    }
    for (int v : n.params) p.push_back(&params.values[static_cast<std::size_t>(v)]);
    std::vector<Matrix> dparams(n.params.size());
    n.op->backward(in, p, tape.out[k], dout[k], tape.saved[k], din, dparams);
    for (std::size_t j = 0; j < n.params.size(); ++j) grads[static_cast<std::size_t>(n.params[j])] = std::move(dparams[j]);
  }
  return grads;
}

double ModelGraph::ids_per_record(int input) const {
  const auto& c = spec_.input(input).categorical();
  return c.width() > 0 ? static_cast<double>(c.width()) : c.mean_list_length();
}

double ModelGraph::eval_flops(std::int64_t batch) const {
  double flops = 0;
  for (const Node& n : nodes_) {
    if (n.op) flops += n.op->forward_flops(batch);
    if (n.embedding) {
      const int input = nodes_[static_cast<std::size_t>(n.reads[0])].input;
      flops += n.embedding->forward_flops(static_cast<double>(batch) * ids_per_record(input));
    }
  }
  return flops;
}

double ModelGraph::train_flops(std::int64_t batch) const {
  double flops = eval_flops(batch);
  for (const Node& n : nodes_) {
    if (n.op) flops += n.op->backward_flops(batch);
    if (n.embedding) {
      const int input = nodes_[static_cast<std::size_t>(n.reads[0])].input;
      flops += n.embedding->backward_flops(static_cast<double>(batch) * ids_per_record(input));
    }
  }
  // The loss and its gradient: a few operations per logit.
  return flops + 4.0 * static_cast<double>(batch) * static_cast<double>(head_width());
}

std::vector<KernelWork> ModelGraph::train_kernels(std::int64_t batch) const {
  const double records = static_cast<double>(batch);
  std::vector<KernelWork> out;
  out.reserve(nodes_.size() + 3);
  double dense_values = 0, ids = 0;
  for (int i = 0; i < spec_.input_size(); ++i) {
    if (spec_.input(i).has_dense()) dense_values += records * spec_.input(i).dense().width();
    if (spec_.input(i).has_categorical()) ids += records * ids_per_record(i);
  }
  if (dense_values > 0) out.push_back({kDenseFeaturesKernel, 0, 4.0 * dense_values, dense_values, records});
  if (ids > 0) out.push_back({kCategoricalFeaturesKernel, 0, 8.0 * ids, ids, records});
  for (const Node& n : nodes_) {
    if (n.op) {
      double param_bytes = 0, widths = 0;
      for (int v : n.params)
        param_bytes += 4.0 * static_cast<double>(num_elements(variables_[static_cast<std::size_t>(v)].shape));
      bool reads_layers = false;  // backward() computes an input's gradient only for a layer's output
      for (int r : n.reads) {
        widths += static_cast<double>(width_[static_cast<std::size_t>(r)]);
        reads_layers |= nodes_[static_cast<std::size_t>(r)].layer >= 0;
      }
      double flops = n.op->forward_flops(batch) + n.op->backward_flops(batch);
      // A dense layer on the features alone skips x's gradient, a third of its arithmetic.
      if (n.op->kind() == "dense" && !reads_layers)
        flops -= 2.0 * records * widths * static_cast<double>(n.op->output_width());
      out.push_back({n.op->kind(), flops, param_bytes, records * widths});
    } else if (n.embedding) {
      const int input = nodes_[static_cast<std::size_t>(n.reads[0])].input;
      const double ids = records * ids_per_record(input);
      out.push_back({kEmbeddingKernel, n.embedding->forward_flops(ids) + n.embedding->backward_flops(ids),
                     4.0 * ids * static_cast<double>(n.embedding->output_width()), ids});
    }
  }
  const double logits = records * static_cast<double>(head_width());
  out.push_back({kLossKernel, 4.0 * logits, 0, logits});
  return out;
}

KernelWork ModelGraph::read_kernel(std::string_view read_kernel, std::int64_t batch) const {
  const double records = static_cast<double>(batch);
  const double columns = spec_.input_size() + 1.0;  // and the label's
  double values = spec_.label().width();
  for (int i = 0; i < spec_.input_size(); ++i)
    values += spec_.input(i).has_dense() ? spec_.input(i).dense().width() : ids_per_record(i);
  return {read_kernel, 0, 4.0 * records * values, records * columns, records};
}

}  // namespace twinps::model
