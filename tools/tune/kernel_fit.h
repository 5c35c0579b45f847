#pragma once
// Pricing a kind of kernel from the CPU time of its own code (calibrate's
// compute prices): time each subject, a few shapes of one kind, and fit the
// kind's KernelPrice per call, per GFLOP, per GiB, per G input elements and
// per record by least squares with non-negative coefficients.
#include <chrono>
#include <string>
#include <vector>

#include "core/runtime/cost_model.h"
#include "scenario.pb.h"  // generated from sim/scenario.proto
#include "tools/tune/calibration.h"
#include "tools/tune/speed_probe.h"

namespace twinps::cli {

// Least squares in relative terms (a 20 us call weighs as much as a 4 ms
// one) whose coefficients are all >= 0: a regressor whose coefficient comes
// out negative (noise on a term too small to see) is dropped and the rest
// fitted again. A regressor that is 0 in every row gets 0.
std::vector<double> nonnegative_least_squares(const std::vector<std::vector<double>>& x, const std::vector<double>& y);

// CPU seconds per call of `call` on this thread, over about `seconds` of
// wall time (at least three calls).
template <typename Call>
double cpu_seconds_per_call(double seconds, Call call);

// One sample of a kind: what the subject is, the work it describes (as the
// model describes its kernels), and its median CPU seconds per call.
struct KernelSample {
  std::string name;
  KernelWork work;
  double seconds = 0;
};

// Adds `kind`'s price, fitted to `samples`, to the profile's compute
// prices, and a table of the samples and the fit to `report`.
void fit_kernel_kind(const std::string& kind, const std::vector<KernelSample>& samples, scenario::CostProfile& p,
                     std::string* report);

// Times every subject (`repeats` times, going round the subjects, each
// over `seconds`) and fits `kind` to the medians. A subject has a `name`,
// `run()` and `work()`, and may say that a run makes `calls` calls of that
// work (a pass over a file of batches).
template <typename Subject>
void measure_kernel_kind(const std::string& kind, int repeats, double seconds, std::vector<Subject>& subjects,
                         scenario::CostProfile& p, std::string* report);

// ---------------------------------------------------------------- templates

template <typename Call>
double cpu_seconds_per_call(double seconds, Call call) {
  using Clock = std::chrono::steady_clock;
  int n = 0;
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  while (n < 3 || std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
    call();
    ++n;
  }
  return (thread_cpu_seconds() - cpu0) / n;
}

template <typename Subject>
void measure_kernel_kind(const std::string& kind, int repeats, double seconds, std::vector<Subject>& subjects,
                         scenario::CostProfile& p, std::string* report) {
  std::vector<std::vector<double>> per_call(subjects.size());
  for (int r = 0; r < repeats; ++r)
    for (std::size_t i = 0; i < subjects.size(); ++i)
      per_call[i].push_back(cpu_seconds_per_call(seconds, [&] { subjects[i].run(); }));
  std::vector<KernelSample> samples;
  for (std::size_t i = 0; i < subjects.size(); ++i) {
    double calls = 1;
    if constexpr (requires { subjects[i].calls; }) calls = subjects[i].calls;
    samples.push_back({subjects[i].name, subjects[i].work(), median(per_call[i]) / calls});
  }
  fit_kernel_kind(kind, samples, p, report);
}

}  // namespace twinps::cli
