#pragma once
// Where coroutine frames come from. Core's flows are coroutines, and a
// simulated 1,000-worker cluster creates and destroys millions of frames,
// most of them a few hundred bytes to a few KiB: above glibc's per-thread
// cache (1 KiB), so each went through malloc's bins (a fifth of such a run
// was malloc and free). Freed frames are kept per thread by size class and
// handed out again.
//
// Per thread (thread_local, no lock): real mode runs each node's executor on
// a thread of its own, and a frame may be freed on another thread than the
// one that allocated it (it then joins that thread's cache): every block is
// a plain ::operator new block, so any thread may release it. Under
// AddressSanitizer frames come straight from the heap, so a use after free
// of a frame is still caught.
#include <cstddef>
#include <new>
#include <utility>

namespace twinps::detail {

class FramePool {
 public:
  static void* allocate(std::size_t bytes);
  static void release(void* frame, std::size_t bytes) noexcept;
};

#if defined(__SANITIZE_ADDRESS__)
inline void* FramePool::allocate(std::size_t bytes) { return ::operator new(bytes); }
inline void FramePool::release(void* frame, std::size_t) noexcept { ::operator delete(frame); }
#else

namespace frame_pool {

constexpr std::size_t kGranule = 64;      // size classes: 64, 128, ... bytes
constexpr std::size_t kClasses = 128;     // up to 8 KiB; larger frames use the heap directly
constexpr std::size_t kMaxCachedBytes = 64u << 20;  // per thread: at most what was live at once before

struct FreeFrame {
  FreeFrame* next;
};

struct Cache {
  FreeFrame* free[kClasses] = {};
  std::size_t cached_bytes = 0;
  ~Cache();
};

// Set once the thread's cache is destroyed (thread exit): frames freed later
// on that thread go back to the heap. Trivial, so it outlives the cache.
inline thread_local bool cache_gone = false;
inline thread_local Cache cache;

inline Cache::~Cache() {
  cache_gone = true;
  for (FreeFrame*& head : free) {
    while (head) ::operator delete(std::exchange(head, head->next));
  }
}

inline std::size_t size_class(std::size_t bytes) { return (bytes + kGranule - 1) / kGranule - 1; }

}  // namespace frame_pool

inline void* FramePool::allocate(std::size_t bytes) {
  using namespace frame_pool;
  const std::size_t c = size_class(bytes);
  if (c >= kClasses || cache_gone) return ::operator new(bytes);
  if (FreeFrame* f = cache.free[c]) {
    cache.free[c] = f->next;
    cache.cached_bytes -= (c + 1) * kGranule;
    return f;
  }
  return ::operator new((c + 1) * kGranule);
}

inline void FramePool::release(void* frame, std::size_t bytes) noexcept {
  using namespace frame_pool;
  const std::size_t c = size_class(bytes);
  if (c >= kClasses || cache_gone || cache.cached_bytes + (c + 1) * kGranule > kMaxCachedBytes) {
    ::operator delete(frame);
    return;
  }
  auto* f = static_cast<FreeFrame*>(frame);
  f->next = cache.free[c];
  cache.free[c] = f;
  cache.cached_bytes += (c + 1) * kGranule;
}
#endif

// A promise type deriving from this allocates its coroutine's frame from the pool.
struct PooledFrame {
  static void* operator new(std::size_t bytes) { return FramePool::allocate(bytes); }
  static void operator delete(void* frame, std::size_t bytes) noexcept { FramePool::release(frame, bytes); }
};

}  // namespace twinps::detail
