#include "cluster/tls.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <memory>

namespace tidepool::cluster {
namespace {

std::unique_ptr<X509, decltype(&X509_free)> parse(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), -1), BIO_free);
  return {PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free};
}

std::string fmt_hex(unsigned char byte) {
  char text[3];
  std::snprintf(text, sizeof text, "%02x", byte);
  return text;
}

TEST(Tls, ASignedCertificateCarriesTheSubjectsKeyAndVerifiesUnderTheCa) {
  auto ca = create_certificate_authority("lab");
  ASSERT_TRUE(ca.ok()) << ca.status().to_string();
  auto node = create_self_signed_certificate("node-3");
  ASSERT_TRUE(node.ok());
  auto signed_pem = sign_certificate(*ca, "node-3", node->certificate);
  ASSERT_TRUE(signed_pem.ok()) << signed_pem.status().to_string();

  auto ca_x509 = parse(ca->certificate);
  auto self_x509 = parse(node->certificate);
  auto signed_x509 = parse(*signed_pem);
  ASSERT_TRUE(ca_x509 && self_x509 && signed_x509);
  EXPECT_EQ(EVP_PKEY_eq(X509_get0_pubkey(self_x509.get()), X509_get0_pubkey(signed_x509.get())), 1);
  EXPECT_EQ(X509_verify(signed_x509.get(), X509_get0_pubkey(ca_x509.get())), 1);
  EXPECT_NE(X509_verify(self_x509.get(), X509_get0_pubkey(ca_x509.get())), 1);
  EXPECT_TRUE(check_key_matches(*signed_pem, node->private_key).ok());
  auto other = create_self_signed_certificate("node-4");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(check_key_matches(*signed_pem, other->private_key).code(), Errc::invalid_argument);
}

TEST(Tls, ANodeCertificateNamesTheAddressItServesAt) {
  auto ca = create_certificate_authority("lab");
  auto node = create_self_signed_certificate("node-3");
  ASSERT_TRUE(ca.ok() && node.ok());
  auto signed_pem = sign_certificate(*ca, "node-3", node->certificate, "127.0.0.3");
  ASSERT_TRUE(signed_pem.ok()) << signed_pem.status().to_string();
  auto x509 = parse(*signed_pem);
  EXPECT_EQ(X509_check_ip_asc(x509.get(), "127.0.0.3", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(x509.get(), "127.0.0.4", 0), 0);
  EXPECT_EQ(sign_certificate(*ca, "node-3", node->certificate, "not-an-ip").code(),
            Errc::invalid_argument);
}

TEST(Tls, OnlyACertificateTheCaIssuedForTheNodeIsTakenAsIssuedToIt) {
  auto ca = create_certificate_authority("lab");
  auto other_ca = create_certificate_authority("lab");
  auto node = create_self_signed_certificate("node-3");
  ASSERT_TRUE(ca.ok() && other_ca.ok() && node.ok());
  auto issued = sign_certificate(*ca, "node-3", node->certificate);
  auto elsewhere = sign_certificate(*other_ca, "node-3", node->certificate);
  ASSERT_TRUE(issued.ok() && elsewhere.ok());
  EXPECT_TRUE(check_issued_by(*issued, ca->certificate, "node-3").ok());
  EXPECT_EQ(check_issued_by(*issued, ca->certificate, "node-4").code(), Errc::access_denied);
  EXPECT_EQ(check_issued_by(*elsewhere, ca->certificate, "node-3").code(), Errc::access_denied);
  EXPECT_EQ(check_issued_by(node->certificate, ca->certificate, "node-3").code(),
            Errc::access_denied);
  EXPECT_EQ(check_issued_by("not a certificate", ca->certificate, "node-3").code(),
            Errc::invalid_argument);
}

TEST(Tls, GarbageIsRefusedWithAClearError) {
  auto ca = create_certificate_authority("lab");
  ASSERT_TRUE(ca.ok());
  auto refused = sign_certificate(*ca, "node-1", "not a certificate");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), Errc::invalid_argument);
  PemPair broken{ca->certificate, "no key"};
  auto node = create_self_signed_certificate("node-1");
  ASSERT_TRUE(node.ok());
  EXPECT_EQ(sign_certificate(broken, "node-1", node->certificate).code(), Errc::invalid_argument);
}

TEST(Tls, AFingerprintIsTheSha256OfTheCertificatesDer) {
  auto node = create_self_signed_certificate("node-1");
  auto other = create_self_signed_certificate("node-1");
  ASSERT_TRUE(node.ok() && other.ok());
  auto x509 = parse(node->certificate);
  unsigned char* der = nullptr;
  const int length = i2d_X509(x509.get(), &der);
  ASSERT_GT(length, 0);
  unsigned char digest[32];
  EVP_Digest(der, static_cast<std::size_t>(length), digest, nullptr, EVP_sha256(), nullptr);
  OPENSSL_free(der);
  std::string expected;
  for (unsigned char byte : digest) expected += fmt_hex(byte);

  EXPECT_EQ(certificate_fingerprint(node->certificate).value(), expected);
  EXPECT_NE(certificate_fingerprint(other->certificate).value(), expected);
  EXPECT_EQ(certificate_fingerprint("not a certificate").code(), Errc::invalid_argument);
}

TEST(Tls, ASealedKeyOpensOnlyUnderItsSecretAndContextAndUnchanged) {
  const std::string key = "-----BEGIN PRIVATE KEY-----\nsecret bytes\n-----END PRIVATE KEY-----\n";
  const Result<std::string> sealed = seal(key, "admin token", "cluster id");
  ASSERT_TRUE(sealed.ok()) << sealed.status().to_string();
  EXPECT_EQ(sealed->find("PRIVATE"), std::string::npos);
  EXPECT_NE(*seal(key, "admin token", "cluster id"), *sealed) << "a fresh nonce each time";
  EXPECT_EQ(unseal(*sealed, "admin token", "cluster id").value(), key);
  EXPECT_EQ(unseal(*sealed, "another token", "cluster id").code(), Errc::access_denied);
  EXPECT_EQ(unseal(*sealed, "admin token", "another cluster").code(), Errc::access_denied);
  std::string changed = *sealed;
  changed[changed.size() / 2] = changed[changed.size() / 2] == '0' ? '1' : '0';
  EXPECT_EQ(unseal(changed, "admin token", "cluster id").code(), Errc::access_denied);
  EXPECT_EQ(unseal("not hex", "admin token", "cluster id").code(), Errc::corrupt);
  EXPECT_EQ(unseal("00ff", "admin token", "cluster id").code(), Errc::corrupt);
  EXPECT_EQ(seal(key, "", "cluster id").code(), Errc::invalid_argument);
}

}  // namespace
}  // namespace tidepool::cluster
