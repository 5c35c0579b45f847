#pragma once
// Reading data files, gzip-compressed or not. Every reader (CSV, LibSVM, IDX,
// TFRecord) reads through InputFile, so each format accepts `.gz` files as
// they come (Debian ships Fashion-MNIST's IDX files gzipped; TensorFlow
// writes TFRecord with compression_type="GZIP"). A gzip stream is recognised
// by its magic bytes, so the choice needs no flag and no file-name
// convention. Other files are read with read(2) straight into the buffer,
// with no zlib in the path (a pipe, whose start cannot be peeked at, still
// goes through zlib, which tells the two apart as it reads).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "core/runtime/status.h"

namespace twinps::data {

class InputFile {
 public:
  // NOT_FOUND naming the path if it cannot be opened.
  static StatusOr<std::unique_ptr<InputFile>> open(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  // Bytes consumed so far (of the uncompressed content).
  std::uint64_t offset() const { return offset_; }

  // Reads up to `n` bytes; fewer only at the end of the file. A damaged or
  // truncated gzip stream is DATA_LOSS naming the file.
  StatusOr<std::size_t> read(void* dst, std::size_t n);
  // The next `n` bytes, in place in the file's buffer (no copy); fewer only
  // at the end of the file. The view is valid until the next call on this
  // file. A buffer smaller than `n` grows to hold it.
  StatusOr<std::string_view> view(std::size_t n);
  // Passes over up to `n` bytes; returns how many there were.
  StatusOr<std::uint64_t> skip(std::uint64_t n);
  // The next line without its "\n" (and "\r\n"); false at the end of the
  // file. A last line without a newline is still a line.
  StatusOr<bool> read_line(std::string& line);

 private:
  InputFile(std::string path, void* gz, int fd) : path_(std::move(path)), gz_(gz), fd_(fd) {}
  // Refills the buffer; false at the end of the file.
  StatusOr<bool> fill();
  // Up to `n` bytes from the file itself (0 at its end), gzip or plain.
  StatusOr<std::size_t> read_source(char* dst, std::size_t n);

  std::string path_;
  void* gz_;  // gzFile (kept opaque so zlib.h stays out of the header), or null for a plain file
  int fd_;    // a plain file's descriptor, or -1
  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;
  std::size_t begin_ = 0, end_ = 0;  // unread bytes are buffer_[begin_, end_)
  std::uint64_t offset_ = 0;
  bool eof_ = false;
};

// Reads a whole (possibly gzipped) file.
StatusOr<std::string> read_file(const std::string& path);

// Writes files, plain or (when the name ends in ".gz") gzip-compressed.
class OutputFile {
 public:
  static StatusOr<std::unique_ptr<OutputFile>> create(const std::string& path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  Status write(std::string_view bytes);
  // Flushes and closes; the first write error, if any, is reported here too.
  Status close();
  const std::string& path() const { return path_; }

 private:
  OutputFile(std::string path, void* gz, std::FILE* plain) : path_(std::move(path)), gz_(gz), plain_(plain) {}
  std::string path_;
  void* gz_ = nullptr;
  std::FILE* plain_ = nullptr;
  Status status_;
};

}  // namespace twinps::data
