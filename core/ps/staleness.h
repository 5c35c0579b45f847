#pragma once
// Staleness of applied gradients: how many versions of a shard the ps
// applied between the read a gradient was computed from and the gradient's
// own application. A shard's version is its update count (ShardState::step:
// the gradients the optimizer applied to it), which every pull returns
// (PulledValue::version) and every gradient sends back (Update::read_version).
// The ps measures each gradient it applies (ParameterStore::push), keeps the
// totals (ParameterStoreStats::staleness: ps metrics) and answers each push
// with its own (PushResponse::staleness); a worker adds up its closure's
// pushes and returns them with the closure (RunClosureResponse::staleness),
// and the coordinator adds those up (CoordinatorStats::staleness: the run
// summary, in the simulator and in real runs alike).
//
// 0 means no other update came between the read and the write (what
// synchronous training gives); in asynchronous training with W workers each
// gradient is typically about W - 1 versions behind.
#include <array>
#include <cstdint>
#include <string>

namespace twinps {

struct StalenessHistogram {
  // Bucket upper bounds (inclusive); one more bucket holds everything above
  // the last. Exact for the small values bounded modes give.
  static constexpr std::array<std::int64_t, 12> kBounds = {0, 1, 2, 3, 4, 6, 8, 16, 32, 64, 256, 1024};
  std::array<std::uint64_t, kBounds.size() + 1> counts{};
  std::uint64_t total = 0;  // gradients measured
  std::uint64_t sum = 0;    // of their staleness (for the mean)
  std::int64_t max = 0;
  // Gradients applied without a read version (the sender pulled no value of
  // that shard first), which cannot be measured.
  std::uint64_t unmeasured = 0;
  // Synchronous training (core/ps/sync_steps.h): gradients that arrived for
  // a step the ps had already applied, dropped and never applied (a
  // straggler's, or one beyond the N a backup worker made unnecessary).
  std::uint64_t dropped = 0;

  void record(std::int64_t staleness);
  void merge(const StalenessHistogram& other);
  double mean() const { return total ? static_cast<double>(sum) / static_cast<double>(total) : 0.0; }
  bool empty() const { return total == 0 && unmeasured == 0 && dropped == 0; }
  // "max 3, mean 1.42 over 480 gradients; 0:12 1:200 2:250 3:18", the
  // buckets named by their range ("5-6", ">1024") and only those not empty;
  // then "(N unmeasured)" and "(N dropped as late)" when there are any.
  std::string describe() const;
  bool operator==(const StalenessHistogram&) const = default;
};

}  // namespace twinps
