#include "core/checkpoint/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace twinps {
namespace {

// Reflected Castagnoli polynomial.
constexpr std::uint32_t kPolynomial = 0x82F63B78u;

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr auto kTable = make_table();

#if defined(__x86_64__)
// SSE 4.2's CRC32 instruction computes exactly this CRC (Castagnoli,
// reflected) on the same running state as the table, eight bytes at a time.
// Compiled for SSE 4.2 here only and chosen at run time, so the binary still
// runs on processors without it.
__attribute__((target("sse4.2"))) std::uint32_t extend_sse42(std::uint32_t state, const unsigned char* p,
                                                              std::size_t size) {
  std::uint64_t c = state;
  for (; size >= 8; p += 8, size -= 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<std::uint32_t>(c);
  for (; size > 0; ++p, --size) c32 = _mm_crc32_u8(c32, *p);
  return c32;
}

bool has_sse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

namespace detail {
std::uint32_t crc32c_extend_bytewise(std::uint32_t crc, const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = kTable[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}
}  // namespace detail

std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t size) {
#if defined(__x86_64__)
  if (has_sse42()) return ~extend_sse42(~crc, static_cast<const unsigned char*>(data), size);
#endif
  return detail::crc32c_extend_bytewise(crc, data, size);
}

}  // namespace twinps
