#include "net/security.h"

#include <fstream>
#include <memory>
#include <sstream>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

namespace twinps::net {
namespace {

std::string hmac(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

// Length-prefixed fields, so that no two different inputs give the same bytes.
void put(std::string* out, std::string_view field) {
  const auto n = static_cast<std::uint32_t>(field.size());
  out->append(reinterpret_cast<const char*>(&n), sizeof n);
  out->append(field);
}

std::string transcript(std::string_view label, const std::string& callee_nonce, const std::string& caller_nonce,
                       const TaskId& from, const TaskId& to) {
  std::string t;
  put(&t, label);
  put(&t, callee_nonce);
  put(&t, caller_nonce);
  put(&t, from.short_name());
  put(&t, to.short_name());
  return t;
}

std::string openssl_error() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "no detail";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

}  // namespace

std::string token_metadata_value(const std::string& token) { return "Bearer " + token; }

bool token_matches(const std::string& token, std::string_view presented) {
  if (token.empty()) return true;
  constexpr std::string_view kScheme = "Bearer ";
  if (presented.substr(0, kScheme.size()) != kScheme) return false;
  return constant_time_equal(presented.substr(kScheme.size()), token);
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Compares digests: equal length, so neither the time nor an early exit
  // tells how much of a guess was right (or how long the secret is).
  unsigned char da[32], db[32];
  unsigned int n = 0;
  EVP_Digest(a.data(), a.size(), da, &n, EVP_sha256(), nullptr);
  EVP_Digest(b.data(), b.size(), db, &n, EVP_sha256(), nullptr);
  return CRYPTO_memcmp(da, db, sizeof da) == 0;
}

std::string random_nonce() {
  std::string n(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(n.data()), static_cast<int>(n.size())) != 1)
    throw std::runtime_error("OpenSSL's random generator failed: " + openssl_error());
  return n;
}

std::string hello_proof(const std::string& token, const std::string& callee_nonce, const std::string& caller_nonce,
                        const TaskId& from, const TaskId& to) {
  return hmac(token, transcript("twinps data plane hello v1", callee_nonce, caller_nonce, from, to));
}

std::string ack_proof(const std::string& token, const std::string& callee_nonce, const std::string& caller_nonce,
                      const TaskId& from, const TaskId& to) {
  return hmac(token, transcript("twinps data plane ack v1", callee_nonce, caller_nonce, from, to));
}

StatusOr<std::string> read_secret_file(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(what + " '" + path + "': cannot read the file");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() > (1 << 20)) return absl::InvalidArgumentError(what + " '" + path + "': larger than 1 MiB");
  return text;
}

Status check_tls_material(const SecurityOptions& o) {
  if (!o.tls) return absl::OkStatus();
  auto bio = [](const std::string& pem) {
    return std::unique_ptr<BIO, decltype(&BIO_free)>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())),
                                                     &BIO_free);
  };
  auto cert_bio = bio(o.cert_pem);
  std::unique_ptr<X509, decltype(&X509_free)> cert(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr),
                                                   &X509_free);
  if (!cert) return absl::InvalidArgumentError("--tls-cert: not a PEM certificate (" + openssl_error() + ")");
  auto key_bio = bio(o.key_pem);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), &EVP_PKEY_free);
  if (!key) return absl::InvalidArgumentError("--tls-key: not a PEM private key (" + openssl_error() + ")");
  if (X509_check_private_key(cert.get(), key.get()) != 1)
    return absl::InvalidArgumentError("--tls-key: the key does not belong to the --tls-cert certificate");
  auto ca_bio = bio(o.ca_pem);
  std::unique_ptr<X509, decltype(&X509_free)> ca(PEM_read_bio_X509(ca_bio.get(), nullptr, nullptr, nullptr),
                                                 &X509_free);
  if (!ca) return absl::InvalidArgumentError("--tls-ca: not a PEM certificate (" + openssl_error() + ")");
  ERR_clear_error();
  return absl::OkStatus();
}

}  // namespace twinps::net
