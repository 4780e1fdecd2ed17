#include "cluster/tls.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "common/hex.h"
#include "common/tls_identity.h"

namespace tidepool::cluster {
namespace {

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using Certificate = std::unique_ptr<X509, Deleter<X509_free>>;
using File = std::unique_ptr<FILE, Deleter<std::fclose>>;

constexpr long kTenYears = 10L * 365 * 24 * 3600;

Status openssl_error(const std::string& what) {
  return error(Errc::internal, what + " failed (OpenSSL)");
}

// Opens a new file for writing with the given mode; never replaces an existing one.
Result<File> create_file(const std::string& path, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    return error(errno == EEXIST ? Errc::already_exists : Errc::io_error,
                 "cannot create " + path + ": " + std::strerror(errno));
  }
  FILE* file = ::fdopen(fd, "w");
  if (file == nullptr) {
    ::close(fd);
    return error(Errc::io_error, "cannot open " + path);
  }
  return File(file);
}

Result<Certificate> new_certificate(EVP_PKEY* key, const std::string& common_name) {
  Certificate certificate(X509_new());
  if (!certificate) return openssl_error("X509_new");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return openssl_error("RAND_bytes");
  serial[0] &= 0x7f;  // a positive serial number
  std::unique_ptr<BIGNUM, Deleter<BN_free>> bn(BN_bin2bn(serial, sizeof serial, nullptr));
  if (!bn || !BN_to_ASN1_INTEGER(bn.get(), X509_get_serialNumber(certificate.get()))) {
    return openssl_error("serial number");
  }
  X509_set_version(certificate.get(), 2);
  X509_gmtime_adj(X509_getm_notBefore(certificate.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(certificate.get()), kTenYears);
  X509_set_pubkey(certificate.get(), key);
  X509_NAME* name = X509_get_subject_name(certificate.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("Tidepool"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  return certificate;
}

Status add_extension(X509* certificate, X509* issuer, int nid, const char* value) {
  X509V3_CTX context;
  X509V3_set_ctx_nodb(&context);
  X509V3_set_ctx(&context, issuer, certificate, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>> extension(
      X509V3_EXT_conf_nid(nullptr, &context, nid, value));
  if (!extension || X509_add_ext(certificate, extension.get(), -1) != 1) {
    return openssl_error("certificate extension");
  }
  return {};
}

using Bio = std::unique_ptr<BIO, Deleter<BIO_free>>;

Result<std::string> key_pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return openssl_error("encoding a key");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

Result<std::string> certificate_pem(X509* certificate) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), certificate) != 1) {
    return openssl_error("encoding a certificate");
  }
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<std::size_t>(size));
}

Result<PemPair> pem_pair(X509* certificate, EVP_PKEY* key) {
  PemPair pair;
  TP_ASSIGN_OR_RETURN(pair.certificate, certificate_pem(certificate));
  TP_ASSIGN_OR_RETURN(pair.private_key, key_pem(key));
  return pair;
}

Result<Key> parse_key(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) return error(Errc::invalid_argument, "not a PEM private key");
  return key;
}

Result<Certificate> parse_certificate(const std::string& pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Certificate certificate(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!certificate) return error(Errc::invalid_argument, "not a PEM certificate");
  return certificate;
}

Result<std::string> read_whole_file(const std::string& path) {
  File file(std::fopen(path.c_str(), "r"));
  if (!file) return error(Errc::not_found, "cannot read " + path);
  std::string text;
  char buffer[4096];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, n);
  return text;
}

Status write_new_file(const std::string& path, const std::string& contents, mode_t mode) {
  TP_ASSIGN_OR_RETURN(File file, create_file(path, mode));
  if (std::fwrite(contents.data(), 1, contents.size(), file.get()) != contents.size() ||
      std::fflush(file.get()) != 0) {
    return error(Errc::io_error, "cannot write " + path);
  }
  return {};
}

Status write_pair(const PemPair& pair, const std::string& certificate_path,
                  const std::string& key_path) {
  TP_RETURN_IF_ERROR(write_new_file(key_path, pair.private_key, 0600));
  return write_new_file(certificate_path, pair.certificate, 0644);
}

}  // namespace

Result<PemPair> create_certificate_authority(const std::string& cluster_name) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return openssl_error("generating the CA key");
  TP_ASSIGN_OR_RETURN(Certificate certificate,
                      new_certificate(key.get(), "Tidepool cluster CA " + cluster_name));
  X509_set_issuer_name(certificate.get(), X509_get_subject_name(certificate.get()));
  TP_RETURN_IF_ERROR(add_extension(certificate.get(), certificate.get(),
                                   NID_basic_constraints, "critical,CA:TRUE"));
  TP_RETURN_IF_ERROR(add_extension(certificate.get(), certificate.get(), NID_key_usage,
                                   "critical,keyCertSign,cRLSign"));
  TP_RETURN_IF_ERROR(add_extension(certificate.get(), certificate.get(),
                                   NID_subject_key_identifier, "hash"));
  if (X509_sign(certificate.get(), key.get(), EVP_sha256()) == 0) {
    return openssl_error("signing the CA");
  }
  return pem_pair(certificate.get(), key.get());
}

