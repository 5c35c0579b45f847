#pragma once
// `twinps tune --validate`: how close the calibrated simulation comes to real
// runs on this machine. For a grid of configurations (model x workers x ps x
// shard count) it trains each synthetic model on real `twinps serve`
// processes on loopback (tools/tune/real_run.h) and predicts the same program
// with the same closure counts by simulation (sim::predict), then prints
// predicted and measured steps/s with the error, the median and worst error,
// and, for every model and cluster measured at several shard counts, whether
// the shard count the simulation would pick is within 5 % of the best one
// measured. Exit 0 when every run completed (whatever the errors: they are
// the measurement), 1 when a run failed, 2 for bad input.
namespace twinps::cli {

int run_tune_validate(int argc, char** argv);

}  // namespace twinps::cli
