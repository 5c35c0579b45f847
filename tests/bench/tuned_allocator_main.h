#pragma once
// The main() of the benchmarks that time tensor work: Google Benchmark's,
// with the allocator tuned first as every `twinps` process tunes it
// (net/allocator_tuning.h), so that freed tensor memory stays mapped and a
// step's buffers are not fresh pages, faulted in and zeroed, every time.
#include <benchmark/benchmark.h>

#include "net/allocator_tuning.h"

namespace twinps::bench {

inline int run_with_tuned_allocator(int argc, char** argv) {
  twinps::net::tune_allocator_for_large_tensors();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace twinps::bench
