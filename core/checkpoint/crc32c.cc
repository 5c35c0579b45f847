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

// Appending n zero bytes to a CRC state (the raw state, between the
// inversions) is linear in that state, so it is four table lookups, one per
// byte of the state: entry [k][v] is the state v << 8k moved past n zeros.
// This is what lets three lanes run independently and be joined.
struct ShiftTable {
  std::array<std::array<std::uint32_t, 256>, 4> by_byte{};
  constexpr std::uint32_t operator()(std::uint32_t state) const {
    return by_byte[0][state & 0xffu] ^ by_byte[1][(state >> 8) & 0xffu] ^ by_byte[2][(state >> 16) & 0xffu] ^
           by_byte[3][state >> 24];
  }
};

constexpr ShiftTable make_shift_table(std::size_t zeros) {
  // The 32 one-bit states past `zeros` zero bytes; any state is their sum.
  std::array<std::uint32_t, 32> basis{};
  for (int bit = 0; bit < 32; ++bit) {
    std::uint32_t c = 1u << bit;
    for (std::size_t i = 0; i < zeros; ++i) c = kTable[c & 0xffu] ^ (c >> 8);
    basis[static_cast<std::size_t>(bit)] = c;
  }
  ShiftTable t;
  for (std::size_t k = 0; k < 4; ++k)
    for (std::uint32_t v = 0; v < 256; ++v) {
      std::uint32_t c = 0;
      for (int bit = 0; bit < 8; ++bit)
        if (v & (1u << bit)) c ^= basis[8 * k + static_cast<std::size_t>(bit)];
      t.by_byte[k][v] = c;
    }
  return t;
}

#if defined(__x86_64__)
// SSE 4.2's CRC32 instruction computes exactly this CRC (Castagnoli,
// reflected) on the same running state as the table, eight bytes at a time.
// Compiled for SSE 4.2 here only and chosen at run time, so the binary still
// runs on processors without it.
//
// One instruction waits for the one before it (3 cycles) though the
// processor could start one a cycle, so a single stream runs at a third of
// the instruction's rate. Data of at least three lanes is cut into three
// consecutive lanes, each run from its own state, and joined by moving the
// first two past the bytes after them (the shift tables).
constexpr std::size_t kLongLane = 2048, kShortLane = 128;
constexpr ShiftTable kPastLongLane = make_shift_table(kLongLane);
constexpr ShiftTable kPastShortLane = make_shift_table(kShortLane);

__attribute__((target("sse4.2"))) inline std::uint64_t crc_words(std::uint64_t c, const unsigned char* p,
                                                                  std::size_t words) {
  for (std::size_t i = 0; i < words; ++i, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  return c;
}

// Three lanes of `lane` bytes each, from `state`; returns the state after them.
__attribute__((target("sse4.2"))) inline std::uint64_t crc_three_lanes(std::uint64_t state, const unsigned char* p,
                                                                        std::size_t lane, const ShiftTable& past_lane) {
  std::uint64_t a = state, b = 0, c = 0;
  const unsigned char* pb = p + lane;
  const unsigned char* pc = p + 2 * lane;
  for (std::size_t i = 0; i < lane; i += 8) {
    std::uint64_t wa, wb, wc;
    std::memcpy(&wa, p + i, 8);
    std::memcpy(&wb, pb + i, 8);
    std::memcpy(&wc, pc + i, 8);
    a = _mm_crc32_u64(a, wa);
    b = _mm_crc32_u64(b, wb);
    c = _mm_crc32_u64(c, wc);
  }
  const std::uint32_t ab = past_lane(static_cast<std::uint32_t>(a)) ^ static_cast<std::uint32_t>(b);
  return past_lane(ab) ^ static_cast<std::uint32_t>(c);
}

__attribute__((target("sse4.2"))) std::uint32_t extend_sse42(std::uint32_t state, const unsigned char* p,
                                                              std::size_t size) {
  std::uint64_t c = state;
  for (; size >= 3 * kLongLane; p += 3 * kLongLane, size -= 3 * kLongLane)
    c = crc_three_lanes(c, p, kLongLane, kPastLongLane);
  for (; size >= 3 * kShortLane; p += 3 * kShortLane, size -= 3 * kShortLane)
    c = crc_three_lanes(c, p, kShortLane, kPastShortLane);
  c = crc_words(c, p, size / 8);
  p += size / 8 * 8;
  size %= 8;
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
