#include "core/checkpoint/checkpoint_file.h"

#include <cstdio>
#include <cstring>

#include "core/checkpoint/crc32c.h"

namespace twinps {
namespace {

constexpr char kMagic[8] = {'T', 'W', 'P', 'S', 'C', 'K', 'P', 'T'};

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}
std::uint64_t get_le(std::string_view in, std::size_t offset, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  return v;
}

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

}  // namespace

std::string frame_checkpoint(std::string_view payload) {
  std::string out(kMagic, sizeof kMagic);
  out.reserve(kCheckpointHeaderSize + payload.size());
  put_le(out, kCheckpointFormatVersion, 4);
  put_le(out, payload.size(), 8);
  std::uint32_t crc = crc32c_extend(crc32c(out.data() + 8, 12), payload.data(), payload.size());
  put_le(out, crc, 4);
  out.append(payload);
  return out;
}

StatusOr<std::string_view> unframe_checkpoint(std::string_view bytes, const std::string& file) {
  auto loss = [&](const std::string& why) { return absl::DataLossError("checkpoint file '" + file + "' " + why); };
  if (bytes.size() < sizeof kMagic) {
    // A short file that starts like a checkpoint was cut off; anything else is not one.
    const bool prefix = bytes.empty() || std::memcmp(bytes.data(), kMagic, bytes.size()) == 0;
    return loss(prefix ? "is truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the magic"
                       : std::string("has the wrong magic: it is not a twinps checkpoint"));
  }
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return loss("has the wrong magic: it is not a twinps checkpoint");
  if (bytes.size() < kCheckpointHeaderSize)
    return loss("is truncated: " + std::to_string(bytes.size()) + " bytes, shorter than the " +
                std::to_string(kCheckpointHeaderSize) + "-byte header");
  const auto version = static_cast<std::uint32_t>(get_le(bytes, 8, 4));
  const std::uint64_t length = get_le(bytes, 12, 8);
  const auto stored_crc = static_cast<std::uint32_t>(get_le(bytes, 20, 4));
  const std::uint64_t actual = bytes.size() - kCheckpointHeaderSize;
  if (actual < length)
    return loss("is truncated: the header promises " + std::to_string(length) + " payload bytes, the file holds " +
                std::to_string(actual));
  if (actual > length)
    return loss("has " + std::to_string(actual - length) + " bytes beyond the " + std::to_string(length) +
                "-byte payload its header declares");
  const std::string_view payload = bytes.substr(kCheckpointHeaderSize);
  const std::uint32_t crc = crc32c_extend(crc32c(bytes.data() + 8, 12), payload.data(), payload.size());
  if (crc != stored_crc)
    return loss("fails its checksum (stored " + hex(stored_crc) + ", computed " + hex(crc) + "): it is corrupt");
  if (version != kCheckpointFormatVersion)
    return absl::FailedPreconditionError("checkpoint file '" + file + "' has format version " +
                                         std::to_string(version) + "; this build reads version " +
                                         std::to_string(kCheckpointFormatVersion));
  return payload;
}

}  // namespace twinps
