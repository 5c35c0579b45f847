#include "core/model/spec_loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/coordinator/ps_failure_policy.h"
#include "core/model/custom_layer.h"
#include "core/model/spec_convert.h"

namespace twinps::model {

namespace pb = google::protobuf;
using config::FieldPath;
using namespace spec;  // the messages checked here (spec::Layer spelled out: model::Layer is the layer class)

std::string LoadedSpec::error_text() const {
  std::string out;
  for (const auto& e : errors) out += (out.empty() ? "" : "\n") + e.to_string();
  return out;
}

namespace {

std::string num(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

std::string in_quotes(const std::string& s) { return "\"" + config::printable(s) + "\""; }

// What a name in a layer's `input` refers to.
struct Node {
  enum class Kind { kDenseInput, kCategoricalInput, kLayer } kind;
  int index = 0;              // into spec.input or spec.layer
  std::int64_t width = 0;     // output width (dense inputs and layers)
  std::int64_t id_count = 0;  // categorical inputs: ids it produces
};

class Validator {
 public:
  Validator(const ModelSpec& s, std::string file, const pb::TextFormat::ParseInfoTree* tree,
            std::vector<SpecError>& out)
      : s_(s), file_(std::move(file)), tree_(tree), out_(out) {}

  void run() {
    if (s_.batch_size() < 1) error(root_(s_, "batch_size"), "must be >= 1, got " + std::to_string(s_.batch_size()));
    if (s_.has_partitioner()) partitioner(root_(s_, "partitioner"), s_.partitioner());
    inputs();
    label();
    layers();
    head();
    metrics();
    optimizers();
    if (s_.auc_thresholds() < 2)
      error(root_(s_, "auc_thresholds"), "must be >= 2, got " + std::to_string(s_.auc_thresholds()));
    if (s_.has_training()) training();
  }

 private:
  void error(const FieldPath& p, const std::string& message) {
    out_.push_back(config::error_at(file_, tree_, p, message));
  }

  void partitioner(const FieldPath& p, const Partitioner& spec) {
    auto made = make_partitioner(spec);
    if (!made.ok()) error(p, std::string(made.status().message()));
  }

  void initializer(const FieldPath& p, const Initializer& init) {
    if (init.kind_case() == Initializer::KIND_NOT_SET) {
      error(p, "choose an initializer: zeros, constant, uniform, glorot_uniform or normal");
    } else if (init.has_uniform() && !(init.uniform().min() < init.uniform().max())) {
      error(p(init, "uniform"), "min " + num(init.uniform().min()) + " must be below max " + num(init.uniform().max()));
    } else if (init.has_normal() && !(init.normal().stddev() > 0)) {
      error(p(init, "normal")(init.normal(), "stddev"), "must be > 0, got " + num(init.normal().stddev()));
    } else if (init.has_constant() && !std::isfinite(init.constant())) {
      error(p(init, "constant"), "must be finite");
    }
  }

  void training() {
    const Training& t = s_.training();
    const FieldPath p = root_(s_, "training");
    if (t.epochs() < 1) error(p(t, "epochs"), "must be >= 1, got " + std::to_string(t.epochs()));
    if (t.steps_per_epoch() < 0)
      error(p(t, "steps_per_epoch"), "must be >= 0 (0: one pass), got " + std::to_string(t.steps_per_epoch()));
    if (t.steps_per_execution() < 1)
      error(p(t, "steps_per_execution"), "must be >= 1, got " + std::to_string(t.steps_per_execution()));
    if (t.eval_every_epochs() < 0)
      error(p(t, "eval_every_epochs"), "must be >= 0, got " + std::to_string(t.eval_every_epochs()));
    if (t.eval_steps() < 0)
      error(p(t, "eval_steps"), "must be >= 0 (0: one pass), got " + std::to_string(t.eval_steps()));
    if (t.mode() != "async" && t.mode() != "ssp" && t.mode() != "sync")
      error(p(t, "mode"), "must be \"async\", \"ssp\" or \"sync\", got \"" + t.mode() + "\"");
    if (t.staleness_bound() < 0)
      error(p(t, "staleness_bound"), "must be >= 0, got " + std::to_string(t.staleness_bound()));
    else if (t.has_staleness_bound() && t.mode() != "ssp")
      error(p(t, "staleness_bound"), "is for mode \"ssp\" only");
    // Fewer than the workers is checked where the cluster is known (train, scenarios).
    if (t.backup_workers() < 0)
      error(p(t, "backup_workers"), "must be >= 0, got " + std::to_string(t.backup_workers()));
    else if (t.has_backup_workers() && t.mode() != "sync")
      error(p(t, "backup_workers"), "is for mode \"sync\" only");
    if (!parse_ps_failure_policy(t.ps_failure()))
      error(p(t, "ps_failure"), "must be \"raise\", \"restore\" or \"rollback\", got \"" + t.ps_failure() + "\"");
    if (t.visitation() != "at_least_once" && t.visitation() != "exactly_once")
      error(p(t, "visitation"), "must be \"at_least_once\" or \"exactly_once\", got \"" + t.visitation() + "\"");
    else if (t.visitation() == "exactly_once" && t.ps_failure() != "raise")
      error(p(t, "visitation"), "\"exactly_once\" needs ps_failure \"raise\" (a restore or rollback takes applied "
                                "records back)");
    else if (t.visitation() == "exactly_once" && t.backup_workers() > 0)
      error(p(t, "visitation"), "\"exactly_once\" cannot have backup_workers (their late gradients are dropped, and "
                                "their examples with them)");
    if (!(t.ps_recovery_wait_s() > 0))
      error(p(t, "ps_recovery_wait_s"), "must be > 0, got " + std::to_string(t.ps_recovery_wait_s()));
  }

  // A name for a new input or layer: non-empty and unused.
  bool new_name(const FieldPath& p, const std::string& name) {
    if (name.empty()) {
      error(p, "a name is required");
      return false;
    }
    if (nodes_.count(name)) {
      error(p, in_quotes(name) + " is already the name of an " +
                   (nodes_.at(name).kind == Node::Kind::kLayer ? "earlier layer" : "input"));
      return false;
    }
    return true;
  }

  void vocabulary(const FieldPath& p, const Vocabulary& v) {
    if (v.token_size() == 0) {
      error(p, "the vocabulary has no tokens");
      return;
    }
    std::map<std::string, int> seen;
    for (int i = 0; i < v.token_size(); ++i) {
      if (v.token(i).empty()) error(p(v, "token", i), "an empty token");
      auto [it, inserted] = seen.emplace(v.token(i), i);
      if (!inserted) error(p(v, "token", i), in_quotes(v.token(i)) + " repeats token " + std::to_string(it->second));
    }
  }

  void inputs() {
    if (s_.input_size() == 0) error(root_(s_, "input"), "a model needs at least one input");
    for (int i = 0; i < s_.input_size(); ++i) {
      const Input& in = s_.input(i);
      const FieldPath p = root_(s_, "input", i);
      const bool named = new_name(p(in, "name"), in.name());
      if (in.has_column() && in.column().empty()) error(p(in, "column"), "must not be empty (leave it out to read the column \"" + in.name() + "\")");
      Node node{Node::Kind::kDenseInput, i, 0, 0};
      switch (in.kind_case()) {
        case Input::kDense: {
          const DenseInput& d = in.dense();
          if (d.width() < 1) error(p(in, "dense")(d, "width"), "must be >= 1, got " + std::to_string(d.width()));
          if (d.type() == STRING) error(p(in, "dense")(d, "type"), "a dense input reads FLOAT or INT64 values");
          if (!std::isfinite(d.scale()) || !std::isfinite(d.shift()))
            error(p(in, "dense"), "shift and scale must be finite");
          node.width = d.width();
          break;
        }
        case Input::kCategorical:
          node.kind = Node::Kind::kCategoricalInput;
          node.id_count = categorical(p(in, "categorical"), in.categorical());
          break;
        case Input::KIND_NOT_SET: error(p, "choose what the input holds: dense or categorical"); break;
      }
      if (named) nodes_.emplace(in.name(), node);
      const std::string column = in.has_column() ? in.column() : in.name();
      if (in.has_dense()) read_column(p(in, "name"), column, in.dense().type(), in.dense().width());
      if (in.has_categorical()) {
        const CategoricalInput& c = in.categorical();
        read_column(p(in, "name"), column, c.type(), c.width());
        if (c.has_weight_column() && !c.weight_column().empty())
          read_column(p(in, "categorical")(c, "weight_column"), c.weight_column(), FLOAT, c.width());
      }
    }
  }

  // Every reader of a column must agree on its type and width: the data has one.
  void read_column(const FieldPath& p, const std::string& column, ValueType type, int width) {
    auto [it, inserted] = columns_.emplace(column, std::make_pair(type, width));
    if (inserted || it->second == std::make_pair(type, width)) return;
    auto text = [](ValueType t, int w) {
      return ValueType_Name(t) + (w == 0 ? " list" : " x " + std::to_string(w));
    };
    error(p, "column " + in_quotes(column) + " is read as " + text(type, width) + " here and as " +
                 text(it->second.first, it->second.second) + " before");
  }

  // The ids the input produces (0 when unknown because of an error).
  std::int64_t categorical(const FieldPath& p, const CategoricalInput& c) {
    if (c.type() == FLOAT) error(p(c, "type"), "a categorical input reads INT64 or STRING values");
    if (c.width() < 0)
      error(p(c, "width"), "must be >= 1 (a fixed count) or 0 (a list), got " + std::to_string(c.width()));
    if (c.has_weight_column() && c.weight_column().empty()) error(p(c, "weight_column"), "must not be empty");
    if (!(c.mean_list_length() > 0) || !std::isfinite(c.mean_list_length()))
      error(p(c, "mean_list_length"), "must be > 0, got " + num(c.mean_list_length()));
    const bool oov_buckets = c.oov() == OOV_BUCKETS;
    if (oov_buckets && c.num_oov_buckets() < 1)
      error(p(c, "num_oov_buckets"), "must be >= 1 with OOV_BUCKETS, got " + std::to_string(c.num_oov_buckets()));
    const std::int64_t oov = oov_buckets ? std::max(c.num_oov_buckets(), 0) : 0;
    switch (c.mapping_case()) {
      case CategoricalInput::kVocabulary:
        vocabulary(p(c, "vocabulary"), c.vocabulary());
        return c.vocabulary().token_size() + oov;
      case CategoricalInput::kVocabularyFile:
        // Read by the loader before the checks; a spec built in code must
        // put its tokens inline.
        error(p(c, "vocabulary_file"), "was not read (specs built in code list their tokens in `vocabulary`)");
        return 0;
      case CategoricalInput::kHashBuckets:
        if (c.hash_buckets() < 1) error(p(c, "hash_buckets"), "must be >= 1, got " + std::to_string(c.hash_buckets()));
        return std::max<std::int64_t>(c.hash_buckets(), 0);
      case CategoricalInput::kIdentityBuckets:
        if (c.identity_buckets() < 1)
          error(p(c, "identity_buckets"), "must be >= 1, got " + std::to_string(c.identity_buckets()));
        if (c.type() != INT64) error(p(c, "type"), "identity_buckets needs INT64 values");
        return std::max<std::int64_t>(c.identity_buckets(), 0) + oov;
      case CategoricalInput::MAPPING_NOT_SET:
        error(p, "choose how values become ids: vocabulary, vocabulary_file, hash_buckets or identity_buckets");
        return 0;
    }
    return 0;
  }

  void label() {
    const FieldPath p = root_(s_, "label");
    if (!s_.has_label()) {
      error(p, "a model needs a label");
      return;
    }
    const Label& l = s_.label();
    if (l.column().empty()) error(p(l, "column"), "must not be empty");
    if (l.width() < 1) error(p(l, "width"), "must be >= 1, got " + std::to_string(l.width()));
    else read_column(p(l, "column"), l.column(), l.type(), l.width());
    if (l.type() == STRING) {
      if (!l.has_vocabulary()) error(p(l, "type"), "STRING labels need a `vocabulary` of class names");
      else vocabulary(p(l, "vocabulary"), l.vocabulary());
    } else if (l.has_vocabulary()) {
      error(p(l, "vocabulary"), "only STRING labels have a vocabulary");
    }
    if (l.has_positive_label()) {
      const FieldPath at = p(l, "positive_label");
      if (l.type() == STRING) error(at, "STRING labels are mapped by their `vocabulary`, not positive_label");
      else if (l.width() != 1) error(at, "a binary label has width 1, got " + std::to_string(l.width()));
      else if (s_.head().loss() != BINARY_CROSS_ENTROPY) error(at, "positive_label is for binary cross-entropy");
      if (!std::isfinite(l.positive_label())) error(at, "must be a finite number");
    }
    if (l.has_negative_label()) {
      const FieldPath at = p(l, "negative_label");
      if (!l.has_positive_label()) error(at, "needs positive_label");
      else if (l.negative_label() == l.positive_label()) error(at, "equals positive_label (" + num(l.positive_label()) + ")");
      if (!std::isfinite(l.negative_label())) error(at, "must be a finite number");
    }
  }

  // The node `name` refers to, or null with an error at `p`.
  const Node* input_ref(const FieldPath& p, const std::string& name) {
    auto it = nodes_.find(name);
    if (it == nodes_.end()) {
      error(p, in_quotes(name) + " names no input or earlier layer (a layer reads inputs and layers written before it)");
      return nullptr;
    }
    return &it->second;
  }

  void layers() {
    for (int i = 0; i < s_.layer_size(); ++i) {
      const spec::Layer& l = s_.layer(i);
      const FieldPath p = root_(s_, "layer", i);
      const bool named = new_name(p(l, "name"), l.name());
      std::vector<const Node*> in;
      bool inputs_ok = true;
      for (int k = 0; k < l.input_size(); ++k) {
        const Node* n = input_ref(p(l, "input", k), l.input(k));
        inputs_ok &= n != nullptr;
        in.push_back(n);
      }
      auto count = [&](int lo, int hi, const char* what) {
        if (l.input_size() >= lo && l.input_size() <= hi) return true;
        error(p, std::string("a ") + what + " layer reads " +
                                 (lo == hi ? std::to_string(lo) : "at least " + std::to_string(lo)) + " input" +
                                 (lo == 1 && hi == 1 ? "" : "s") + ", got " + std::to_string(l.input_size()));
        return false;
      };
      // Only an embedding reads categorical inputs; every other layer reads matrices.
      auto dense_inputs = [&] {
        bool ok = true;
        for (int k = 0; k < l.input_size(); ++k)
          if (in[k] && in[k]->kind == Node::Kind::kCategoricalInput) {
            error(p(l, "input", k), in_quotes(l.input(k)) + " is a categorical input: only an embedding reads ids");
            ok = false;
          }
        return ok;
      };
      Node node{Node::Kind::kLayer, i, 0, 0};
      switch (l.kind_case()) {
        case spec::Layer::kEmbedding: {
          const Embedding& e = l.embedding();
          const FieldPath ep = p(l, "embedding");
          if (e.dim() < 1) error(ep(e, "dim"), e.has_dim() ? "must be >= 1, got " + std::to_string(e.dim()) : "required: the width of a row");
          node.width = e.dim();
          if (e.has_partitioner()) partitioner(ep(e, "partitioner"), e.partitioner());
          if (e.has_initializer()) initializer(ep(e, "initializer"), e.initializer());
          if (e.has_access() && (!(e.access().zipf_exponent() >= 0) || !std::isfinite(e.access().zipf_exponent())))
            error(ep(e, "access")(e.access(), "zipf_exponent"), "must be >= 0, got " + num(e.access().zipf_exponent()));
          if (!count(1, 1, "embedding") || !inputs_ok) break;
          if (in[0]->kind != Node::Kind::kCategoricalInput) {
            error(p(l, "input", 0), in_quotes(l.input(0)) + " is not a categorical input: an embedding looks up ids");
            break;
          }
          if (e.has_rows() && e.rows() < in[0]->id_count)
            error(ep(e, "rows"), std::to_string(e.rows()) + " rows, but input " + in_quotes(l.input(0)) + " produces " +
                                     std::to_string(in[0]->id_count) + " ids");
          break;
        }
        case spec::Layer::kDense: {
          const Dense& d = l.dense();
          const FieldPath dp = p(l, "dense");
          if (d.units() < 1) error(dp(d, "units"), d.has_units() ? "must be >= 1, got " + std::to_string(d.units()) : "required: the output width");
          node.width = d.units();
          if (d.has_kernel_initializer()) initializer(dp(d, "kernel_initializer"), d.kernel_initializer());
          if (d.has_bias_initializer()) initializer(dp(d, "bias_initializer"), d.bias_initializer());
          if (d.has_partitioner()) partitioner(dp(d, "partitioner"), d.partitioner());
          if (count(1, 1, "dense") && inputs_ok) dense_inputs();
          break;
        }
        case spec::Layer::kConcatenate:
          if (count(1, 1 << 20, "concatenate") && inputs_ok && dense_inputs())
            for (const Node* n : in) node.width += n->width;
          break;
        case spec::Layer::kAdd:
          if (count(2, 1 << 20, "add") && inputs_ok && dense_inputs()) {
            node.width = in[0]->width;
            for (int k = 1; k < l.input_size(); ++k)
              if (in[k]->width != node.width)
                error(p(l, "input", k), in_quotes(l.input(k)) + " is " + std::to_string(in[k]->width) + " wide, " +
                                            in_quotes(l.input(0)) + " " + std::to_string(node.width) +
                                            ": add sums inputs of equal width");
          }
          break;
        case spec::Layer::kDropout: {
          const float rate = l.dropout().rate();
          if (!(rate >= 0 && rate < 1)) error(p(l, "dropout")(l.dropout(), "rate"), "must be in [0, 1), got " + num(rate));
          if (count(1, 1, "dropout") && inputs_ok && dense_inputs()) node.width = in[0]->width;
          break;
        }
        case spec::Layer::kDotInteraction:
          if (count(2, 1 << 20, "dot_interaction") && inputs_ok && dense_inputs()) {
            for (int k = 1; k < l.input_size(); ++k)
              if (in[k]->width != in[0]->width)
                error(p(l, "input", k), in_quotes(l.input(k)) + " is " + std::to_string(in[k]->width) + " wide, " +
                                            in_quotes(l.input(0)) + " " + std::to_string(in[0]->width) +
                                            ": dot products need inputs of equal width");
            const std::int64_t n = l.input_size();
            node.width = l.dot_interaction().self_interaction() ? n * (n + 1) / 2 : n * (n - 1) / 2;
          }
          break;
        case spec::Layer::kCustom: {
          const Custom& c = l.custom();
          const FieldPath cp = p(l, "custom");
          if (c.has_partitioner()) partitioner(cp(c, "partitioner"), c.partitioner());
          if (c.type().empty()) {
            error(cp(c, "type"), "required: the name the program registered the layer type under");
            break;
          }
          const bool registered = std::count(custom_types_.begin(), custom_types_.end(), c.type()) > 0;
          if (!count(1, 1 << 20, "custom") || !inputs_ok || !dense_inputs()) {
            if (!registered) error(cp(c, "type"), std::string(build_custom_layer(l, {}).status().message()));
            break;
          }
          std::vector<Eigen::Index> widths;
          for (const Node* n : in) widths.push_back(n->width);
          auto built = build_custom_layer(l, widths);
          if (!built.ok()) {
            // An unregistered type is the `type`'s fault; what the factory refuses, its parameters'.
            error(registered ? cp : cp(c, "type"), std::string(built.status().message()));
            break;
          }
          node.width = built->layer->output_width();
          for (const auto& v : built->variables) custom_variables_[l.name()].push_back(l.name() + "/" + v.name);
          break;
        }
        case spec::Layer::KIND_NOT_SET:
          error(p, "choose what the layer computes: embedding, dense, concatenate, add, dropout, dot_interaction "
                   "or custom");
          break;
      }
      if (named) nodes_.emplace(l.name(), node);
    }
  }

  void head() {
    const FieldPath p = root_(s_, "head");
    if (!s_.has_head()) {
      error(p, "a model needs a head: the layer giving the logits, and the loss");
      return;
    }
    const Head& h = s_.head();
    if (h.loss() == LOSS_UNSET)
      error(p(h, "loss"), "choose a loss: BINARY_CROSS_ENTROPY, SOFTMAX_CROSS_ENTROPY or MEAN_SQUARED_ERROR");
    auto it = nodes_.find(h.input());
    if (h.input().empty() || it == nodes_.end() || it->second.kind != Node::Kind::kLayer) {
      error(p(h, "input"), h.input().empty() ? "required: the layer giving the logits"
                                             : in_quotes(h.input()) + " names no layer");
      return;
    }
    const std::int64_t width = it->second.width;
    reachable(h.input());
    // After a broken reference everything above it looks unreachable; say
    // so only when the graph itself is sound.
    if (out_.empty()) report_unreachable();
    if (width < 1) return;  // the layer's own error was reported
    head_loss(p, h, width);
  }

  void report_unreachable() {
    const Head& h = s_.head();
    for (int i = 0; i < s_.input_size(); ++i)
      if (!s_.input(i).name().empty() && !reaches_head_.count(s_.input(i).name()))
        error(root_(s_, "input", i)(s_.input(i), "name"),
              "input " + in_quotes(s_.input(i).name()) + " does not lead to the head " + in_quotes(h.input()));
    for (int i = 0; i < s_.layer_size(); ++i)
      if (!s_.layer(i).name().empty() && !reaches_head_.count(s_.layer(i).name()))
        error(root_(s_, "layer", i)(s_.layer(i), "name"),
              "layer " + in_quotes(s_.layer(i).name()) + " does not lead to the head " + in_quotes(h.input()));
  }

  void head_loss(const FieldPath& p, const Head& h, std::int64_t width) {
    const Label& l = s_.label();
    const std::string w = std::to_string(width);
    switch (h.loss()) {
      case BINARY_CROSS_ENTROPY:
        if (width != 1) error(p(h, "input"), in_quotes(h.input()) + " is " + w + " wide; binary cross-entropy takes one logit");
        if (l.width() != 1) error(root_(s_, "label")(l, "width"), "binary cross-entropy takes one label value per record");
        if (l.type() == STRING && l.vocabulary().token_size() != 2)
          error(root_(s_, "label")(l, "vocabulary"), "binary cross-entropy needs exactly 2 class names, got " +
                                                          std::to_string(l.vocabulary().token_size()));
        break;
      case SOFTMAX_CROSS_ENTROPY:
        if (width < 2) error(p(h, "input"), in_quotes(h.input()) + " is 1 wide; softmax cross-entropy takes one logit per class (>= 2)");
        if (l.type() == FLOAT) error(root_(s_, "label")(l, "type"), "softmax cross-entropy takes INT64 class ids or STRING class names");
        if (l.width() != 1) error(root_(s_, "label")(l, "width"), "softmax cross-entropy takes one class per record");
        if (l.type() == STRING && l.vocabulary().token_size() != width)
          error(root_(s_, "label")(l, "vocabulary"), std::to_string(l.vocabulary().token_size()) + " class names for " +
                                                          w + " logits");
        break;
      case MEAN_SQUARED_ERROR:
        if (l.type() != FLOAT) error(root_(s_, "label")(l, "type"), "mean squared error takes FLOAT targets");
        if (l.width() != width)
          error(root_(s_, "label")(l, "width"), std::to_string(l.width()) + " targets per record for " + w + " outputs");
        break;
      default: break;
    }
  }

  // Marks `name` and everything it reads as leading to the head.
  void reachable(const std::string& name) {
    if (!reaches_head_.insert(name).second) return;
    auto it = nodes_.find(name);
    if (it == nodes_.end() || it->second.kind != Node::Kind::kLayer) return;
    for (const auto& in : s_.layer(it->second.index).input()) reachable(in);
  }

  void metrics() {
    std::set<int> seen;
    for (int i = 0; i < s_.metric_size(); ++i) {
      const FieldPath p = root_(s_, "metric", i);
      const Metric m = s_.metric(i);
      if (m == METRIC_UNSET) error(p, "choose a metric: LOSS, ACCURACY or AUC");
      if (!seen.insert(m).second) error(p, Metric_Name(m) + " is listed twice");
      if (m == ACCURACY && s_.head().loss() == MEAN_SQUARED_ERROR) error(p, "accuracy needs a classification loss");
      if (m == AUC && s_.head().loss() != BINARY_CROSS_ENTROPY) error(p, "AUC needs binary cross-entropy");
    }
  }

  void optimizers() {
    for (const auto& l : s_.layer())
      for (auto& v : variables_of(l)) variables_.insert(std::move(v));
    std::map<std::string, int> group_of;
    int default_group = -1;
    for (int i = 0; i < s_.optimizer_size(); ++i) {
      const OptimizerGroup& g = s_.optimizer(i);
      const FieldPath p = root_(s_, "optimizer", i);
      auto config = optimizer_config(g);
      if (!config.ok()) {
        std::string message(config.status().message());
        // validate_optimizer_config names "optimizer.<field> ..."; the path says where instead.
        if (message.rfind("optimizer.", 0) == 0) message = message.substr(10);
        error(optimizer_field(p, g, message.substr(0, message.find(' '))), message);
      }
      if (g.layer_size() == 0 && g.variable_size() == 0) {
        if (default_group >= 0)
          error(p, "optimizer[" + std::to_string(default_group) +
                       "] already updates every layer no group names; name this group's layers");
        default_group = i;
      }
      for (int k = 0; k < g.layer_size(); ++k) {
        const std::string& name = g.layer(k);
        auto it = nodes_.find(name);
        if (it == nodes_.end() || it->second.kind != Node::Kind::kLayer) {
          error(p(g, "layer", k), in_quotes(name) + " names no layer");
          continue;
        }
        if (!has_variables(s_.layer(it->second.index))) {
          error(p(g, "layer", k), "layer " + in_quotes(name) + " has no variables to optimize");
          continue;
        }
        auto [prev, inserted] = group_of.emplace(name, i);
        if (!inserted)
          error(p(g, "layer", k), "layer " + in_quotes(name) + " is already updated by optimizer[" +
                                      std::to_string(prev->second) + "]");
      }
      for (int k = 0; k < g.variable_size(); ++k) {
        const std::string& name = g.variable(k);
        if (!variables_.count(name)) {
          error(p(g, "variable", k), in_quotes(name) + " names no variable (a layer's \"<layer>/embeddings\", " +
                                         "\"<layer>/kernel\" or \"<layer>/bias\")");
          continue;
        }
        auto [prev, inserted] = variable_group_.emplace(name, i);
        if (!inserted)
          error(p(g, "variable", k), "variable " + in_quotes(name) + " is already updated by optimizer[" +
                                         std::to_string(prev->second) + "]");
      }
    }
    if (s_.optimizer_size() > 0 && default_group < 0)
      for (int i = 0; i < s_.layer_size(); ++i)
        if (has_variables(s_.layer(i)) && !group_of.count(s_.layer(i).name()) && !all_named(s_.layer(i)))
          error(root_(s_, "layer", i)(s_.layer(i), "name"), "no optimizer updates layer " + in_quotes(s_.layer(i).name()) +
                                            " (name it in a group, or add a group without `layer`)");
  }

  // The field an optimizer error names: "beta_1" -> optimizer[i].adam.beta_1,
  // "learning_rate..." -> optimizer[i].learning_rate, else the group.
  FieldPath optimizer_field(const FieldPath& p, const OptimizerGroup& g, const std::string& name) {
    if (name.rfind("learning_rate", 0) == 0) return p(g, "learning_rate");
    const pb::FieldDescriptor* kind = g.GetDescriptor()->FindFieldByNumber(g.kind_case());
    if (kind == nullptr) return p;
    const pb::Message& rule = g.GetReflection()->GetMessage(g, kind);
    if (rule.GetDescriptor()->FindFieldByName(name) == nullptr) return p(g, kind->name().c_str());
    return p(g, kind->name().c_str())(rule, name.c_str());
  }

  bool has_variables(const spec::Layer& l) const { return !variables_of(l).empty(); }

  // The variables a layer creates (graph.cc names them so).
  std::vector<std::string> variables_of(const spec::Layer& l) const {
    if (l.has_custom()) {
      auto it = custom_variables_.find(l.name());
      return it == custom_variables_.end() ? std::vector<std::string>{} : it->second;
    }
    if (l.has_embedding()) return {l.name() + "/embeddings"};
    if (!l.has_dense()) return {};
    if (l.dense().use_bias()) return {l.name() + "/kernel", l.name() + "/bias"};
    return {l.name() + "/kernel"};
  }
  // Whether groups' `variable` lists name every variable of the layer.
  bool all_named(const spec::Layer& l) const {
    for (const auto& v : variables_of(l))
      if (!variable_group_.count(v)) return false;
    return true;
  }

  const ModelSpec& s_;
  std::string file_;
  const pb::TextFormat::ParseInfoTree* tree_;
  std::vector<SpecError>& out_;
  FieldPath root_;
  std::map<std::string, Node> nodes_;
  std::set<std::string> reaches_head_;
  std::map<std::string, std::pair<ValueType, int>> columns_;
  std::set<std::string> variables_;             // every layer's variables
  std::map<std::string, int> variable_group_;   // optimizer[i] naming the variable
  std::map<std::string, std::vector<std::string>> custom_variables_;  // custom layer -> its variables
  const std::vector<std::string> custom_types_ = custom_layer_types();
};

// The tokens of a vocabulary file, one per line; problems are reported at
// the file's own line, or at `field` when the file cannot be read.
std::optional<std::vector<std::string>> read_vocabulary(const std::string& path, const SpecError& at_field,
                                                        std::vector<SpecError>& errors) {
  auto fail = [&](const std::string& message) {
    SpecError e = at_field;
    e.message = in_quotes(path) + ": " + message;
    errors.push_back(std::move(e));
    return std::nullopt;
  };
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return fail(std::string("cannot read the vocabulary: ") + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return fail("is not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(std::string("cannot open the vocabulary: ") + std::strerror(errno));
  std::vector<std::string> tokens;
  std::map<std::string, int> seen;
  std::string line;
  const std::size_t errors_before = errors.size();
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto bad = [&](const std::string& message) { errors.push_back(SpecError{path, n, 1, "", message}); };
    if (line.empty()) {
      bad("an empty line: every line holds one token");
    } else if (line.find('\0') != std::string::npos) {
      bad("binary data (a NUL byte): a vocabulary is text, one token per line");
      break;
    } else if (auto [it, inserted] = seen.emplace(line, n); !inserted) {
      bad(in_quotes(line) + " repeats line " + std::to_string(it->second));
    }
    tokens.push_back(line);
    if (errors.size() - errors_before >= 20) break;  // enough to see what is wrong
  }
  if (in.bad()) return fail("reading failed");
  if (errors.size() > errors_before) return std::nullopt;
  if (tokens.empty()) return fail("the vocabulary file is empty");
  return tokens;
}

// Replaces each `vocabulary_file` by the file's tokens.
void resolve_vocabulary_files(ModelSpec& spec, const std::string& file, const pb::TextFormat::ParseInfoTree& tree,
                              std::vector<SpecError>& errors) {
  const std::filesystem::path dir = std::filesystem::path(file).parent_path();
  FieldPath root;
  for (int i = 0; i < spec.input_size(); ++i) {
    Input& in = *spec.mutable_input(i);
    if (!in.has_categorical() || !in.categorical().has_vocabulary_file()) continue;
    const CategoricalInput& c = in.categorical();
    const SpecError at_field = config::error_at(
        file, &tree, root(spec, "input", i)(in, "categorical")(c, "vocabulary_file"), "");
    if (c.vocabulary_file().empty()) {
      SpecError e = at_field;
      e.message = "must name a file";
      errors.push_back(std::move(e));
      continue;
    }
    std::filesystem::path path(c.vocabulary_file());
    if (path.is_relative()) path = dir / path;
    auto tokens = read_vocabulary(path.string(), at_field, errors);
    if (!tokens) continue;
    Vocabulary* v = in.mutable_categorical()->mutable_vocabulary();  // clears vocabulary_file (a oneof)
    for (auto& t : *tokens) v->add_token(std::move(t));
  }
}

}  // namespace

std::vector<SpecError> validate_model_spec(const ModelSpec& spec, const std::string& file) {
  std::vector<SpecError> errors;
  Validator(spec, file, nullptr, errors).run();
  return errors;
}

LoadedSpec parse_model_spec(std::string_view text, const std::string& file) {
  LoadedSpec out;
  pb::TextFormat::ParseInfoTree tree;
  if (!config::parse_text_proto(text, file, "model spec", out.spec, tree, out.errors)) return out;
  resolve_vocabulary_files(out.spec, file, tree, out.errors);
  if (!out.errors.empty()) return out;
  Validator(out.spec, file, &tree, out.errors).run();
  return out;
}

LoadedSpec load_model_spec_file(const std::string& path) {
  LoadedSpec out;
  auto text = config::read_text_file(path, "model spec", out.errors);
  if (!text) return out;
  return parse_model_spec(*text, path);
}

}  // namespace twinps::model
