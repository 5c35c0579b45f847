#pragma once
// CRC-32C (Castagnoli), the checksum that guards checkpoint files and every
// TFRecord frame. Reading TFRecords checks each record, so it is on the
// training input's hot path: the processor's CRC32 instruction (SSE 4.2)
// does it where present (a byte-at-a-time table reading a click log spent 29 %
// of a sparse-embedding run's CPU), the table elsewhere. Both are checked
// against the standard test vector (crc32c("123456789") == 0xE3069283).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace twinps {

// Continues a CRC over more data: crc32c_extend(crc32c(a), b) == crc32c(a + b).
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);
inline std::uint32_t crc32c(const void* data, std::size_t size) { return crc32c_extend(0, data, size); }
inline std::uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

namespace detail {
// The portable table version (what crc32c_extend falls back to); tests
// compare the two.
std::uint32_t crc32c_extend_bytewise(std::uint32_t crc, const void* data, std::size_t size);
}  // namespace detail

}  // namespace twinps
