#pragma once
// Helpers for the data tests: a scratch directory per test, small files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/data/record_reader.h"
#include "core/runtime/status.h"

namespace twinps::data::testing {

class ScratchDir {
 public:
  // Distinct per test and `tag` (a test may need several).
  explicit ScratchDir(const std::string& tag = "") {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("twinps_data_" + std::string(info->test_suite_name()) + "_" + info->name() + "_" + tag + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Writes `bytes` to `name` and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(file(name), std::ios::binary);
    out << bytes;
    return file(name);
  }
  std::string read(const std::string& name) const {
    std::ifstream in(file(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline bool contains(const Status& s, const std::string& text) {
  return std::string(s.message()).find(text) != std::string::npos;
}

// Reads every record of `reader`, failing the test on an error.
inline std::vector<Record> read_all(RecordReader& reader) {
  std::vector<Record> out;
  for (int guard = 0; guard < 1000000; ++guard) {
    Record r;
    auto got = reader.next(r);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !*got) break;
    out.push_back(std::move(r));
  }
  return out;
}

inline std::vector<float> floats(const Record& r, std::size_t c) {
  return {r.floats.begin() + r.spans[c].begin, r.floats.begin() + r.spans[c].end};
}
inline std::vector<std::int64_t> ints(const Record& r, std::size_t c) {
  return {r.ints.begin() + r.spans[c].begin, r.ints.begin() + r.spans[c].end};
}
inline std::vector<std::string> strings(const Record& r, std::size_t c) {
  return {r.strings.begin() + r.spans[c].begin, r.strings.begin() + r.spans[c].end};
}

}  // namespace twinps::data::testing
