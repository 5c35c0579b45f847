#pragma once
// Who may talk to a task. Two independent guards, on every port a task opens:
//
//  * A cluster token: a secret every task of the cluster shares. gRPC calls
//    carry it in their metadata and the server checks it before decoding
//    anything; data-plane connections prove they hold it in a handshake
//    (challenge, HMAC-SHA256 over both sides' nonces and identities, answered
//    by the callee's own proof) and it never crosses the wire there. A peer
//    without it gets UNAUTHENTICATED and nothing else.
//  * TLS: gRPC's server and channel credentials, and the data plane over
//    OpenSSL (Asio's ssl::stream). Peers verify the server's certificate
//    against the cluster's CA and the address they dialled; with mutual TLS
//    servers also require a client certificate from that CA.
//
// The data plane may skip TLS while gRPC keeps it (SecurityOptions::
// data_plane_tls = false): its bytes then travel in clear but every
// connection is still authenticated by the token handshake, and the token
// itself stays inside gRPC's TLS. That is the fast path for trusted networks
// (TLS costs the data plane a copy and a cipher pass per byte; `twinps bench
// ps --tls` measures it).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/cluster/task_id.h"
#include "core/runtime/status.h"

namespace twinps::net {

struct SecurityOptions {
  std::string token;  // the cluster token; "" = none (any peer is served)
  bool tls = false;
  std::string cert_pem;  // this task's certificate chain (PEM)
  std::string key_pem;   // its private key (PEM)
  std::string ca_pem;    // the CA that signs the cluster's certificates (PEM)
  bool mutual_tls = false;    // servers require client certificates (from ca_pem); callers present cert_pem
  bool data_plane_tls = true;  // with tls: the data plane too; false: the token handshake only
};

// The gRPC metadata key the token travels in.
inline constexpr char kTokenMetadataKey[] = "authorization";
// The metadata value for `token`.
std::string token_metadata_value(const std::string& token);
// True when `presented` (a metadata value) carries `token`; compares in
// constant time. An empty `token` accepts anything.
bool token_matches(const std::string& token, std::string_view presented);

// ---- the data-plane handshake (net/data_frame.h: kChallenge, kHello, kHelloAck)
inline constexpr std::size_t kNonceBytes = 32;
std::string random_nonce();  // kNonceBytes from OpenSSL's CSPRNG
// The caller's proof: HMAC-SHA256(token, label | callee nonce | caller nonce | from | to).
std::string hello_proof(const std::string& token, const std::string& callee_nonce, const std::string& caller_nonce,
                        const TaskId& from, const TaskId& to);
// The callee's answer, so a caller never sends tensors to an impostor.
std::string ack_proof(const std::string& token, const std::string& callee_nonce, const std::string& caller_nonce,
                      const TaskId& from, const TaskId& to);
bool constant_time_equal(std::string_view a, std::string_view b);

// Reads a PEM file (or a token file), naming `what` and the path in errors.
StatusOr<std::string> read_secret_file(const std::string& path, const std::string& what);
// Checks that the PEM texts parse and that the key belongs to the certificate.
Status check_tls_material(const SecurityOptions& options);

}  // namespace twinps::net
