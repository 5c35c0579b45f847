// net/allocator_tuning.h: after the tuning, a large tensor's memory freed and
// allocated again is not faulted in again (every twinps process relies on
// it to receive each step's tensors into pages it already has).
#include "net/allocator_tuning.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdlib>
#include <thread>

#include "core/tensor/tensor.h"

namespace twinps::net {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizersAllocate = true;  // they bring their own allocator
#else
constexpr bool kSanitizersAllocate = false;
#endif
#if defined(__GLIBC__)
constexpr bool kGlibc = true;
#else
constexpr bool kGlibc = false;
#endif

long minor_faults_of_this_thread() {
  rusage usage{};
  getrusage(RUSAGE_THREAD, &usage);
  return usage.ru_minflt;
}

// Minor faults while a rows x 1024 tensor is allocated and filled, the
// second time (the first maps the memory in).
long faults_of_a_second_tensor(Eigen::Index rows) {
  for (int round = 0;; ++round) {
    const long before = minor_faults_of_this_thread();
    {
      Matrix tensor = Matrix::Constant(rows, 1024, 1.0f);
      asm volatile("" : : "r"(tensor.data()) : "memory");  // the fill must happen
    }
    if (round == 1) return minor_faults_of_this_thread() - before;
  }
}

TEST(AllocatorTuningTest, ALargeTensorsMemoryIsReusedWithoutFaults) {
  if (kSanitizersAllocate) GTEST_SKIP() << "the sanitizers bring their own allocator";
  if (!kGlibc) GTEST_SKIP() << "glibc only";
  ASSERT_TRUE(tune_allocator_for_large_tensors());
  // 48 MiB: past glibc's default mmap threshold and its old maximum of 32 MiB
  // (12,288 pages: each would fault if the memory went back to the kernel).
  constexpr Eigen::Index kRows = 12 * 1024;
  EXPECT_LT(faults_of_a_second_tensor(kRows), 256) << "on the main thread";
  long on_thread = -1;
  std::thread([&] { on_thread = faults_of_a_second_tensor(kRows / 4); }).join();  // 12 MiB on a thread's arena
  EXPECT_LT(on_thread, 256) << "on another thread";
}

}  // namespace
}  // namespace twinps::net
