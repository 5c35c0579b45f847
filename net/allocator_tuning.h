#pragma once
// Opt-in, process-wide: keep the memory of large tensors mapped after it is
// freed, so that the next message is received into pages the process already
// has instead of fresh ones (each fresh page is a fault plus zeroing by the
// kernel, and glibc's default returns buffers above a few hundred KiB to the
// kernel on free). glibc only: M_MMAP_THRESHOLD = 1 GiB (32 MiB where an older
// glibc refuses more), M_TRIM_THRESHOLD = 1 GiB. Every `twinps` process calls
// it (tools/main.cc).
//
// Measured (2026-11-27): glibc's default adapts its mmap threshold to
// freed blocks, but only up to 32 MiB, and trims the heap's top. Below that
// the tuning changes little (tests/bench/net_transport_bench.cc BM_PushPull
// at 1 and 16 MiB: within the run-to-run noise, under 150 faults per pair
// either way); above it, every step faults each tensor in again: a model of
// one 32 MiB variable trains 2.6x faster with the tuning (`twinps tune
// --validate`, docs/fidelity.md), and `twinps calibrate` takes 1.65 M
// faults without it, 0.29 M with it. The cost is a
// resident set that does not shrink after a peak. Call once, at the top of
// main(), before threads start; the library never calls it itself.
namespace twinps::net {

// Returns false if the C library refused (or is not glibc).
bool tune_allocator_for_large_tensors();

}  // namespace twinps::net
