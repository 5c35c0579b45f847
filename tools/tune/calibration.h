#pragma once
// `twinps calibrate`: what the simulator's cost model needs, measured on this
// machine with real `twinps serve` processes on loopback, as a CostProfile
// (sim/scenario.proto) that scenarios include and `twinps tune` reads.
//
// How each number is measured (every timing is a median over repeats):
//   - calls: this process (as the chief) calls a real parameter server one
//     call at a time over the data plane — pulls of a one-float shard, dense
//     pulls and pushes of 64 KiB .. 4 MiB, sparse pushes of 256 KiB spread
//     over 64 .. 16384 rows — timing each round trip on the wall clock and
//     reading the ps process's CPU time (all its threads, /proc) around each
//     batch;
//   - ps_service: least squares of the ps's CPU time per call over
//     (1, KiB, rows): per_request_us, per_kib_us, per_row_us — the time the
//     simulator makes a request occupy the server;
//   - network: what remains of a round trip. The simulator's message crosses
//     two host links (sender's and receiver's), so a round trip pays four
//     host latencies: host_latency_us = (small round trip - ps CPU) / 4.
//     host_bandwidth_gbps from the slope of the round trip over bytes, less
//     the ps's own per-KiB CPU;
//   - compute: synthetic::compute_gradient — the very work a numeric step
//     does — timed on what a step of the model pulls (per_gflop_s = seconds
//     over GFLOP, 4 x batch x elements), or without a model over a range of
//     sizes (the slope);
//   - step_time: what a step costs beyond those — the coordinator's dispatch
//     round trip over gRPC, the worker's step bookkeeping — from a real
//     one-worker cluster training a one-float model, less what the profile
//     already charges for that step (its three round trips); with a model,
//     plus what a real 1-worker, 1-ps run of the model takes per step beyond
//     the simulation of the same closures with the profile so far (the
//     worker's own handling of the bytes and rows it pulls and pushes).
#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::cli {

struct CalibrationOptions {
  // The optimizer and batch size whose costs to measure (a model's); absent: SGD, batch 32.
  const scenario::SyntheticModel* model = nullptr;
  int repeats = 5;              // batches per measurement; medians over them
  double seconds_per_batch = 0.15;  // each batch repeats its call for about this long
  std::string data_plane = "tcp";
  std::string work_dir;  // the servers' logs
  bool verbose = false;  // print each measurement to stderr as it is taken
};

struct Calibration {
  scenario::CostProfile profile;
  std::string report;  // what was measured, one line per quantity (the file's comment header)
};

StatusOr<Calibration> calibrate(const CalibrationOptions& options);

// How many times longer synthetic::compute_gradient takes when `threads`
// threads run it at once on this machine than when one does (>= 1): what
// sharing its cores costs a cluster whose tasks all run here, where the
// simulator gives every task a host of its own. Timed for about `seconds`.
double compute_slowdown(int threads, int batch, double seconds);

// The median of `v` (0 if empty); calibration's and validation's summaries.
double median(std::vector<double> v);

// The profile in text format with `report` as a comment header.
std::string profile_text(const Calibration& c);

}  // namespace twinps::cli
