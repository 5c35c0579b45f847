#pragma once
// Numbers in text files (CSV, LibSVM): the whole token must be the number,
// surrounding blanks and a leading '+' allowed; anything else is rejected,
// never read as a prefix ("12abc") or a default.
#include <charconv>
#include <cstdint>
#include <string_view>
#include <system_error>

namespace twinps::data {

inline std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

inline bool parse_float(std::string_view s, float& out) {
  s = trim_blanks(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

inline bool parse_int64(std::string_view s, std::int64_t& out) {
  s = trim_blanks(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// For error messages: the token, quoted and cut short if long.
inline std::string quote_token(std::string_view s) {
  constexpr std::size_t kMax = 40;
  std::string out = "\"";
  out.append(s.substr(0, kMax));
  if (s.size() > kMax) out += "...";
  return out + "\"";
}

}  // namespace twinps::data
