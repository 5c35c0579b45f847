#pragma once
// A throwaway certificate authority, made in memory with OpenSSL: for
// `twinps bench ps --tls` and the tests, which need TLS material at run time
// and must not ship private keys. ECDSA P-256 keys, certificates valid for a
// day. Real clusters bring their own CA (cert-manager, a Secret): see
// deploy/README.md.
#include <string>
#include <vector>

#include "core/runtime/status.h"

namespace twinps::net {

struct PemPair {
  std::string cert_pem;
  std::string key_pem;
};

// A self-signed CA.
StatusOr<PemPair> make_throwaway_ca(const std::string& common_name);
// A certificate signed by `ca` for `hosts` (subjectAltName: IP literals as
// IP entries, anything else as DNS names), usable by servers and clients alike.
StatusOr<PemPair> issue_certificate(const PemPair& ca, const std::vector<std::string>& hosts);

}  // namespace twinps::net
