#include "common/tls_identity.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cstdint>
#include <span>

#include "common/hex.h"

namespace tidepool {

std::string certificate_fingerprint(const x509_st* certificate) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (certificate == nullptr || X509_digest(certificate, EVP_sha256(), digest, &length) != 1) {
    return {};
  }
  return to_hex(std::span<const std::uint8_t>(digest, length));
}

std::string peer_fingerprint(const ssl_st* ssl) {
  return certificate_fingerprint(SSL_get0_peer_certificate(ssl));
}

std::string setup_proof(std::string_view secret, std::string_view certificate_fingerprint) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(certificate_fingerprint.data()),
       certificate_fingerprint.size(), digest, &length);
  return to_hex(std::span<const std::uint8_t>(digest, length));
}

}  // namespace tidepool
