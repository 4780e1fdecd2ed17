#include "cluster/tls.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

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

Status write_pair(const X509* certificate, EVP_PKEY* key, const std::string& certificate_path,
                  const std::string& key_path) {
  TP_ASSIGN_OR_RETURN(File key_file, create_file(key_path, 0600));
  if (PEM_write_PrivateKey(key_file.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return openssl_error("writing " + key_path);
  }
  TP_ASSIGN_OR_RETURN(File certificate_file, create_file(certificate_path, 0644));
  if (PEM_write_X509(certificate_file.get(), certificate) != 1) {
    return openssl_error("writing " + certificate_path);
  }
  if (std::fflush(key_file.get()) != 0 || std::fflush(certificate_file.get()) != 0) {
    return error(Errc::io_error, "cannot write " + certificate_path);
  }
  return {};
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

Result<Key> read_key(const std::string& path) {
  File file(std::fopen(path.c_str(), "r"));
  if (!file) return error(Errc::not_found, "cannot read " + path);
  Key key(PEM_read_PrivateKey(file.get(), nullptr, nullptr, nullptr));
  if (!key) return error(Errc::corrupt, path + " holds no private key");
  return key;
}

Result<Certificate> read_certificate(const std::string& path) {
  File file(std::fopen(path.c_str(), "r"));
  if (!file) return error(Errc::not_found, "cannot read " + path);
  Certificate certificate(PEM_read_X509(file.get(), nullptr, nullptr, nullptr));
  if (!certificate) return error(Errc::corrupt, path + " holds no certificate");
  return certificate;
}

}  // namespace

Status create_certificate_authority(const std::string& cluster_name,
                                    const std::string& certificate_path,
                                    const std::string& key_path) {
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
  return write_pair(certificate.get(), key.get(), certificate_path, key_path);
}

Status issue_certificate(const std::string& ca_certificate_path, const std::string& ca_key_path,
                         const std::string& common_name, const std::string& certificate_path,
                         const std::string& key_path) {
  TP_ASSIGN_OR_RETURN(Certificate ca, read_certificate(ca_certificate_path));
  TP_ASSIGN_OR_RETURN(Key ca_key, read_key(ca_key_path));
  Key key(EVP_EC_gen("P-256"));
  if (!key) return openssl_error("generating a key");
  TP_ASSIGN_OR_RETURN(Certificate certificate, new_certificate(key.get(), common_name));
  X509_set_issuer_name(certificate.get(), X509_get_subject_name(ca.get()));
  TP_RETURN_IF_ERROR(
      add_extension(certificate.get(), ca.get(), NID_basic_constraints, "critical,CA:FALSE"));
  TP_RETURN_IF_ERROR(add_extension(certificate.get(), ca.get(), NID_ext_key_usage,
                                   "serverAuth,clientAuth"));
  TP_RETURN_IF_ERROR(
      add_extension(certificate.get(), ca.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(certificate.get(), ca_key.get(), EVP_sha256()) == 0) {
    return openssl_error("signing a certificate");
  }
  return write_pair(certificate.get(), key.get(), certificate_path, key_path);
}

}  // namespace tidepool::cluster
