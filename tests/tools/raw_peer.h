#pragma once
// A hand-driven data-plane peer for the exposure tests: a plain TCP socket
// that speaks net/data_frame.h frame by frame, so a test can send what a
// hostile peer would (a header claiming any length, no token) and read what
// the task answers. Blocking I/O with a receive timeout: every wait is bounded.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "net/convert.h"
#include "net/data_frame.h"
#include "net/proto/twinps.pb.h"
#include "net/security.h"

namespace twinps::testing {

class RawPeer {
 public:
  // Connects to 127.0.0.1:port; ok() tells whether it did.
  explicit RawPeer(int port, std::chrono::seconds timeout = std::chrono::seconds(30)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{static_cast<time_t>(timeout.count()), 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawPeer() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  bool ok() const { return ok_; }
  int local_port() const {
    sockaddr_in addr{};
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    return ntohs(addr.sin_port);
  }

  bool send_bytes(const std::string& bytes) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  // A frame: header (with the lengths given, whatever the body) and `body`.
  static std::string frame(net::dataframe::Kind kind, std::uint64_t call_id, std::uint32_t envelope_bytes,
                           std::uint64_t attachment_bytes, const std::string& body = "") {
    net::dataframe::Header h;
    h.kind = kind;
    h.call_id = call_id;
    h.envelope_bytes = envelope_bytes;
    h.attachment_bytes = attachment_bytes;
    std::string out(net::dataframe::kHeaderBytes, '\0');
    net::dataframe::encode_header(h, reinterpret_cast<std::uint8_t*>(out.data()));
    return out + body;
  }
  static std::string frame_with(net::dataframe::Kind kind, std::uint64_t call_id,
                                const google::protobuf::MessageLite& envelope, std::uint64_t attachment_bytes = 0) {
    const std::string body = envelope.SerializeAsString();
    return frame(kind, call_id, static_cast<std::uint32_t>(body.size()), attachment_bytes, body);
  }

  // The handshake (net/security.h): reads the callee's challenge, answers
  // with who calls whom and a proof made with `token` ("" when the peer has
  // none). Returns the callee's answer: OK, or the error it refused with
  // (UNAUTHENTICATED without the right token); UNAVAILABLE if the connection
  // broke first.
  Status hello(const TaskId& from, const TaskId& to, const std::string& token = "") {
    auto challenge_frame = read_frame();
    net::wire::DataPlaneChallenge challenge;
    if (!challenge_frame || challenge_frame->header.kind != net::dataframe::Kind::kChallenge ||
        !challenge.ParseFromString(challenge_frame->envelope))
      return absl::UnavailableError("test: no challenge");
    const std::string nonce = net::random_nonce();
    net::wire::DataPlaneHello h;
    net::to_proto(from, h.mutable_from());
    net::to_proto(to, h.mutable_to());
    h.set_nonce(nonce);
    h.set_proof(net::hello_proof(token, challenge.nonce(), nonce, from, to));
    if (!send_bytes(frame_with(net::dataframe::Kind::kHello, 0, h))) return absl::UnavailableError("test: send");
    auto ack_frame = read_frame();
    net::wire::DataPlaneHelloAck ack;
    if (!ack_frame || ack_frame->header.kind != net::dataframe::Kind::kHelloAck ||
        !ack.ParseFromString(ack_frame->envelope))
      return absl::UnavailableError("test: no answer to the hello");
    if (ack.has_error()) return Status(static_cast<StatusCode>(ack.error().code()), ack.error().message());
    return absl::OkStatus();
  }

  // Reads one frame; nullopt if the connection closed or the timeout passed.
  struct Received {
    net::dataframe::Header header;
    std::string envelope;
  };
  std::optional<Received> read_frame() {
    std::string head;
    if (!read_exact(net::dataframe::kHeaderBytes, &head)) return std::nullopt;
    Received r;
    if (!net::dataframe::decode_header(reinterpret_cast<const std::uint8_t*>(head.data()), &r.header))
      return std::nullopt;
    if (!read_exact(r.header.envelope_bytes, &r.envelope)) return std::nullopt;
    std::string ignored;
    if (!read_exact(r.header.attachment_bytes, &ignored)) return std::nullopt;
    return r;
  }

  // True once the peer closed the connection (EOF or reset) within the timeout.
  bool closed_by_peer() {
    char c;
    for (;;) {
      const ssize_t n = ::recv(fd_, &c, 1, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  bool read_exact(std::uint64_t n, std::string* out) {
    out->resize(n);
    std::uint64_t got = 0;
    while (got < n) {
      const ssize_t k = ::recv(fd_, out->data() + got, n - got, 0);
      if (k <= 0) return false;
      got += static_cast<std::uint64_t>(k);
    }
    return true;
  }

  int fd_ = -1;
  bool ok_ = false;
};

// Resident memory of a process (VmRSS), in bytes; -1 if unreadable.
inline long long resident_bytes(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

// Bytes waiting in the receive queues of `pid`'s TCP sockets on local port
// `port` whose remote ports are in `from` (/proc/PID/net/tcp); -1 if a
// socket is not found. 0 means the process has read everything sent to it.
inline long long unread_bytes(int pid, int port, const std::set<int>& from) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/net/tcp");
  std::string line;
  std::getline(in, line);  // the column titles
  long long total = 0;
  std::set<int> seen;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string sl, local, remote, state, queues;
    fields >> sl >> local >> remote >> state >> queues;
    const int local_port = std::stoi(local.substr(local.find(':') + 1), nullptr, 16);
    const int remote_port = std::stoi(remote.substr(remote.find(':') + 1), nullptr, 16);
    if (local_port != port || !from.count(remote_port)) continue;
    seen.insert(remote_port);
    total += std::stoll(queues.substr(queues.find(':') + 1), nullptr, 16);
  }
  return seen.size() == from.size() ? total : -1;
}

}  // namespace twinps::testing
