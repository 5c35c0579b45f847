#pragma once
#include <cstddef>
#include <vector>

namespace twinps::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};

// Every subcommand, in the order --help lists them.
const std::vector<Command>& commands();

int run_train(int argc, char** argv);
int run_serve(int argc, char** argv);
int run_eval(int argc, char** argv);
int run_sim(int argc, char** argv);
int run_bench(int argc, char** argv);
int run_bench_sim(int argc, char** argv);
int run_tune(int argc, char** argv);
int run_calibrate(int argc, char** argv);  // tools/commands/calibrate.cc
int run_bench_ps(int argc, char** argv);     // tools/commands/bench_ps.cc
int run_bench_train(int argc, char** argv);  // tools/commands/bench_train.cc
int run_model(int argc, char** argv);        // tools/commands/model.cc
int run_datagen(int argc, char** argv);      // tools/commands/datagen.cc
int run_tf_config(int argc, char** argv);    // tools/commands/tf_config.cc
int run_trace(int argc, char** argv);        // tools/commands/trace.cc
int run_bench_flows(int argc, char** argv);  // tools/commands/bench_flows.cc
int run_bench_all(int argc, char** argv);    // tools/commands/bench_all.cc
// One loopback TCP stream of `bytes`, bytes per second (median of `repeats`):
// the machine's limit for one connection (tools/commands/bench_flows.cc).
double loopback_stream_bytes_per_s(std::size_t bytes, int repeats);
// The same over a Unix socket pair: the limit of the data plane between tasks of one host.
double unix_stream_bytes_per_s(std::size_t bytes, int repeats);

}  // namespace twinps::cli
