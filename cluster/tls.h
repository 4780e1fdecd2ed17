// The cluster's certificate authority and node certificates, for mutual TLS between nodes.
// `tide cluster create` makes the CA; each node gets a certificate signed by it. A connection
// from a peer without a certificate from the same CA is refused.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "cluster/types.h"
#include "common/status.h"

struct ssl_st;  // OpenSSL's SSL

namespace tidepool::cluster {

// PEM files of one node's TLS identity.
struct TlsFiles {
  std::string ca_certificate;
  std::string certificate;
  std::string private_key;
};

// A certificate and its private key, PEM-encoded.
struct PemPair {
  std::string certificate;
  std::string private_key;
};

// A new self-signed CA (EC P-256, ten years).
Result<PemPair> create_certificate_authority(const std::string& cluster_name);

// A new key with a self-signed certificate for `common_name`: what a node presents before it
// belongs to a cluster, and the key the cluster's certificate for it will certify.
Result<PemPair> create_self_signed_certificate(const std::string& common_name);

// A certificate for `common_name` and the public key of `subject_certificate` (PEM), signed by
// `ca`. The subject keeps its private key; only its public half travels. `ip_address`, an IPv4
// literal when not empty, is named in the certificate (subjectAltName): where the node serves
// its admin API, which `tide` checks it against.
Result<std::string> sign_certificate(const PemPair& ca, const std::string& common_name,
                                     const std::string& subject_certificate,
                                     const std::string& ip_address = "");

// Fails with invalid_argument unless `certificate` (PEM) certifies the public half of
// `private_key` (PEM).
Status check_key_matches(const std::string& certificate, const std::string& private_key);

// SHA-256 of the certificate's DER encoding (PEM in), lowercase hex: how a TLS peer is pinned.
Result<std::string> certificate_fingerprint(const std::string& certificate);

// `plaintext` (a private key) sealed under `secret` (the admin token), to be kept where others
// can read it: AES-256-GCM under a key derived from `secret` with HKDF-SHA256, `context` (the
// cluster id) its salt; lowercase hex of nonce, ciphertext and tag. `secret` must be a random
// value, not a password: nothing slows a guess down.
Result<std::string> seal(std::string_view plaintext, std::string_view secret,
                         std::string_view context);
// What seal() sealed; access_denied under another secret or context, or when a byte changed.
Result<std::string> unseal(std::string_view sealed, std::string_view secret,
                           std::string_view context);

// What the TLS peer of a connection presented: the fingerprint of its certificate (as
// certificate_fingerprint) and the common name in its subject.
struct PeerCertificate {
  std::string fingerprint;
  std::string common_name;
};
// After the handshake on `ssl`; nullopt when the peer presented no certificate.
std::optional<PeerCertificate> peer_certificate(ssl_st* ssl);

// Fails with access_denied unless `certificate` (PEM) was signed by the CA whose certificate
// is `ca_certificate` and names `common_name`: one the cluster issued to that node.
Status check_issued_by(const std::string& certificate, const std::string& ca_certificate,
                       const std::string& common_name);

// The common name of node `id`'s certificates ("node-3"): the name its peers check.
std::string node_common_name(NodeId id);

// Writes a new self-signed CA (EC P-256, ten years) to `certificate_path` and `key_path`
// (the key readable by its owner only). Refuses to overwrite.
Status create_certificate_authority(const std::string& cluster_name,
                                    const std::string& certificate_path,
                                    const std::string& key_path);

// Writes a certificate for `common_name` (and `ip_address`, as sign_certificate) signed by the
// CA, and its new key.
Status issue_certificate(const std::string& ca_certificate_path, const std::string& ca_key_path,
                         const std::string& common_name, const std::string& certificate_path,
                         const std::string& key_path, const std::string& ip_address = "");

}  // namespace tidepool::cluster
