// The cluster's certificate authority and node certificates, for mutual TLS between nodes.
// `tide cluster create` makes the CA; each node gets a certificate signed by it. A connection
// from a peer without a certificate from the same CA is refused.
#pragma once

#include <string>

#include "common/status.h"

namespace tidepool::cluster {

// PEM files of one node's TLS identity.
struct TlsFiles {
  std::string ca_certificate;
  std::string certificate;
  std::string private_key;
};

// Writes a new self-signed CA (EC P-256, ten years) to `certificate_path` and `key_path`
// (the key readable by its owner only). Refuses to overwrite.
Status create_certificate_authority(const std::string& cluster_name,
                                    const std::string& certificate_path,
                                    const std::string& key_path);

// Writes a certificate for `common_name` signed by the CA, and its new key.
Status issue_certificate(const std::string& ca_certificate_path, const std::string& ca_key_path,
                         const std::string& common_name, const std::string& certificate_path,
                         const std::string& key_path);

}  // namespace tidepool::cluster
