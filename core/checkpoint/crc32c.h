#pragma once
// CRC-32C (Castagnoli), the checksum that guards checkpoint files. A small
// table-driven implementation: checkpoints are written seldom, so a byte at a
// time is fast enough and easy to check against the standard test vector
// (crc32c("123456789") == 0xE3069283).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace twinps {

// Continues a CRC over more data: crc32c_extend(crc32c(a), b) == crc32c(a + b).
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size);
inline std::uint32_t crc32c(const void* data, std::size_t size) { return crc32c_extend(0, data, size); }
inline std::uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

}  // namespace twinps
