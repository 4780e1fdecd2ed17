#include "cluster/tls.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <memory>

namespace tidepool::cluster {
namespace {

std::unique_ptr<X509, decltype(&X509_free)> parse(const std::string& pem) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(pem.data(), -1), BIO_free);
  return {PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr), X509_free};
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

}  // namespace
}  // namespace tidepool::cluster
