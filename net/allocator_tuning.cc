#include "net/allocator_tuning.h"

// Any C library header defines __GLIBC__ on glibc (through <features.h>);
// without one, the check below is false and the tuning silently does nothing.
#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace twinps::net {

bool tune_allocator_for_large_tensors() {
#if defined(__GLIBC__)
  // 1 GiB where the C library takes it (glibc 2.36 does), else its old
  // maximum of 32 MiB: a 32 MiB tensor's buffer is a little over 32 MiB.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, 1 << 30) == 1 || mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

}  // namespace twinps::net
