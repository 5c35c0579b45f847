#pragma once
// A model spec made trainable on core's coordinator, workers and parameter
// servers — the same object whichever runtime carries it (in-memory,
// simulated, real gRPC):
//
//   * build_variables(): the layers' variables, then `iterations`, then the
//     training and evaluation metrics, sharded by the spec's partitioners and
//     placed round-robin in that order (as TensorFlow's strategy would), with
//     initial values drawn from the spec's init_seed;
//   * register_functions(): the train and eval step functions. A train step
//     takes the next RecordBatch from its per-worker iterator, maps it to
//     features, pulls what the batch needs (dense variables whole, embedding
//     rows the batch touches, each distinct row once), runs forward and
//     backward through the layer graph, and pushes gradients (embeddings as
//     sparse rows), metric counts and iterations += 1. With several steps per
//     closure the next batch's pull rides on this step's push;
//   * reset_metrics() / read_metrics(): the metrics, as the coordinator reads them;
//   * step_cost(): a step's FLOPs, bytes and rows touched per embedding, for
//     the simulator's cost model and the tuner.
//
// Immutable after compile(); its step functions may run on several worker
// threads at once.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/data/record_dataset.h"
#include "core/messages/messages.h"
#include "core/model/graph.h"
#include "core/ps/optimizer_config.h"
#include "core/variables/directory.h"
#include "core/worker/function_registry.h"
#include "core/worker/parameter_client.h"

namespace twinps::model {

enum class Phase { kTrain, kEval };

struct MetricValues {
  double examples = 0;  // records the metrics counted
  double loss = 0;      // mean loss over them
  std::optional<double> accuracy;
  std::optional<double> auc;
};

// What one step moves and computes, from the spec alone (timing-only
// simulation and the tuner use it; a numeric run measures the real thing).
struct StepCost {
  double train_flops = 0;
  double eval_flops = 0;
  struct VariableTraffic {
    std::string name;
    Shape shape;
    bool embedding = false;
    // Distinct rows a train step reads and updates: every row of a dense
    // variable; for an embedding the expected distinct rows among
    // batch x ids-per-record draws from its access distribution.
    double rows_per_step = 0;
    // Embeddings: the lookups behind rows_per_step (batch x ids per record),
    // drawn with replacement; 0 for a dense variable.
    double lookups_per_step = 0;
    double bytes_pulled = 0;  // values (4 bytes each) and, for embeddings, 8-byte row ids
    double bytes_pushed = 0;
  };
  std::vector<VariableTraffic> variables;
  double bytes_pulled = 0;
  double bytes_pushed = 0;
};

// The expected number of distinct rows among `draws` independent draws from
// `rows` rows with weight 1/(r+1)^zipf_exponent (0: uniform).
double expected_distinct_rows(std::int64_t rows, double draws, double zipf_exponent);

class CompiledModel : public std::enable_shared_from_this<CompiledModel> {
 public:
  // `spec` must be valid (core/model/spec_loader.h). Step and dataset names
  // start with `prefix` ("model/train_step"), so one binary can hold several models.
  static StatusOr<std::shared_ptr<const CompiledModel>> compile(const spec::ModelSpec& spec,
                                                                std::string prefix = "model");

  const spec::ModelSpec& spec() const { return graph_->spec(); }
  const ModelGraph& graph() const { return *graph_; }
  // The columns a dataset must hold for this model (it may hold more).
  const data::Schema& schema() const { return graph_->features().schema(); }
  std::int64_t batch_size() const { return spec().batch_size(); }

  // Step functions: args [iterator, steps per closure (optional, default 1)]
  // for training, returning the last step's loss; [iterator] for evaluation.
  std::string train_step() const { return prefix_ + "/train_step"; }
  std::string eval_step() const { return prefix_ + "/eval_step"; }
  // Registers both (keeping this model alive in the registry), and the
  // built-in "iterator" resource function.
  void register_functions(FunctionRegistry& registry) const;

  struct Variables {
    std::vector<VariableLayout> layouts;
    std::vector<ShardState> initial;
    OptimizerConfig optimizer;
  };
  // On `num_ps` parameter servers. `meta`: meta shards, which hold a shape
  // and no values (timing-only simulation, ShardSpec::meta). `optimizer` is the first variable's; every
  // trainable variable whose optimizer group has another carries it in its
  // layout (VariableLayout::optimizer) and shards.
  // `visit_rows` > 0 (exactly-once training): also kVisits, an accumulator
  // of one row per training example, unsharded and created last (so the
  // other variables are placed as without it).
  StatusOr<Variables> build_variables(int num_ps, bool meta = false, std::int64_t visit_rows = 0) const;

