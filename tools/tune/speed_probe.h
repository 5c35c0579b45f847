#pragma once
// How fast this machine is right now, by two reference probes, and a cost
// profile re-priced for that speed.
//
// A shared or virtual machine does not keep one speed: the same kernel took
// 5.3 ms and 7.1 ms here a quarter of an hour apart with the load average
// near 1 and no steal time counted (a neighbour on the physical host, its
// clock), and the message prices of two calibrations two hours apart differed
// by 25-45 %. A profile is the machine's prices at the time it was measured;
// comparing it with a run taken at another speed measures the drift, not the
// simulator. So `twinps calibrate` records the probes with the prices, and
// `twinps tune --validate` probes again around each real run and prices that
// run's prediction at the speed it found (and reports the prediction at the
// calibrated prices too).
//
// Three probes:
//   - compute: a basket of three synthetic::compute_gradient calls (a
//     streaming, an arithmetic-bound and an input-bound shape), one thread's
//     CPU time, then the same on every core at once (the ratio is the
//     slowdown that makes the usable cores);
//   - round trip: one-byte messages back and forth between two threads over a
//     Unix socket pair, both threads' CPU time per round trip (system calls,
//     wake-ups, context switches: what handling a message costs beyond its
//     bytes), and the wall time of those round trips that is neither
//     thread's CPU, per way (the hand-off: the kernel waking a sleeping
//     reader, on a virtual machine a halted core), which calibration takes
//     for loopback latency. Reported, not used to re-price: it depends on what the machine
//     did just before (29 us after idling, 19 us after a calibration's
//     calls, 15-18 us after a real run's), and re-pricing messages by it
//     made three validation runs of four worse;
//   - rows: 64-float rows at random places of a 32 MiB table gathered and
//     added back on one thread, CPU time per row (memory latency and
//     bandwidth: what a ps's rows cost). A ps's row prices moved 1.5-3.2x
//     between calibrations an hour apart while the compute prices moved
//     20 % (docs/fidelity.md).
#include "core/tensor/tensor.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto

namespace twinps::cli {

// CPU seconds the calling thread has used.
double thread_cpu_seconds();

// CPU seconds per call of synthetic::compute_gradient(w, batch), over about
// `seconds` of wall time (at least three calls). CPU time, not wall time: the
// price of the work itself, whatever else this machine runs meanwhile
// (sharing the cores is the simulator's processor sharing, not the kernel's
// price).
double gradient_cpu_seconds(const Matrix& w, int batch, double seconds);

// CPU microseconds per row of the row probe (MachineSpeed.row_us), the
// median of five timings over about `seconds`. Calibration takes it around
// its row measurements, so that the speed its row prices are re-priced
// against is the speed they were measured at.
double row_cpu_us(double seconds);

// The probes, taken for about `seconds` in all.
scenario::MachineSpeed probe_machine_speed(double seconds = 0.6);

// The compute probe alone, timed for about `seconds`: the kernel basket's CPU
// seconds on one thread (`compute_us`) and its slowdown on every core at
// once (`together_slowdown`); the round-trip fields stay unset. Calibration
// takes it between its measurements, a third probe beside those before and
// after them, and keeps the median (tools/tune/calibration.cc).
scenario::MachineSpeed probe_compute_speed(double seconds);

// The speed a calibration's prices were measured at, from its three probes:
// the compute figures (kernel basket, slowdown together) are the median of
// the three, so one probe taken in a slow spell (after the machine idled, on
// a VM) moves nothing; the round trip's figures, which `between` lacks, are
// the mean of `before` and `after`.
scenario::MachineSpeed calibration_speed(const scenario::MachineSpeed& before, const scenario::MachineSpeed& between,
                                         const scenario::MachineSpeed& after);

// The usable cores of a machine with `online` cores at `speed`.
double usable_cores(int online, const scenario::MachineSpeed& speed);

// How `profile`'s prices change at `now` against the speed it was measured
// at (its `speed`): compute kernels by the compute probe's ratio, usable
// cores from `now`'s slowdown, the ps's row prices (pulled and pushed) by
// the row probe's (validation passes the median of all its runs' probes:
// one is noisy, as the cores' slowdown is); message handling and the rest
// of the ps's service stay (see the round trip above). Ratios are 1 when
// either side lacks the probe.
struct SpeedRatios {
  double compute = 1;
  double messages = 1;
  double rows = 1;
};
SpeedRatios speed_ratios(const scenario::MachineSpeed& measured, const scenario::MachineSpeed& now);
scenario::CostProfile at_speed(const scenario::CostProfile& profile, const scenario::MachineSpeed& now, int online_cores);

}  // namespace twinps::cli
