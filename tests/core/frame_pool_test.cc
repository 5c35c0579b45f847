// Coroutine frames are recycled per thread by size class (frame_pool.h): a
// freed frame is handed out again for a frame of its class, frames of other
// classes and oversized ones are not mixed up, the cache is bounded, and a
// frame freed on another thread is safe to reuse there. Under
// AddressSanitizer the pool is the plain heap, and only the last holds.
#include "core/runtime/frame_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace twinps::detail {
namespace {

#if !defined(__SANITIZE_ADDRESS__)
TEST(FramePoolTest, AFreedFrameIsHandedOutAgainForAFrameOfItsSizeClass) {
  void* a = FramePool::allocate(300);
  FramePool::release(a, 300);
  EXPECT_EQ(FramePool::allocate(320), a) << "300 and 320 bytes share the 320-byte class";
  void* b = FramePool::allocate(330);  // the next class: a fresh block
  EXPECT_NE(b, a);
  FramePool::release(a, 320);
  FramePool::release(b, 330);
}

TEST(FramePoolTest, FramesAboveTheLargestClassGoStraightToTheHeap) {
  const std::size_t big = frame_pool::kClasses * frame_pool::kGranule + 1;
  const std::size_t cached_before = frame_pool::cache.cached_bytes;
  void* a = FramePool::allocate(big);
  std::memset(a, 1, big);  // the whole size is usable
  FramePool::release(a, big);
  EXPECT_EQ(frame_pool::cache.cached_bytes, cached_before) << "an oversized frame is not cached";
}

TEST(FramePoolTest, TheCacheStaysWithinItsBound) {
  std::vector<void*> frames;
  const std::size_t size = 4096;
  for (std::size_t i = 0; i < 2 * frame_pool::kMaxCachedBytes / size; ++i) frames.push_back(FramePool::allocate(size));
  for (void* f : frames) FramePool::release(f, size);
  EXPECT_LE(frame_pool::cache.cached_bytes, frame_pool::kMaxCachedBytes);
  EXPECT_GT(frame_pool::cache.cached_bytes, frame_pool::kMaxCachedBytes / 2);
}
#endif

// Frames allocated on one thread and destroyed on another (a node's task
// torn down by the thread that owns the node) are reused where they died.
TEST(FramePoolTest, FramesFreedOnAnotherThreadAreReusedThere) {
  std::vector<void*> frames;
  for (int i = 0; i < 64; ++i) frames.push_back(FramePool::allocate(512));
  bool reused = false;
  std::thread other([&] {
    for (void* f : frames) FramePool::release(f, 512);
    void* f = FramePool::allocate(512);
    reused = std::find(frames.begin(), frames.end(), f) != frames.end();
    std::memset(f, 0xab, 512);
    FramePool::release(f, 512);
  });
  other.join();
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_TRUE(reused);
#else
  (void)reused;
#endif
}

}  // namespace
}  // namespace twinps::detail