Result<PemPair> create_self_signed_certificate(const std::string& common_name) {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return openssl_error("generating a key");
  TP_ASSIGN_OR_RETURN(Certificate certificate, new_certificate(key.get(), common_name));
  X509_set_issuer_name(certificate.get(), X509_get_subject_name(certificate.get()));
  if (X509_sign(certificate.get(), key.get(), EVP_sha256()) == 0) {
    return openssl_error("signing a certificate");
  }
  return pem_pair(certificate.get(), key.get());
}

Result<std::string> sign_certificate(const PemPair& ca, const std::string& common_name,
                                     const std::string& subject_certificate,
                                     const std::string& ip_address) {
  TP_ASSIGN_OR_RETURN(Certificate ca_certificate, parse_certificate(ca.certificate));
  TP_ASSIGN_OR_RETURN(Key ca_key, parse_key(ca.private_key));
  TP_ASSIGN_OR_RETURN(Certificate subject, parse_certificate(subject_certificate));
  EVP_PKEY* subject_key = X509_get0_pubkey(subject.get());
  if (subject_key == nullptr) return error(Errc::invalid_argument, "certificate without a key");
  TP_ASSIGN_OR_RETURN(Certificate certificate, new_certificate(subject_key, common_name));
  X509_set_issuer_name(certificate.get(), X509_get_subject_name(ca_certificate.get()));
  TP_RETURN_IF_ERROR(add_extension(certificate.get(), ca_certificate.get(),
                                   NID_basic_constraints, "critical,CA:FALSE"));
  TP_RETURN_IF_ERROR(add_extension(certificate.get(), ca_certificate.get(), NID_ext_key_usage,
                                   "serverAuth,clientAuth"));
  TP_RETURN_IF_ERROR(add_extension(certificate.get(), ca_certificate.get(),
                                   NID_authority_key_identifier, "keyid:always"));
  if (!ip_address.empty() &&
      !add_extension(certificate.get(), ca_certificate.get(), NID_subject_alt_name,
                     ("IP:" + ip_address).c_str())
           .ok()) {
    return error(Errc::invalid_argument, "'" + ip_address + "' is not an IP address");
  }
  if (X509_sign(certificate.get(), ca_key.get(), EVP_sha256()) == 0) {
    return openssl_error("signing a certificate");
  }
  return certificate_pem(certificate.get());
}

Status check_key_matches(const std::string& certificate, const std::string& private_key) {
  TP_ASSIGN_OR_RETURN(Certificate parsed, parse_certificate(certificate));
  TP_ASSIGN_OR_RETURN(Key key, parse_key(private_key));
  if (X509_check_private_key(parsed.get(), key.get()) != 1) {
    return error(Errc::invalid_argument, "the certificate is not for this node's key");
  }
  return {};
}

Result<std::string> certificate_fingerprint(const std::string& certificate) {
  TP_ASSIGN_OR_RETURN(Certificate parsed, parse_certificate(certificate));
  std::string fingerprint = tidepool::certificate_fingerprint(parsed.get());
  if (fingerprint.empty()) return openssl_error("hashing a certificate");
  return fingerprint;
}

