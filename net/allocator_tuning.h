#pragma once
// Opt-in, process-wide: keep the memory of large tensors mapped after it is
// freed, so that the next message is received into pages the process already
// has instead of fresh ones (each fresh page is a fault plus zeroing by the
// kernel, and glibc's default returns buffers above a few hundred KiB to the
// kernel on free). glibc only: M_MMAP_THRESHOLD = 1 GiB (32 MiB where an older
// glibc refuses more), M_TRIM_THRESHOLD = 1 GiB. Every `twinps` process calls
// it (tools/main.cc).
//
// Measured with tests/bench/net_transport_bench.cc (BM_PushPull): page faults
// per push/pull pair halve (16 MiB: ~7,000 -> ~3,200; 1 MiB: ~330 -> ~180),
// worth up to ~25% CPU per pair at 16 MiB on a quiet machine. In training
// (`twinps tune --validate`, 2026-11-25): 10 % of a worker's CPU was page
// faults on a model of 48 small variables, and steps/s rose 1.4-2.2x
// (docs/fidelity.md); a 32 MiB variable's steps/s 2.3x. The cost is a
// resident set that does not shrink after a peak. Call once, at the top of
// main(), before threads start; the library never calls it itself.
namespace twinps::net {

// Returns false if the C library refused (or is not glibc).
bool tune_allocator_for_large_tensors();

}  // namespace twinps::net
