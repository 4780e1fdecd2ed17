// How a TLS peer is told apart, in the terms the nodes and `tide` both check it by: the
// fingerprint of the certificate it presents, and the proof a node in no cluster gives that it
// knows its setup secret.
#pragma once

#include <string>
#include <string_view>

struct ssl_st;   // OpenSSL's SSL
struct x509_st;  // OpenSSL's X509

namespace tidepool {

// SHA-256 of the certificate's DER encoding, lowercase hex; empty for none.
std::string certificate_fingerprint(const x509_st* certificate);
// The same for the certificate the TLS peer of `ssl` presented in its handshake.
std::string peer_fingerprint(const ssl_st* ssl);

// What a node in no cluster shows to prove it knows `secret`, its setup secret: HMAC-SHA256
// keyed with the secret of the fingerprint of the certificate it presents, lowercase hex. Only
// the holder of both the secret and that certificate's key can show it over TLS.
std::string setup_proof(std::string_view secret, std::string_view certificate_fingerprint);

}  // namespace tidepool