namespace {

constexpr std::size_t kSealKeyBytes = 32;
constexpr std::size_t kSealNonceBytes = 12;
constexpr std::size_t kSealTagBytes = 16;
constexpr std::string_view kSealInfo = "tidepool sealed key v1";

using CipherContext = std::unique_ptr<EVP_CIPHER_CTX, Deleter<EVP_CIPHER_CTX_free>>;

Result<std::array<std::uint8_t, kSealKeyBytes>> sealing_key(std::string_view secret,
                                                            std::string_view context) {
  std::array<std::uint8_t, kSealKeyBytes> key;
  std::unique_ptr<EVP_PKEY_CTX, Deleter<EVP_PKEY_CTX_free>> kdf(
      EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  std::size_t length = key.size();
  auto bytes = [](std::string_view text) {
    return reinterpret_cast<const unsigned char*>(text.data());
  };
  if (!kdf || EVP_PKEY_derive_init(kdf.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(kdf.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(kdf.get(), bytes(secret), static_cast<int>(secret.size())) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_salt(kdf.get(), bytes(context), static_cast<int>(context.size())) <=
          0 ||
      EVP_PKEY_CTX_add1_hkdf_info(kdf.get(), bytes(kSealInfo),
                                  static_cast<int>(kSealInfo.size())) <= 0 ||
      EVP_PKEY_derive(kdf.get(), key.data(), &length) <= 0 || length != key.size()) {
    return openssl_error("deriving a sealing key");
  }
  return key;
}

}  // namespace

Result<std::string> seal(std::string_view plaintext, std::string_view secret,
                         std::string_view context) {
  if (secret.empty()) return error(Errc::invalid_argument, "nothing to seal under");
  TP_ASSIGN_OR_RETURN(auto key, sealing_key(secret, context));
  std::vector<std::uint8_t> sealed(kSealNonceBytes + plaintext.size() + kSealTagBytes);
  std::uint8_t* nonce = sealed.data();
  std::uint8_t* body = nonce + kSealNonceBytes;
  std::uint8_t* tag = body + plaintext.size();
  if (RAND_bytes(nonce, kSealNonceBytes) != 1) return openssl_error("RAND_bytes");
  const auto* in = reinterpret_cast<const unsigned char*>(plaintext.data());
  CipherContext cipher(EVP_CIPHER_CTX_new());
  int written = 0;
  int last = 0;
  if (!cipher || !EVP_EncryptInit_ex(cipher.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce) ||
      !EVP_EncryptUpdate(cipher.get(), body, &written, in, static_cast<int>(plaintext.size())) ||
      !EVP_EncryptFinal_ex(cipher.get(), body + written, &last) ||
      !EVP_CIPHER_CTX_ctrl(cipher.get(), EVP_CTRL_GCM_GET_TAG, kSealTagBytes, tag)) {
    return openssl_error("sealing");
  }
  return to_hex(sealed);
}

Result<std::string> unseal(std::string_view sealed, std::string_view secret,
                           std::string_view context) {
  std::optional<std::vector<std::uint8_t>> bytes = from_hex(sealed);
  if (!bytes || bytes->size() < kSealNonceBytes + kSealTagBytes) {
    return error(Errc::corrupt, "not a sealed value");
  }
  TP_ASSIGN_OR_RETURN(auto key, sealing_key(secret, context));
  const std::size_t length = bytes->size() - kSealNonceBytes - kSealTagBytes;
  const std::uint8_t* nonce = bytes->data();
  const std::uint8_t* body = nonce + kSealNonceBytes;
  std::uint8_t* tag = bytes->data() + kSealNonceBytes + length;
  std::string plaintext(length, '\0');
  auto* out = reinterpret_cast<unsigned char*>(plaintext.data());
  CipherContext cipher(EVP_CIPHER_CTX_new());
  int written = 0;
  int last = 0;
  if (!cipher || !EVP_DecryptInit_ex(cipher.get(), EVP_aes_256_gcm(), nullptr, key.data(), nonce) ||
      !EVP_DecryptUpdate(cipher.get(), out, &written, body, static_cast<int>(length)) ||
      !EVP_CIPHER_CTX_ctrl(cipher.get(), EVP_CTRL_GCM_SET_TAG, kSealTagBytes, tag)) {
    return openssl_error("unsealing");
  }
  if (!EVP_DecryptFinal_ex(cipher.get(), out + written, &last)) {
    return error(Errc::access_denied, "the sealed value does not open under this secret");
  }
  return plaintext;
}

namespace {

std::string common_name_of(X509* certificate) {
  X509_NAME* subject = X509_get_subject_name(certificate);
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  const ASN1_STRING* name =
      index < 0 ? nullptr : X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index));
  if (name == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(name)),
                     static_cast<std::size_t>(ASN1_STRING_length(name)));
}

}  // namespace

std::optional<PeerCertificate> peer_certificate(ssl_st* ssl) {
  X509* certificate = SSL_get0_peer_certificate(ssl);
  if (certificate == nullptr) return std::nullopt;
  return PeerCertificate{tidepool::certificate_fingerprint(certificate),
                         common_name_of(certificate)};
}

Status check_issued_by(const std::string& certificate, const std::string& ca_certificate,
                       const std::string& common_name) {
  TP_ASSIGN_OR_RETURN(Certificate parsed, parse_certificate(certificate));
  TP_ASSIGN_OR_RETURN(Certificate ca, parse_certificate(ca_certificate));
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  if (ca_key == nullptr || X509_verify(parsed.get(), ca_key) != 1) {
    ERR_clear_error();
    return error(Errc::access_denied, "the certificate was not signed by the cluster's CA");
  }
  if (common_name_of(parsed.get()) != common_name) {
    return error(Errc::access_denied, "the certificate is not for " + common_name);
  }
  return {};
}

std::string node_common_name(NodeId id) { return "node-" + std::to_string(id); }


Status create_certificate_authority(const std::string& cluster_name,
                                    const std::string& certificate_path,
                                    const std::string& key_path) {
  TP_ASSIGN_OR_RETURN(PemPair ca, create_certificate_authority(cluster_name));
  return write_pair(ca, certificate_path, key_path);
}

Status issue_certificate(const std::string& ca_certificate_path, const std::string& ca_key_path,
                         const std::string& common_name, const std::string& certificate_path,
                         const std::string& key_path, const std::string& ip_address) {
  PemPair ca;
  TP_ASSIGN_OR_RETURN(ca.certificate, read_whole_file(ca_certificate_path));
  TP_ASSIGN_OR_RETURN(ca.private_key, read_whole_file(ca_key_path));
  TP_ASSIGN_OR_RETURN(PemPair node, create_self_signed_certificate(common_name));
  TP_ASSIGN_OR_RETURN(node.certificate,
                      sign_certificate(ca, common_name, node.certificate, ip_address));
  return write_pair(node, certificate_path, key_path);
}

}  // namespace tidepool::cluster
