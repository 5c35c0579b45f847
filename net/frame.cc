#include "net/frame.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <grpc/slice.h>

namespace twinps::net {
namespace {

constexpr std::uint32_t kAttachmentTag = (kAttachmentDataField << 3) | 2;  // length-delimited

std::size_t varint_size(std::uint64_t v) {
  std::size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

std::uint8_t* put_varint(std::uint64_t v, std::uint8_t* p) {
  while (v >= 0x80) {
    *p++ = static_cast<std::uint8_t>(v | 0x80);
    v >>= 7;
  }
  *p++ = static_cast<std::uint8_t>(v);
  return p;
}

void append_varint(std::uint64_t v, std::string* out) {
  std::uint8_t buf[10];
  out->append(reinterpret_cast<const char*>(buf), static_cast<std::size_t>(put_varint(v, buf) - buf));
}

void release_owner(void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }

// Reads the message byte by byte across gRPC's slices.
class Cursor {
 public:
  Cursor(const std::vector<grpc::Slice>& slices, std::uint64_t total) : slices_(slices), total_(total) {}

  std::uint64_t position() const { return pos_; }
  std::uint64_t remaining() const { return total_ - pos_; }

  bool byte(std::uint8_t* out) {
    while (index_ < slices_.size() && offset_ == slices_[index_].size()) next_slice();
    if (index_ == slices_.size()) return false;
    *out = slices_[index_].begin()[offset_++];
    ++pos_;
    return true;
  }

  bool varint(std::uint64_t* out) {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      std::uint8_t b;
      if (!byte(&b)) return false;
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *out = v;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }

  // Appends (or, with out == nullptr, skips) the next n bytes.
  bool take(std::uint64_t n, std::string* out) {
    if (n > remaining()) return false;
    while (n > 0) {
      while (offset_ == slices_[index_].size()) next_slice();
      const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(n, slices_[index_].size() - offset_));
      if (out) out->append(reinterpret_cast<const char*>(slices_[index_].begin() + offset_), chunk);
      offset_ += chunk;
      pos_ += chunk;
      n -= chunk;
    }
    return true;
  }

 private:
  void next_slice() {
    ++index_;
    offset_ = 0;
  }
  const std::vector<grpc::Slice>& slices_;
  std::uint64_t total_;
  std::size_t index_ = 0;
  std::size_t offset_ = 0;
  std::uint64_t pos_ = 0;
};

Status malformed(const std::string& why) { return absl::InvalidArgumentError("malformed message: " + why); }

}  // namespace

grpc::ByteBuffer encode_frame(const google::protobuf::MessageLite& envelope, const AttachmentWriter& attachments,
                              std::shared_ptr<const void> owner, std::size_t* bytes) {
  const std::size_t envelope_size = envelope.ByteSizeLong();
  const std::uint64_t total = attachments.total();
  const std::size_t header_size = envelope_size + (total ? varint_size(kAttachmentTag) + varint_size(total) : 0);

  std::vector<grpc::Slice> slices;
  slices.reserve(1 + attachments.spans().size());
  grpc_slice header = grpc_slice_malloc(header_size);
  std::uint8_t* p = GRPC_SLICE_START_PTR(header);
  p = envelope.SerializeWithCachedSizesToArray(p);
  if (total) {
    p = put_varint(kAttachmentTag, p);
    p = put_varint(total, p);
  }
  slices.emplace_back(header, grpc::Slice::STEAL_REF);
  for (const auto& span : attachments.spans()) {
    slices.emplace_back(const_cast<void*>(span.data), span.size, &release_owner,
                        new std::shared_ptr<const void>(owner));
  }
  *bytes = header_size + static_cast<std::size_t>(total);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

Status ReceivedFrame::parse(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* envelope) {
  slices_.clear();
  starts_.clear();
  attachment_begin_ = attachment_size_ = 0;
  if (!buffer.Valid()) return malformed("no message");
  if (auto st = buffer.Dump(&slices_); !st.ok()) return malformed(st.error_message());
  std::uint64_t total = 0;
  starts_.reserve(slices_.size());
  for (const auto& s : slices_) {
    starts_.push_back(total);
    total += s.size();
  }

  // Every top-level field except attachment_data is re-assembled into
  // `header` (small: tensor bytes live in attachment_data or, for small
  // tensors, are few), which protobuf then parses.
  std::string header;
  bool seen_attachments = false;
  Cursor in(slices_, total);
  while (in.remaining() > 0) {
    std::uint64_t tag;
    if (!in.varint(&tag) || tag > 0xffffffffu) return malformed("bad field tag");
    const std::uint64_t field = tag >> 3;
    const int wire_type = static_cast<int>(tag & 7);
    if (field == 0) return malformed("field number 0");
    if (wire_type == 2 && field == kAttachmentDataField) {
      std::uint64_t len;
      if (!in.varint(&len) || len > in.remaining()) return malformed("truncated attachment_data");
      if (seen_attachments) return malformed("attachment_data appears twice");
      seen_attachments = true;
      attachment_begin_ = in.position();
      attachment_size_ = len;
      in.take(len, nullptr);
      continue;
    }
    append_varint(tag, &header);
    switch (wire_type) {
      case 0: {
        std::uint64_t v;
        if (!in.varint(&v)) return malformed("truncated varint");
        append_varint(v, &header);
        break;
      }
      case 1:
        if (!in.take(8, &header)) return malformed("truncated fixed64");
        break;
      case 5:
        if (!in.take(4, &header)) return malformed("truncated fixed32");
        break;
      case 2: {
        std::uint64_t len;
        if (!in.varint(&len) || len > in.remaining()) return malformed("truncated length-delimited field");
        append_varint(len, &header);
        in.take(len, &header);
        break;
      }
      default:
        return malformed("unsupported wire type " + std::to_string(wire_type));
    }
  }
  if (!envelope->ParseFromString(header)) return malformed("the envelope does not parse");
  return absl::OkStatus();
}

void ReceivedFrame::copy(std::uint64_t offset, std::size_t len, void* dst) const {
  std::uint64_t pos = attachment_begin_ + offset;
  auto* out = static_cast<std::uint8_t*>(dst);
  // The slice holding `pos`: the last one starting at or before it.
  std::size_t i = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin()) - 1;
  while (len > 0) {
    const std::size_t in_slice = static_cast<std::size_t>(pos - starts_[i]);
    const std::size_t chunk = std::min(len, slices_[i].size() - in_slice);
    std::memcpy(out, slices_[i].begin() + in_slice, chunk);
    out += chunk;
    pos += chunk;
    len -= chunk;
    ++i;
  }
}

}  // namespace twinps::net