  static constexpr char kIterations[] = "iterations";
  // Exactly-once training: how many times each example was trained on, as
  // the parameter servers applied it (core/training/exactly_once.h).
  static constexpr char kVisits[] = "visits";
  // Names of the accumulators behind a metric: "accuracy/total" ... for
  // training, "eval_accuracy/total" ... for evaluation.
  std::vector<std::string> metric_variables(Phase phase) const;

  // Zero the phase's metrics (before an epoch or an evaluation).
  Task<Status> reset_metrics(ParameterClient& ps, const VariableDirectory& variables, Phase phase) const;
  // The phase's metrics accumulated since the last reset.
  Task<StatusOr<MetricValues>> read_metrics(ParameterClient& ps, const VariableDirectory& variables,
                                            Phase phase) const;

  // What one batch adds to each metric accumulator (metric_variables()
  // order), and the metrics those accumulated totals give.
  std::vector<Matrix> metric_deltas(const Matrix& logits, const Matrix& labels, double loss) const;
  MetricValues metrics_from(const std::vector<Matrix>& totals) const;

  // The step functions' work, for step functions that find the iterator
  // elsewhere (core/training ships the model to workers as a resource):
  // `steps` training steps on `iterator`'s batches, returning the last
  // step's loss; one evaluation batch, adding to the eval metrics on the
  // parameter servers and returning its loss.
  // `add_to_push`, when given, adds its writes to step i's push (exactly-once
  // training counts each step's examples there: applied with its gradients).
  using StepPushHook = std::function<void(std::int64_t step, ParameterClient::PushBatch& push)>;
  Task<StatusOr<double>> run_train_steps(StepContext& ctx, data::RecordIteratorResource& iterator,
                                         std::int64_t steps, const StepPushHook& add_to_push = {}) const;
  Task<StatusOr<double>> run_eval_step(StepContext& ctx, data::RecordIteratorResource& iterator) const;

  // Direct evaluation on the coordinator: one batch's metric deltas
  // (metric_variables() order) from the parameters it needs, pulled from the
  // parameter servers (only the embedding rows it touches). Add the deltas
  // of every batch and give the sums to metrics_from().
  Task<StatusOr<std::vector<Matrix>>> evaluate_batch(ParameterClient& ps, const VariableDirectory& variables,
                                                     const data::Schema& schema,
                                                     const data::RecordBatch& batch) const;

  // Finds a variable by name, or null.
  using VariableLookup = std::function<const VariableLayout*(const std::string&)>;

  // The spec's step, priced (see StepCost).
  const StepCost& step_cost() const { return cost_; }

 private:
  CompiledModel(std::shared_ptr<const ModelGraph> graph, std::string prefix)
      : graph_(std::move(graph)), prefix_(std::move(prefix)) {}
  struct StepVariables;
  StatusOr<StepVariables> find_variables(const VariableLookup& lookup, Phase phase) const;
  struct PendingVariable;
  std::vector<PendingVariable> variables_to_create(const PartitionerPtr& model_partitioner) const;
  Task<StatusOr<Value>> train(StepContext& ctx) const;
  Task<StatusOr<Value>> evaluate(StepContext& ctx) const;
  StepCost price() const;

  std::shared_ptr<const ModelGraph> graph_;
  std::string prefix_;
  std::vector<spec::Metric> metrics_;  // in creation order; LOSS always among them
  std::vector<OptimizerConfig> optimizer_of_variable_;
  StepCost cost_;
};

// Evaluation on the caller with full variable values, no parameter server:
// what a side-car evaluator does with a restored checkpoint and what direct
// inline evaluation does on the coordinator. The same forward pass and metric
// arithmetic as the eval step function.
class LocalEvaluator {
 public:
  // Full values by variable name ("dense/kernel": [rows x cols] storage).
  using VariableValues = std::map<std::string, Matrix, std::less<>>;

  explicit LocalEvaluator(std::shared_ptr<const CompiledModel> model);
  // Adds a batch's metrics. INVALID_ARGUMENT for a missing or misshapen
  // variable value, or bad data (naming the column).
  Status add(const VariableValues& values, const data::Schema& schema, const data::RecordBatch& batch);
  // The metrics of every batch added so far.
  MetricValues result() const;

 private:
  std::shared_ptr<const CompiledModel> model_;
  std::vector<Matrix> totals_;
};

}  // namespace twinps::model
