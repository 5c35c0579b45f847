#include "tools/data_dir.h"

#include <cstdlib>
#include <filesystem>

#include "tools/subprocess.h"

#ifndef TWINPS_DATA_RELATIVE
#error "TWINPS_DATA_RELATIVE (share/twinps relative to the binary's directory) is set by tools/CMakeLists.txt"
#endif

namespace twinps::cli {

namespace fs = std::filesystem;

std::vector<std::string> data_dirs(const std::string& flag) {
  std::vector<std::string> candidates;
  if (!flag.empty()) candidates.push_back(flag);
  if (const char* env = std::getenv("TWINPS_DATA_DIR"); env && *env) candidates.push_back(env);
  candidates.push_back((fs::path(self_binary()).parent_path() / TWINPS_DATA_RELATIVE).lexically_normal().string());
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& c : candidates)
    if (fs::is_directory(c, ec)) out.push_back(c);
  return out;
}

std::string find_data(const std::string& path, const std::string& flag) {
  std::error_code ec;
  if (path.empty() || fs::path(path).is_absolute() || fs::exists(path, ec)) return path;
  for (const auto& dir : data_dirs(flag)) {
    const fs::path candidate = fs::path(dir) / path;
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  return path;
}

std::string data_search_note(const std::string& flag) {
  std::string out = "looked in the current directory";
  for (const auto& dir : data_dirs(flag)) out += ", " + dir;
  return out + " (set TWINPS_DATA_DIR to the directory holding scenarios/)";
}

}  // namespace twinps::cli
