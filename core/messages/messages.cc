#include "core/messages/messages.h"

namespace twinps {
namespace {

constexpr std::size_t kHeader = 32;  // framing, ids, status

std::size_t size_of(const RowIds& r) { return r.size() * sizeof(std::int64_t); }
// A payload's values, or the bytes a meta tensor's would take: the simulator
// charges a timing-only message what the real one would cost.
std::size_t payload_size(const Matrix& values, const std::optional<MetaTensor>& meta) {
  return byte_size(values) + (meta ? byte_size(*meta) : 0);
}
std::size_t size_of(const ShardState& s) {
  std::size_t n = s.spec.name.size() + 48 + byte_size(s.value) + (s.spec.optimizer ? 96 : 0);
  for (const auto& m : s.slots) n += byte_size(m);
  return n;
}
std::size_t size_of(const std::vector<Value>& vs) {
  std::size_t n = 0;
  for (const auto& v : vs) n += 8 + byte_size(v);
  return n;
}

struct RequestSize {
  std::size_t operator()(const HealthRequest&) const { return 0; }
  std::size_t operator()(const CreateShardsRequest& r) const {
    std::size_t n = 64;
    for (const auto& s : r.shards) n += size_of(s);
    return n;
  }
  std::size_t operator()(const PullRequest& r) const {
    std::size_t n = 0;
    for (const auto& i : r.items) n += 8 + size_of(i.rows);
    return n;
  }
  std::size_t operator()(const PushRequest& r) const {
    std::size_t n = 16 + (*this)(r.then_pull) + (r.sync_step == kNoSyncStep ? 0 : 8);
    for (const auto& u : r.updates)
      n += 16 + size_of(u.rows) + payload_size(u.values, u.meta);
    return n;
  }
  std::size_t operator()(const ExportShardsRequest& r) const { return 4 * r.shards.size(); }
  std::size_t operator()(const FenceRequest&) const { return 16; }
  std::size_t operator()(const ApplySyncStepRequest&) const { return 24; }
  std::size_t operator()(const SetupWorkerRequest& r) const {
    std::size_t n = 16;
    for (const auto& v : r.variables) n += v.name.size() + 8 * v.shape.size() + 24 * v.shards.size();
    return n;
  }
  std::size_t operator()(const CreateResourceRequest& r) const { return 16 + r.fn.size() + size_of(r.args); }
  std::size_t operator()(const RunClosureRequest& r) const {
    return 32 + r.fn.size() + size_of(r.args) + (r.sync_step == kNoSyncStep ? 0 : 8);
  }
};

struct ResponseSize {
  std::size_t operator()(const EmptyResponse&) const { return 0; }
  std::size_t operator()(const HealthResponse&) const { return 16; }
  std::size_t operator()(const PullResponse& r) const {
    std::size_t n = 0;
    for (const auto& i : r.items) n += 8 + payload_size(i.values, i.meta);
    return n;
  }
  std::size_t operator()(const PushResponse& r) const { return 1 + (*this)(r.pulled); }
  std::size_t operator()(const ExportShardsResponse& r) const {
    std::size_t n = 0;
    for (const auto& s : r.shards) n += size_of(s);
    return n;
  }
  std::size_t operator()(const RunClosureResponse& r) const { return 8 + byte_size(r.result); }
};

struct RequestName {
  const char* operator()(const HealthRequest&) const { return "Health"; }
  const char* operator()(const CreateShardsRequest&) const { return "CreateShards"; }
  const char* operator()(const PullRequest&) const { return "Pull"; }
  const char* operator()(const PushRequest&) const { return "Push"; }
  const char* operator()(const ExportShardsRequest&) const { return "ExportShards"; }
  const char* operator()(const FenceRequest&) const { return "Fence"; }
  const char* operator()(const ApplySyncStepRequest&) const { return "ApplySyncStep"; }
  const char* operator()(const SetupWorkerRequest&) const { return "SetupWorker"; }
  const char* operator()(const CreateResourceRequest&) const { return "CreateResource"; }
  const char* operator()(const RunClosureRequest&) const { return "RunClosure"; }
};

// Rows and items of the data-plane messages; control messages count none.
struct RequestCounts {
  void operator()(const PullRequest& r) {
    for (const auto& i : r.items) {
      ++shape.items;
      if (i.all_rows) continue;
      const auto rows = static_cast<std::int64_t>(i.rows.size());
      shape.rows += rows;
      shape.rows_read += rows;
      ++shape.items_by_id;
      ++shape.items_by_id_read;
    }
  }
  void operator()(const PushRequest& r) {
    for (const auto& u : r.updates) {
      ++shape.items;
      if (!u.sparse) continue;
      shape.rows += static_cast<std::int64_t>(u.rows.size());
      ++shape.items_by_id;
    }
    (*this)(r.then_pull);
  }
  template <typename T>
  void operator()(const T&) {}
  MessageShape& shape;
};

struct ResponseItems {
  void operator()(const PullResponse& r) { shape.items += static_cast<std::int64_t>(r.items.size()); }
  void operator()(const PushResponse& r) { shape.items += static_cast<std::int64_t>(r.pulled.items.size()); }
  template <typename T>
  void operator()(const T&) {}
  MessageShape& shape;
};

}  // namespace

MessageShape message_shape(const Request& r) {
  MessageShape s;
  s.bytes = wire_size(r);
  s.data_plane = std::holds_alternative<PullRequest>(r) || std::holds_alternative<PushRequest>(r);
  std::visit(RequestCounts{s}, r);
  return s;
}

MessageShape message_shape(const Response& r, const MessageShape& request) {
  MessageShape s;
  s.bytes = wire_size(r);
  s.data_plane = request.data_plane;
  s.rows = request.rows_read;
  s.items_by_id = request.items_by_id_read;
  std::visit(ResponseItems{s}, r);
  return s;
}

const char* request_name(const Request& r) { return std::visit(RequestName{}, r); }
std::size_t wire_size(const Request& r) { return kHeader + std::visit(RequestSize{}, r); }
std::size_t wire_size(const Response& r) { return kHeader + std::visit(ResponseSize{}, r); }

}  // namespace twinps
