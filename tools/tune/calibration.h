#pragma once
// `twinps calibrate`: what the simulator's cost model needs, measured on this
// machine with real `twinps serve` processes on loopback, as a CostProfile
// (sim/scenario.proto) that scenarios include and `twinps tune` reads.
//
// Every term has a cause and is measured by a microbenchmark or a small run,
// never fitted from a configuration being validated (there is no per-model
// residue):
//   - ps_service: a parameter server's CPU time per call (all its threads,
//     /proc schedstat) for a one-float pull (per_request; again beside a
//     process computing the gradient kernel on every core, tools/tune/
//     busy_neighbours.h, for per_request_on_busy_host; from one caller and
//     from two at once, with the ps's sleeps per call, for
//     per_request_when_awake; from one caller pausing 0.1 to 10 ms between
//     calls, the ps's CPU per call against its idle time per call, for
//     per_request_by_idle: tools/tune/ps_wake.h), dense pulls from
//     4 KiB up to the largest tensor (bytes_curve: allocation, copies and
//     caches make it other than proportional; swept three times, seconds
//     apart, each point keeping the median of the three), dense pushes of
//     the same sizes from 64 KiB under each optimizer (apply.bytes_curve:
//     beyond the caches an apply runs at memory speed), pulls of many
//     one-float shards (per_item),
//     row pulls and sparse pushes, 1, 16 and 64 floats wide, of rows at
//     random places that no recent call touched (per_row, per_row_kib:
//     fitted by non-negative least squares over the three widths);
//   - messages.data_send / data_receive: the caller's CPU for the same calls
//     (this process's thread: ParameterClient over the data plane, as a
//     worker runs it): per message (and per message on a busy host, as the
//     ps's), per item, per row, and a bytes curve for what it sends (pushes)
//     and what it receives (pulls);
//   - messages.data_assembly: a worker's own copies of a variable of several
//     shards (concat_shards of a read, split_dense of a gradient, two shards),
//     timed on this thread over the same sizes, the mean of the two;
//   - messages.control_by_interval: real one-worker, one-ps clusters
//     training one n x n variable at batch 64, n from 64 to 2048 (steps of
//     about 0.5 to 45 ms): half the coordinator's CPU per step (a closure
//     sent, its result received) is one message side's at that step's
//     interval, each of the four a step (RunClosure over gRPC); the longer
//     a process slept, the more a message costs it (0.19 ms a step at
//     1,400 steps/s, 1.2 ms at 22 here);
//   - messages.control_on_busy_host_us: the fastest of those clusters
//     beside a process computing the gradient kernel on every core
//     (tools/tune/busy_neighbours.h): a side's price when no core is idle;
//   - network.loopback_latency_us: the speed probe's hand-off, the wall time
//     of a one-byte round trip between two threads that is neither's CPU,
//     per way (the kernel's wake-up of a sleeping reader; on a virtual
//     machine, of a halted core);
//   - compute.kernel "gradient": synthetic::compute_gradient timed over a
//     range of shapes and batches, weights up to the largest tensor (per
//     call, per GFLOP, per GiB, per input element: its batch x rows input is
//     built whatever the width; per GFLOP per doubling of weights and input
//     beyond a core's own cache), the repeats going round the shapes so that
//     a slow spell of the machine costs each shape one repeat;
//   - compute.kernel "dense", "embedding": a model spec's layers, the
//     layers' own code at several shapes (tools/tune/kernel_fit.h's fit);
//     "read/<format>", "features/dense", "features/categorical": its input
//     pipeline, files of every format read through the trainer's data
//     source and mapped by its input layer (tools/tune/input_kernels.h);
//   - hosts.cores: usable cores, the machine's cores over the slowdown of
//     compute_gradient run on all of them at once; hosts.scheduler TICKED
//     with the kernel's tick (the coarse clock's resolution, one jiffy);
//   - hosts.duration_spread: how much one job's CPU time varies, from
//     compute_gradient calls of about 0.07, 1 and 4 ms timed one by one
//     while the other cores run it too (a busy host): the log-normal sigma
//     of each (half the 16th-84th percentile distance of the log times),
//     the median of the three;
//   - hosts.crowded_message: real clusters of one 64 x 64 variable and one
//     ps with 1, 2, 3, 4 and 6 workers (3 to 8 tasks on this machine's
//     cores), the same work a step in each: the CPU a step beyond the
//     simulation's at the prices above, less the 1-worker cluster's excess,
//     over the message jobs the simulation counts in a step, is a message
//     job's price at that many tasks per core (a woken process finds its
//     caches filled by more others; 0 with three tasks, where the message
//     prices were measured); last, as it simulates with every other price;
//   - speed: the reference probes of tools/tune/speed_probe.h, so that a
//     later run can tell how much faster or slower the machine has become:
//     the compute probe taken before, between and after the measurements
//     (the median of the three, for the speed and the cores), the row probe
//     before each row measurement (the median, for the speed the ps's row
//     prices were measured at), the round trip
//     before and after (the mean).
#include <cstdint>
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::cli {

struct CalibrationOptions {
  // Probe message sizes up to this model's largest variable (at least 4 MiB); absent: max_bytes.
  const scenario::SyntheticModel* model = nullptr;
  double max_bytes = 32.0 * (1 << 20);
  int repeats = 5;                  // batches per measurement; medians over them
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


// The median of `v` (0 if empty); calibration's and validation's summaries.
double median(std::vector<double> v);

// The profile in text format with `report` as a comment header.
std::string profile_text(const Calibration& c);

// CPU seconds every thread of process `pid` has used (/proc schedstat).
double process_cpu_seconds(int pid);
// Seconds its threads have spent runnable but waiting for a core (the second
// field of /proc schedstat): time lost to other work on the cores, as
// opposed to time asleep waiting for a message.
double process_run_delay_seconds(int pid);

// "host, CPU model, N cores, time, load average": where and when a
// measurement was taken (a profile's `measured_on`, saved runs').
std::string describe_machine();

}  // namespace twinps::cli
