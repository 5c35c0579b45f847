#pragma once
// The model of TensorFlow's parameter server training tutorial, in C++:
// StringLookup'd features, Embedding(output_dim 20) -> mean over the 3
// features -> Dense(1, sigmoid), binary cross-entropy, RMSprop(0.1), Accuracy;
// variables sharded by FixedShardsPartitioner(num_ps); 4 epochs of 5 steps of
// batch 8. The same step functions run on the in-memory cluster, the
// simulator and real gRPC.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/coordinator/cluster_coordinator.h"
#include "core/data/dataset.h"
#include "core/models/tutorial/string_lookup.h"
#include "core/ps/optimizer_config.h"
#include "core/worker/function_registry.h"

namespace twinps::tutorial {

inline const std::vector<std::string> kFeatureVocab = {"avenger", "ironman",  "batman",      "hulk",
                                                       "spiderman", "kingkong", "wonder_woman"};
inline const std::vector<std::string> kLabelVocab = {"yes", "no"};

inline constexpr char kTrainDataset[] = "tutorial/train_dataset";
inline constexpr char kEvalDataset[] = "tutorial/eval_dataset";
inline constexpr char kTrainStep[] = "tutorial/train_step";
inline constexpr char kEvalStep[] = "tutorial/eval_step";

// Variable names, as Keras names them.
inline constexpr char kEmbedding[] = "embedding/embeddings";
inline constexpr char kKernel[] = "dense/kernel";
inline constexpr char kBias[] = "dense/bias";
inline constexpr char kIterations[] = "iterations";
inline constexpr char kAccuracyTotal[] = "accuracy/total";
inline constexpr char kAccuracyCount[] = "accuracy/count";
inline constexpr char kEvalAccuracyTotal[] = "eval_accuracy/total";
inline constexpr char kEvalAccuracyCount[] = "eval_accuracy/count";

struct Config {
  int num_examples = 200;  // feature_and_label_gen(num_examples=200)
  int batch_size = 8;
  int shuffle_buffer = 200;
  int epochs = 4;
  int steps_per_epoch = 5;
  int steps_per_execution = 1;  // training steps per closure (TensorFlow's steps_per_execution)
  double learning_rate = 0.1;
  int embedding_dim = 20;
  int num_shards = 2;       // FixedShardsPartitioner(num_shards); <= 1: no partitioner
  bool mask_token = false;  // TF 2.4's StringLookup: input_dim 9, shards (5,20) and (4,20)
  std::uint64_t data_seed = 1;   // the examples: the same on every worker
  std::uint64_t init_seed = 2;   // initial variable values
  int eval_examples = 16;
  int eval_steps = 2;       // distributed evaluation: closures of one eval batch each
};

struct Lookups {
  StringLookup features;
  StringLookup labels;
};
Lookups make_lookups(const Config& config);

// feature_and_label_gen: three distinct features; label "yes" iff "avenger" is one of them.
std::vector<Example> generate_examples(int n, const Lookups& lookups, RandomStream& random);
// The evaluation examples of a run (the same for inline and side-car evaluation).
std::vector<Example> eval_examples(const Config& config);

struct Model {
  std::vector<VariableLayout> variables;
  std::vector<ShardState> initial;
  OptimizerConfig optimizer;
};
StatusOr<Model> build_model(int num_ps, const Config& config);

// The step and dataset functions every task of the binary registers.
void register_functions(FunctionRegistry& registry);

struct EpochReport {
  int epoch = 0;
  double accuracy = 0;
  std::int64_t iterations = 0;
  Time finished_at = 0;
};
struct Result {
  std::vector<EpochReport> epochs;
  // The epochs' span on the coordinator's clock and the steps they trained,
  // for throughput (examples/s = steps * batch_size / seconds).
  Time training_started = 0;
  Time training_finished = 0;
  std::int64_t steps_trained = 0;
  double final_loss = 0;
  double direct_eval_accuracy = 0;       // evaluated on the coordinator
  double distributed_eval_accuracy = 0;  // eval closures on workers, metric on a ps
};

// Called after each epoch's join; e.g. to save a checkpoint. An error stops training.
using AfterEpoch = std::function<Task<Status>(ClusterCoordinator&, const EpochReport&)>;
// Called after each train closure is scheduled, with the steps scheduled by
// this run so far; e.g. to save a checkpoint every N steps or seconds (join
// first: save_checkpoint wants no closure running). An error stops training.
using AfterSchedule = std::function<Task<Status>(ClusterCoordinator&, std::int64_t steps_scheduled)>;
// Called with every closure train() schedules (train, loss and eval steps)
// and its RemoteValue: the simulator records them so that expectations over
// the program's closures see the tutorial's too.
using OnScheduled = std::function<void(const std::string& fn, const RemoteValue&)>;

// The tutorial's training loop from epoch `start_epoch` (a resumed run starts
// at iterations // steps_per_epoch): per epoch, reset the accuracy metric,
// schedule steps_per_epoch steps, join, read the metric. Then one more step
// for the final loss, and both kinds of inline evaluation.
Task<StatusOr<Result>> train(ClusterCoordinator& coordinator, Config config, int start_epoch = 0,
                             std::function<void(const EpochReport&)> on_epoch = {}, AfterEpoch after_epoch = {},
                             AfterSchedule after_schedule = {}, OnScheduled on_scheduled = {});

// Accuracy of the current parameters on `examples`, computed on the caller.
Task<StatusOr<double>> evaluate_directly(ClusterCoordinator& coordinator, std::vector<Example> examples);

// Accuracy of given full parameter values on `examples` (the side-car
// evaluator's computation on a restored checkpoint).
double accuracy(const Matrix& embedding, const Matrix& kernel, float bias, const std::vector<Example>& examples);

}  // namespace twinps::tutorial
