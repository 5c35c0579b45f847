#pragma once
// The bytes of one RPC message: a serialized RpcRequest / RpcResponse whose
// attachment_data (field 15, always last) is built from slices that point at
// the tensors' own memory. Sending copies no tensor byte in user space;
// receiving copies each tensor once, from gRPC's read buffers into its Matrix.
//
// A received frame may come from anyone: parse() accepts any valid
// serialization of the envelope (fields in any order), and answers
// INVALID_ARGUMENT for anything else — truncated varints or fields, groups,
// a repeated attachment_data, an envelope protobuf cannot parse.
#include <cstdint>
#include <memory>
#include <vector>

#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include "core/runtime/status.h"
#include "net/convert.h"

namespace twinps::net {

inline constexpr int kAttachmentDataField = 15;

// Builds the message: `envelope` (whose attachment_data must be empty)
// followed by the writer's spans as attachment_data. `owner` keeps the spans'
// memory alive until gRPC has sent them. Sets *bytes to the message size.
grpc::ByteBuffer encode_frame(const google::protobuf::MessageLite& envelope, const AttachmentWriter& attachments,
                              std::shared_ptr<const void> owner, std::size_t* bytes);

// A received message's attachment_data, read in place from gRPC's slices.
class ReceivedFrame final : public AttachmentReader {
 public:
  // Parses `buffer` into `envelope` (all fields but attachment_data) and keeps
  // references to the attachment bytes.
  Status parse(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* envelope);

  std::uint64_t size() const override { return attachment_size_; }
  void copy(std::uint64_t offset, std::size_t len, void* dst) const override;

 private:
  std::vector<grpc::Slice> slices_;
  std::vector<std::uint64_t> starts_;  // offset of each slice in the message
  std::uint64_t attachment_begin_ = 0;
  std::uint64_t attachment_size_ = 0;
};

}  // namespace twinps::net
