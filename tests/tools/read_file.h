#pragma once
// A whole file as a string, for tests that check what a command wrote:
// empty if the file cannot be read (the test's own expectation then says
// what was missing).
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace twinps::testing {

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace twinps::testing
