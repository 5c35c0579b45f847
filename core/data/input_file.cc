#include "core/data/input_file.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

namespace twinps::data {
namespace {

constexpr std::size_t kBufferBytes = 256 * 1024;

gzFile as_gz(void* p) { return static_cast<gzFile>(p); }

// zlib's own description of the stream's error, if any.
std::string gz_error(void* gz) {
  int code = Z_OK;
  const char* message = gzerror(as_gz(gz), &code);
  if (code == Z_OK || code == Z_STREAM_END) return {};
  if (code == Z_BUF_ERROR) return "the compressed stream is truncated";
  if (code == Z_ERRNO) return std::strerror(errno);
  return message ? message : "zlib error " + std::to_string(code);
}

// Whether to read the file through zlib: it starts with gzip's magic bytes,
// or it cannot be read at an offset (a pipe), so only zlib, which looks at
// what it reads, can tell.
bool read_through_zlib(int fd) {
  unsigned char magic[2];
  ssize_t got;
  do got = ::pread(fd, magic, sizeof magic, 0);
  while (got < 0 && errno == EINTR);
  if (got < 0) return errno == ESPIPE;
  return got == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

}  // namespace

StatusOr<std::unique_ptr<InputFile>> InputFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError("cannot open " + path + ": " + std::strerror(errno));
  void* gz = nullptr;
  int plain = fd;
  if (read_through_zlib(fd)) {
    gzFile g = gzdopen(fd, "rb");  // owns fd from here
    if (!g) {
      ::close(fd);
      return absl::ResourceExhaustedError("cannot open " + path + ": out of memory for zlib");
    }
    gzbuffer(g, 128 * 1024);
    gz = g;
    plain = -1;
  }
  auto file = std::unique_ptr<InputFile>(new InputFile(path, gz, plain));
  file->buffer_ = std::make_unique<char[]>(kBufferBytes);
  file->capacity_ = kBufferBytes;
  return file;
}

InputFile::~InputFile() {
  if (gz_) gzclose(as_gz(gz_));
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::size_t> InputFile::read_source(char* dst, std::size_t n) {
  if (gz_) {
    const int got = gzread(as_gz(gz_), dst, static_cast<unsigned>(std::min<std::size_t>(n, INT_MAX / 2)));
    if (got < 0) return absl::DataLossError(path_ + ": " + gz_error(gz_));
    // A gzip stream that ends early reports itself only at its end.
    if (got == 0)
      if (std::string e = gz_error(gz_); !e.empty()) return absl::DataLossError(path_ + ": " + e);
    return static_cast<std::size_t>(got);
  }
  ssize_t got;
  do got = ::read(fd_, dst, std::min<std::size_t>(n, INT_MAX / 2));
  while (got < 0 && errno == EINTR);
  if (got < 0) return absl::DataLossError("cannot read " + path_ + ": " + std::strerror(errno));
  return static_cast<std::size_t>(got);
}

StatusOr<bool> InputFile::fill() {
  if (eof_) return false;
  if (begin_ < end_) {  // keep what is unread at the front
    std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
    end_ -= begin_;
  } else {
    end_ = 0;
  }
  begin_ = 0;
  auto got = read_source(buffer_.get() + end_, capacity_ - end_);
  if (!got.ok()) return got.status();
  if (*got == 0) {
    eof_ = true;
    return false;
  }
  end_ += *got;
  return true;
}

StatusOr<std::size_t> InputFile::read(void* dst, std::size_t n) {
  auto* out = static_cast<char*>(dst);
  std::size_t done = 0;
  while (done < n) {
    if (begin_ == end_) {
      if (n - done >= capacity_ && !eof_) {  // large reads bypass the buffer
        auto got = read_source(out + done, n - done);
        if (!got.ok()) return got.status();
        if (*got == 0) {
          eof_ = true;
          break;
        }
        done += *got;
        offset_ += *got;
        continue;
      }
      auto more = fill();
      if (!more.ok()) return more.status();
      if (!*more) break;
    }
    const std::size_t take = std::min(n - done, end_ - begin_);
    std::memcpy(out + done, buffer_.get() + begin_, take);
    begin_ += take;
    done += take;
    offset_ += take;
  }
  return done;
}

StatusOr<std::string_view> InputFile::view(std::size_t n) {
  if (n > capacity_) {  // grow, keeping what is unread
    auto bigger = std::make_unique<char[]>(n);
    std::memcpy(bigger.get(), buffer_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
    buffer_ = std::move(bigger);
    capacity_ = n;
  }
  while (end_ - begin_ < n) {
    auto more = fill();
    if (!more.ok()) return more.status();
    if (!*more) break;
  }
  const std::size_t take = std::min(n, end_ - begin_);
  const std::string_view out(buffer_.get() + begin_, take);
  begin_ += take;
  offset_ += take;
  return out;
}

StatusOr<std::uint64_t> InputFile::skip(std::uint64_t n) {
  std::uint64_t done = 0;
  while (done < n) {
    if (begin_ == end_) {
      auto more = fill();
      if (!more.ok()) return more.status();
      if (!*more) break;
    }
    const auto take = static_cast<std::size_t>(std::min<std::uint64_t>(n - done, end_ - begin_));
    begin_ += take;
    done += take;
    offset_ += take;
  }
  return done;
}

StatusOr<bool> InputFile::read_line(std::string& line) {
  line.clear();
  bool any = false;
  for (;;) {
    if (begin_ == end_) {
      auto more = fill();
      if (!more.ok()) return more.status();
      if (!*more) break;
    }
    any = true;
    const char* start = buffer_.get() + begin_;
    const auto* nl = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    const std::size_t take = nl ? static_cast<std::size_t>(nl - start) : end_ - begin_;
    line.append(start, take);
    begin_ += take;
    offset_ += take;
    if (nl) {
      ++begin_;
      ++offset_;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return true;
    }
  }
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return any;
}

StatusOr<std::string> read_file(const std::string& path) {
  auto file = InputFile::open(path);
  if (!file.ok()) return file.status();
  std::string out;
  char chunk[64 * 1024];
  for (;;) {
    auto got = (*file)->read(chunk, sizeof chunk);
    if (!got.ok()) return got.status();
    if (*got == 0) break;
    out.append(chunk, *got);
  }
  return out;
}

StatusOr<std::unique_ptr<OutputFile>> OutputFile::create(const std::string& path) {
  const bool compress = path.size() >= 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (compress) {
    gzFile gz = gzopen(path.c_str(), "wb6");
    if (!gz) return absl::PermissionDeniedError("cannot create " + path + ": " + std::strerror(errno));
    return std::unique_ptr<OutputFile>(new OutputFile(path, gz, nullptr));
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return absl::PermissionDeniedError("cannot create " + path + ": " + std::strerror(errno));
  return std::unique_ptr<OutputFile>(new OutputFile(path, nullptr, f));
}

OutputFile::~OutputFile() { (void)close(); }

Status OutputFile::write(std::string_view bytes) {
  if (!status_.ok()) return status_;
  if (gz_) {
    while (!bytes.empty()) {
      const auto n = static_cast<unsigned>(std::min<std::size_t>(bytes.size(), INT_MAX / 2));
      if (gzwrite(as_gz(gz_), bytes.data(), n) != static_cast<int>(n)) {
        status_ = absl::DataLossError("cannot write " + path_ + ": " + gz_error(gz_));
        return status_;
      }
      bytes.remove_prefix(n);
    }
  } else if (plain_) {
    if (std::fwrite(bytes.data(), 1, bytes.size(), plain_) != bytes.size())
      status_ = absl::DataLossError("cannot write " + path_ + ": " + std::strerror(errno));
  } else {
    status_ = absl::FailedPreconditionError(path_ + " is closed");
  }
  return status_;
}

Status OutputFile::close() {
  if (gz_) {
    if (gzclose(as_gz(gz_)) != Z_OK && status_.ok()) status_ = absl::DataLossError("cannot write " + path_);
    gz_ = nullptr;
  }
  if (plain_) {
    if (std::fclose(plain_) != 0 && status_.ok())
      status_ = absl::DataLossError("cannot write " + path_ + ": " + std::strerror(errno));
    plain_ = nullptr;
  }
  return status_;
}

}  // namespace twinps::data
