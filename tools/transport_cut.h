#pragma once
// Partitions on real processes, as a transport-level cut: every task's
// outgoing calls go through a FaultyTransport (core/faults/) that loses the
// request of any call to a task it is cut from, so the caller sees what a
// silent network gives it: UNAVAILABLE after the loss-detection time (gRPC's
// keepalive noticing a peer that stopped answering), or DEADLINE_EXCEEDED at
// the call's deadline. That is how the simulator's partition behaves too.
//
// Why a cut in the transport rather than network namespaces with their links
// set down: namespaces need CAP_NET_ADMIN (root or a user namespace), which
// CI containers and developers' machines often refuse, and a test that skips
// there shows nothing. A cut needs no privilege, acts on exactly the pairs of
// tasks the scenario names (both directions: each side cuts its own calls),
// and heals at once. What it does not model: the kernel's own timeouts on a
// connection already open (a call in flight when the cut starts still gets
// its reply).
//
// The launcher (tools/process_cluster.h) tells each `twinps serve` process
// whom it is cut from through a file (--cut-file), which the server reads
// again whenever it changes (it looks every 100 ms); the coordinator's own cut
// is set in its process directly.
#include <memory>
#include <set>
#include <string>

#include "core/cluster/task_id.h"
#include "core/runtime/executor.h"
#include "core/runtime/status.h"
#include "core/runtime/transport.h"

namespace twinps::cli {

class TransportCut {
 public:
  TransportCut() : cut_(std::make_shared<std::set<TaskId>>()) {}
  // `inner` wrapped: calls to a task in the cut set are lost. The cut set may
  // change at any time on the executor's thread.
  std::unique_ptr<Transport> wrap(Executor& executor, Transport& inner, Duration loss_detection) const;
  void set(std::set<TaskId> cut) { *cut_ = std::move(cut); }
  const std::set<TaskId>& tasks() const { return *cut_; }

 private:
  std::shared_ptr<std::set<TaskId>> cut_;
};

// A cut file: one task name per line ("chief", "worker:1", "ps:0"). Written
// whole (to a temporary file renamed over it), so a reader never sees half.
Status write_cut_file(const std::string& path, const std::set<TaskId>& tasks);
StatusOr<std::set<TaskId>> read_cut_file(const std::string& path);

// Watches a cut file from a server's loop: reload() reads it again when its
// modification time or size changed, and says whether the set changed.
class CutFileWatcher {
 public:
  CutFileWatcher(std::string path, TransportCut& cut) : path_(std::move(path)), cut_(cut) {}
  bool reload();

 private:
  std::string path_;
  TransportCut& cut_;
  std::string last_stamp_;
};

}  // namespace twinps::cli
