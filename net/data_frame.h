#pragma once
// The data plane's frames (net/data_plane.h). A frame is a fixed 32-byte
// header, an envelope protobuf (RpcRequest, RpcResponse or DataPlaneHello,
// net/proto/twinps.proto; attachment_data unused), then the attachment bytes:
// the out-of-band tensors (AttachmentWriter) back to back, which the sender
// writes straight from tensor memory and the receiver reads straight into the
// destination tensors.
//
// Header, little-endian:
//   0  u32 magic "TWDP"       8  u64 call id (chosen by the caller, per connection)
//   4  u8  version (2)       16  u32 envelope bytes
//   5  u8  kind              20  u32 ring offset (kInRing), else 0
//   6  u8  flags             24  u64 attachment bytes
//   7  u8  reserved (0)
//
// A connection starts with a handshake (net/security.h): the callee's
// kChallenge, the caller's kHello (with its proof of the cluster token), the
// callee's kHelloAck (its own proof, or an error); a caller sends nothing
// else before a valid ack, a callee serves nothing before a valid hello.
// Then the caller sends kRequest and kCancel frames, the callee kResponse
// frames (in any order, matched by call id). A response flagged kTransportError carries, in
// RpcResponse.status, an error of the callee's transport (malformed or
// oversized request, no service): the caller attributes it to the callee. A
// header that is not of this protocol ends the connection; a well-formed
// frame with a bad or oversized body is answered and skipped, so the
// connection goes on.
//
// A request or response flagged kInRing (only between tasks of one host,
// once both ends mapped the other's ring in the handshake) carries its
// attachment bytes in the sender's shared ring (net/shared_ring.h) at the
// header's ring offset instead of on the socket: the socket carries the
// header and the envelope only.
#include <cstddef>
#include <cstdint>

namespace twinps::net::dataframe {

inline constexpr std::uint32_t kMagic = 0x50445754;  // "TWDP" as little-endian bytes
inline constexpr std::uint8_t kVersion = 2;  // 2: the authenticated handshake
inline constexpr std::size_t kHeaderBytes = 32;

enum class Kind : std::uint8_t { kHello = 1, kRequest = 2, kResponse = 3, kCancel = 4, kChallenge = 5, kHelloAck = 6 };
inline constexpr std::uint8_t kTransportError = 1;  // flag on kResponse
inline constexpr std::uint8_t kInRing = 2;          // flag on kRequest and kResponse

struct Header {
  Kind kind = Kind::kRequest;
  std::uint8_t flags = 0;
  std::uint64_t call_id = 0;
  std::uint32_t envelope_bytes = 0;
  std::uint64_t attachment_bytes = 0;
  std::uint32_t ring_offset = 0;  // with kInRing
};

void encode_header(const Header& h, std::uint8_t* out);  // writes kHeaderBytes
// False if the bytes are not a header of this protocol and version.
bool decode_header(const std::uint8_t* in, Header* out);

}  // namespace twinps::net::dataframe
