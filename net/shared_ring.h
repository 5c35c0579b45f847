#pragma once
// A one-way ring of shared memory between two processes of one host, for the
// data plane's tensors (net/data_plane.h). The sender copies a frame's
// tensors into its ring and sends only the frame's header and envelope over
// the Unix socket, naming where in the ring they lie; the receiver copies
// them out into the destination tensors and hands the room back. Against
// the socket's two copies through the kernel (into a socket buffer, out of
// it) this is two plain memcpys, without the kernel's per-packet work.
//
// The ring is a memfd (it goes with the last process that maps it: nothing
// to clean up after a SIGKILL). The receiver maps it through
// /proc/<pid>/fd/<n>, the pid coming from the kernel (SO_PEERCRED on the
// Unix socket), so only the peer process's own file can be mapped.
//
// Regions are taken and handed back in the order of the frames on the
// socket, so the ring needs one counter: bytes released by the receiver,
// stored at the front of the shared file. A region never wraps: one that
// would is placed at the ring's front and the bytes skipped count as used.
// When the receiver has released everything, the next region goes to the
// front too, so the pages a ring touches are those in flight at once.
// A sender that finds no room sends the tensors over the socket instead: no
// one ever waits for room.
//
// Threading: each end is used by one thread (its connection's executor).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <sys/types.h>

#include "core/runtime/status.h"

namespace twinps::net {

// A shared mapping of a memfd, unmapped and closed on destruction.
class SharedMapping {
 public:
  SharedMapping(int fd, char* base, std::size_t bytes) : fd_(fd), base_(base), bytes_(bytes) {}
  ~SharedMapping();
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  int fd() const { return fd_; }
  char* base() const { return base_; }
  std::size_t bytes() const { return bytes_; }

 private:
  int fd_;
  char* base_;
  std::size_t bytes_;
};

// The sending end: owns the memfd.
class RingWriter {
 public:
  // A ring of `capacity` bytes (pages are only backed as they are first written).
  static StatusOr<std::unique_ptr<RingWriter>> create(std::size_t capacity);
  int fd() const { return map_->fd(); }
  std::size_t capacity() const { return capacity_; }
  // Room for `bytes` after what the receiver has released: the offset to
  // copy them to (then name it in the frame), or nullopt when there is none.
  std::optional<std::uint32_t> reserve(std::size_t bytes);
  char* at(std::uint32_t offset) const { return data_ + offset; }

 private:
  RingWriter(std::unique_ptr<SharedMapping> map, std::size_t capacity);
  std::unique_ptr<SharedMapping> map_;
  std::uint64_t* released_;  // written by the receiver
  char* data_;
  std::size_t capacity_;
  std::uint64_t head_ = 0;  // bytes taken so far, skipped ones included
};

// The receiving end: the peer's memfd, mapped.
class RingReader {
 public:
  // Maps file descriptor `fd` of process `pid`, which must be a ring of
  // `capacity` bytes.
  static StatusOr<std::unique_ptr<RingReader>> open(pid_t pid, int fd, std::uint64_t capacity);
  // The next region, which the frame says starts at `offset` and holds
  // `bytes`; nullptr when it cannot be (out of the ring, or not where the
  // previous region ended): the peer does not keep the protocol.
  const char* next(std::uint32_t offset, std::uint64_t bytes);
  // The region `next` gave is read: its room goes back to the writer.
  void release();

 private:
  RingReader(std::unique_ptr<SharedMapping> map, std::size_t capacity);
  std::unique_ptr<SharedMapping> map_;
  std::uint64_t* released_;
  const char* data_;
  std::size_t capacity_;
  std::uint64_t consumed_ = 0;  // as released_, this end's copy
  std::uint64_t pending_end_ = 0;  // of the region `next` gave, not yet released
};

// The pid of the process at the other end of a connected Unix socket; 0 if unknown.
pid_t unix_socket_peer_pid(int socket_fd);

}  // namespace twinps::net
