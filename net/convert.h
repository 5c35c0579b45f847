#pragma once
// Core structs <-> their wire form (net/proto/twinps.proto), 1:1.
//
// to_proto() never fails. from_proto() validates everything a peer could get
// wrong — tensor byte lengths against rows*cols, negative or absurd
// dimensions, unknown enum values, unset oneofs, attachment ranges — and
// answers INVALID_ARGUMENT naming the field ("Request.push.updates[1].values:
// ..."), never crashes and never allocates more than the message carries.
//
// Tensor bytes travel in-band (Tensor.data, one copy) or, when an
// AttachmentWriter is given and the tensor is large enough, out of band: the
// writer records where the bytes live without copying them, and the transport
// hands that memory to gRPC as it is. On the way in an AttachmentReader
// supplies out-of-band bytes; without one, a tensor that refers to an
// attachment is INVALID_ARGUMENT.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/messages/messages.h"
#include "core/messages/value.h"
#include "core/runtime/status.h"
#include "net/proto/twinps.pb.h"

namespace twinps::net {

namespace wire = ::twinps::wire;

// Collects out-of-band tensor bytes while a message is encoded. The memory
// is referenced, not copied: it must outlive the encoded message's use.
class AttachmentWriter {
 public:
  // Tensors of at least `threshold` bytes go out of band (smaller ones are cheaper to copy).
  static constexpr std::size_t kDefaultThreshold = 2048;
  explicit AttachmentWriter(std::size_t threshold = kDefaultThreshold) : threshold_(threshold) {}

  struct Span {
    const void* data;
    std::size_t size;
  };

  bool wants(std::size_t bytes) const { return bytes >= threshold_ && bytes > 0; }
  // Appends `size` bytes at `data`; returns their offset in attachment_data.
  std::uint64_t add(const void* data, std::size_t size) {
    std::uint64_t offset = total_;
    spans_.push_back({data, size});
    total_ += size;
    return offset;
  }
  const std::vector<Span>& spans() const { return spans_; }
  std::uint64_t total() const { return total_; }

 private:
  std::size_t threshold_;
  std::vector<Span> spans_;
  std::uint64_t total_ = 0;
};

// Out-of-band bytes of a received message.
class AttachmentReader {
 public:
  virtual ~AttachmentReader() = default;
  virtual std::uint64_t size() const = 0;
  // Copies [offset, offset + len) to `dst`; the caller has checked the range.
  virtual void copy(std::uint64_t offset, std::size_t len, void* dst) const = 0;

  // Claims `bytes` of the attachments for one tensor, before its memory is
  // allocated; false once the tensors together would claim more than size().
  // Tensors whose ranges overlap would otherwise let a small message make
  // the receiver allocate (and copy) its attachments many times over.
  bool claim(std::uint64_t bytes) const {
    if (bytes > size() - claimed_) return false;
    claimed_ += bytes;
    return true;
  }

 private:
  mutable std::uint64_t claimed_ = 0;
};

// Attachments held in one contiguous buffer (e.g. a parsed attachment_data).
class ContiguousAttachments final : public AttachmentReader {
 public:
  explicit ContiguousAttachments(std::string_view bytes) : bytes_(bytes) {}
  std::uint64_t size() const override { return bytes_.size(); }
  void copy(std::uint64_t offset, std::size_t len, void* dst) const override;

 private:
  std::string_view bytes_;
};

// Concatenates the writer's spans (for tests and for callers that want one buffer).
std::string flatten(const AttachmentWriter& writer);

// ------------------------------------------------------------------ encode
void to_proto(const TaskId& in, wire::TaskId* out);
void to_proto(const Matrix& in, wire::Tensor* out, AttachmentWriter* attachments = nullptr);
void to_proto(const Fence& in, wire::Fence* out);
void to_proto(const Status& in, wire::Status* out);  // code, message and every payload
void to_proto(const Value& in, wire::Value* out, AttachmentWriter* attachments = nullptr);
void to_proto(const ShardSpec& in, wire::ShardSpec* out);
void to_proto(const ShardState& in, wire::ShardState* out, AttachmentWriter* attachments = nullptr);
void to_proto(const ShardPlacement& in, wire::ShardPlacement* out);
void to_proto(const VariableLayout& in, wire::VariableLayout* out);
void to_proto(const LearningRateSchedule& in, wire::LearningRateSchedule* out);
void to_proto(const OptimizerConfig& in, wire::OptimizerConfig* out);
void to_proto(const Request& in, wire::Request* out, AttachmentWriter* attachments = nullptr);
void to_proto(const Response& in, wire::Response* out, AttachmentWriter* attachments = nullptr);

// Meta shards and meta tensors (timing-only simulation: a shape, no values;
// MetaTensor in core/tensor/tensor.h) exist only in the simulator and have
// nothing to send. OK for a message without any; otherwise INVALID_ARGUMENT
// naming the first field that holds one ("Request.push.updates[1].meta: ...").
// Both transports check every message before encoding it (to_proto would
// drop them silently): a simulator-only message fails loudly, never arrives
// as an empty tensor.
Status check_sendable(const Request& in);
Status check_sendable(const Response& in);

// ------------------------------------------------------------------ decode
// Each returns OK and fills `out`, or INVALID_ARGUMENT naming the bad field.
Status from_proto(const wire::TaskId& in, TaskId* out);
Status from_proto(const wire::Tensor& in, Matrix* out, const AttachmentReader* attachments = nullptr);
Status from_proto(const wire::Fence& in, Fence* out);
Status from_proto(const wire::Status& in, Status* out);
Status from_proto(const wire::Value& in, Value* out, const AttachmentReader* attachments = nullptr);
Status from_proto(const wire::ShardSpec& in, ShardSpec* out);
Status from_proto(const wire::ShardState& in, ShardState* out, const AttachmentReader* attachments = nullptr);
Status from_proto(const wire::ShardPlacement& in, ShardPlacement* out);
Status from_proto(const wire::VariableLayout& in, VariableLayout* out);
Status from_proto(const wire::LearningRateSchedule& in, LearningRateSchedule* out);
Status from_proto(const wire::OptimizerConfig& in, OptimizerConfig* out);
Status from_proto(const wire::Request& in, Request* out, const AttachmentReader* attachments = nullptr);
Status from_proto(const wire::Response& in, Response* out, const AttachmentReader* attachments = nullptr);

}  // namespace twinps::net
