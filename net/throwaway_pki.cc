#include "net/throwaway_pki.h"

#include <arpa/inet.h>

#include <memory>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace twinps::net {
namespace {

template <typename T, void (*F)(T*)>
struct Free {
  void operator()(T* p) const { F(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Free<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Free<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Free<BIO, BIO_free_all>>;

Status failed(const std::string& what) {
  char buf[256] = "no detail";
  if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return absl::InternalError("making a throwaway certificate: " + what + ": " + buf);
}

bool is_ip(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

std::string to_pem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

std::string to_pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

bool add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `key`, named `cn`, valid from a minute ago for a day.
Cert new_certificate(EVP_PKEY* key, const std::string& cn) {
  Cert cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof serial);
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME_add_entry_by_txt(X509_get_subject_name(cert.get()), "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

StatusOr<Key> read_key(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) return failed("the CA key does not parse");
  return key;
}

StatusOr<Cert> read_cert(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!cert) return failed("the CA certificate does not parse");
  return cert;
}

}  // namespace

StatusOr<PemPair> make_throwaway_ca(const std::string& common_name) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return failed("key generation");
  Cert cert = new_certificate(key.get(), common_name);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  if (!add_extension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !add_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !add_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"))
    return failed("CA extensions");
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return failed("signing the CA");
  return PemPair{to_pem(cert.get()), to_pem(key.get())};
}

StatusOr<PemPair> issue_certificate(const PemPair& ca, const std::vector<std::string>& hosts) {
  auto ca_key = read_key(ca.key_pem);
  if (!ca_key.ok()) return ca_key.status();
  auto ca_cert = read_cert(ca.cert_pem);
  if (!ca_cert.ok()) return ca_cert.status();
  Key key(EVP_EC_gen("P-256"));
  if (!key) return failed("key generation");
  Cert cert = new_certificate(key.get(), hosts.empty() ? "twinps" : hosts.front());
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert->get()));
  std::string san;
  for (const auto& h : hosts) san += (san.empty() ? "" : ",") + std::string(is_ip(h) ? "IP:" : "DNS:") + h;
  if ((!san.empty() && !add_extension(cert.get(), ca_cert->get(), NID_subject_alt_name, san)) ||
      !add_extension(cert.get(), ca_cert->get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !add_extension(cert.get(), ca_cert->get(), NID_key_usage, "critical,digitalSignature,keyEncipherment") ||
      !add_extension(cert.get(), ca_cert->get(), NID_ext_key_usage, "serverAuth,clientAuth") ||
      !add_extension(cert.get(), ca_cert->get(), NID_authority_key_identifier, "keyid:always"))
    return failed("certificate extensions (hosts: " + san + ")");
  if (X509_sign(cert.get(), ca_key->get(), EVP_sha256()) == 0) return failed("signing the certificate");
  return PemPair{to_pem(cert.get()), to_pem(key.get())};
}

}  // namespace twinps::net
