#pragma once
// The data of TensorFlow's parameter server training tutorial
// (feature_and_label_gen): each record holds three distinct words of a
// 7-word vocabulary as the string column "features" (width 3) and the label
// "yes" when "avenger" is among them, else "no" (column "label"). The model
// that learns it is a spec like any other (examples/tutorial/model.textproto);
// only its data is generated here, as in-memory records a per-worker dataset
// serves (core/data/in_memory_records.h).
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/records.h"
#include "core/messages/value.h"
#include "core/runtime/random.h"
#include "core/worker/function_registry.h"

namespace twinps::tutorial {

inline const std::vector<std::string> kFeatureVocab = {"avenger", "ironman",  "batman",      "hulk",
                                                       "spiderman", "kingkong", "wonder_woman"};

// The resource function serving generated records, registered by
// register_data_functions: args [seed, records, batch size, shuffle buffer, repeat (-1 forever)].
inline constexpr char kRecordsFunction[] = "tutorial/records";

// The examples' columns: "features" (string, width 3) and "label" (string).
data::Schema schema();

// `n` records drawn from `random` as the tutorial's generator draws them.
data::RecordBatch generate_records(int n, RandomStream& random);

// The arguments of kRecordsFunction.
std::vector<Value> records_args(std::uint64_t seed, std::int64_t records, std::int64_t batch_size,
                                std::int64_t shuffle_buffer, std::int64_t repeat);

void register_data_functions(FunctionRegistry& registry);

}  // namespace twinps::tutorial
