#include "net/data_frame.h"

#include <bit>
#include <cstring>

namespace twinps::net::dataframe {

static_assert(std::endian::native == std::endian::little, "the frame header is little-endian, as is the host");

namespace {
template <typename T>
void put(std::uint8_t* out, std::size_t at, T v) {
  std::memcpy(out + at, &v, sizeof v);
}
template <typename T>
T get(const std::uint8_t* in, std::size_t at) {
  T v;
  std::memcpy(&v, in + at, sizeof v);
  return v;
}
}  // namespace

void encode_header(const Header& h, std::uint8_t* out) {
  put<std::uint32_t>(out, 0, kMagic);
  put<std::uint8_t>(out, 4, kVersion);
  put<std::uint8_t>(out, 5, static_cast<std::uint8_t>(h.kind));
  put<std::uint8_t>(out, 6, h.flags);
  put<std::uint8_t>(out, 7, 0);
  put<std::uint64_t>(out, 8, h.call_id);
  put<std::uint32_t>(out, 16, h.envelope_bytes);
  put<std::uint32_t>(out, 20, (h.flags & kInRing) ? h.ring_offset : 0);
  put<std::uint64_t>(out, 24, h.attachment_bytes);
}

bool decode_header(const std::uint8_t* in, Header* out) {
  if (get<std::uint32_t>(in, 0) != kMagic || get<std::uint8_t>(in, 4) != kVersion) return false;
  if (get<std::uint8_t>(in, 7) != 0) return false;
  const auto kind = get<std::uint8_t>(in, 5);
  if (kind < static_cast<std::uint8_t>(Kind::kHello) || kind > static_cast<std::uint8_t>(Kind::kHelloAck)) return false;
  const auto flags = get<std::uint8_t>(in, 6);
  if (flags & ~(kTransportError | kInRing)) return false;
  const auto ring_offset = get<std::uint32_t>(in, 20);
  if (!(flags & kInRing) && ring_offset != 0) return false;
  out->kind = static_cast<Kind>(kind);
  out->flags = flags;
  out->call_id = get<std::uint64_t>(in, 8);
  out->envelope_bytes = get<std::uint32_t>(in, 16);
  out->attachment_bytes = get<std::uint64_t>(in, 24);
  out->ring_offset = ring_offset;
  return true;
}

}  // namespace twinps::net::dataframe
