#include "nfsd/internal/file_handle.h"

#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <unistd.h>

#include <boost/container_hash/hash.hpp>
#include <boost/endian/conversion.hpp>
#include <boost/unordered/unordered_flat_map.hpp>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>

namespace tidepool::nfsd {
namespace {

constexpr std::uint8_t kVersion = 1;
constexpr std::size_t kBodyBytes = 20;  // version, 3 reserved, export id, inode, generation

Result<std::shared_ptr<EVP_MAC_CTX>> keyed_context(const std::array<std::uint8_t, 32>& key) {
  EVP_MAC* hmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (!hmac) return error(Errc::internal, "OpenSSL has no HMAC");
  std::shared_ptr<EVP_MAC_CTX> context(EVP_MAC_CTX_new(hmac), EVP_MAC_CTX_free);
  EVP_MAC_free(hmac);
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  if (!context || EVP_MAC_init(context.get(), key.data(), key.size(), params) != 1) {
    return error(Errc::internal, "cannot set up HMAC-SHA256");
  }
  return context;
}

}  // namespace

// Sealed handles by (export, inode, generation). Bounded; thread-safe.
class HandleSealer::Memo {
 public:
  std::optional<FileHandle> find(const HandleContents& c) {
    Shard& s = shard(c);
    std::lock_guard lock(s.mutex);
    auto it = s.handles.find(c);
    if (it == s.handles.end()) return std::nullopt;
    return it->second;
  }
  void put(const HandleContents& c, const FileHandle& h) {
    Shard& s = shard(c);
    std::lock_guard lock(s.mutex);
    if (s.handles.size() >= kPerShard) s.handles.erase(s.handles.begin());
    s.handles[c] = h;
  }

 private:
  static constexpr std::size_t kShards = 8;
  static constexpr std::size_t kPerShard = 8192;
  // Every field counts: inodes of different shards may share their low bits.
  struct Hash {
    std::size_t operator()(const HandleContents& c) const {
      std::size_t seed = 0;
      boost::hash_combine(seed, c.export_id);
      boost::hash_combine(seed, c.inode);
      boost::hash_combine(seed, c.generation);
      return seed;
    }
  };
  struct Shard {
    std::mutex mutex;
    // Open addressing: a lookup, one per READDIRPLUS entry, costs one cache miss, not a
    // bucket's and a node's.
    boost::unordered_flat_map<HandleContents, FileHandle, Hash> handles;  // guarded by mutex
  };
  Shard& shard(const HandleContents& c) { return shards_[c.inode % kShards]; }
  std::array<Shard, kShards> shards_;
};

Result<HandleSealer> HandleSealer::make(const Key& key) {
  TP_ASSIGN_OR_RETURN(auto keyed, keyed_context(key));
  return HandleSealer(std::move(keyed), std::make_shared<Memo>());
}

Result<HandleSealer> HandleSealer::load_or_create(const std::string& data_dir) {
  std::string path = data_dir + "/handle.key";
  std::array<std::uint8_t, 32> key{};
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t n = ::read(fd, key.data(), key.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(key.size())) {
      return error(Errc::corrupt, path + " is not a 32-byte key");
    }
    return make(key);
  }
  if (errno != ENOENT) return error(Errc::io_error, "cannot read " + path + ": " + std::strerror(errno));
  if (RAND_bytes(key.data(), static_cast<int>(key.size())) != 1) {
    return error(Errc::internal, "no randomness for the handle key");
  }
  return adopt(data_dir, key);
}

Result<HandleSealer> HandleSealer::adopt(const std::string& data_dir, const Key& key) {
  // Written aside and renamed over, so a crash leaves the old key or the new one, whole.
  const std::string path = data_dir + "/handle.key";
  const std::string temporary = path + ".new";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    return error(Errc::io_error, "cannot create " + temporary + ": " + std::strerror(errno));
  }
  bool ok = ::write(fd, key.data(), key.size()) == static_cast<ssize_t>(key.size()) &&
            ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(temporary.c_str(), path.c_str()) != 0) {
    return error(Errc::io_error, "cannot write " + path);
  }
  return make(key);
}

std::array<std::uint8_t, 16> HandleSealer::mac(std::span<const std::uint8_t> body) const {
  std::uint8_t full[EVP_MAX_MD_SIZE];
  std::size_t length = 0;
  std::unique_ptr<EVP_MAC_CTX, decltype(&EVP_MAC_CTX_free)> context(
      EVP_MAC_CTX_dup(keyed_.get()), EVP_MAC_CTX_free);
  // Only allocation can fail here; like operator new, that ends the process.
  if (!context || EVP_MAC_update(context.get(), body.data(), body.size()) != 1 ||
      EVP_MAC_final(context.get(), full, &length, sizeof full) != 1) {
    std::abort();
  }
  std::array<std::uint8_t, 16> truncated;
  std::memcpy(truncated.data(), full, truncated.size());
  return truncated;
}

FileHandle HandleSealer::seal(const HandleContents& c) const {
  if (auto known = memo_->find(c)) return *known;
  FileHandle h{};
  h[0] = kVersion;
  boost::endian::store_big_u32(h.data() + 4, c.export_id);
  boost::endian::store_big_u64(h.data() + 8, c.inode);
  boost::endian::store_big_u32(h.data() + 16, c.generation);
  auto m = mac({h.data(), kBodyBytes});
  std::memcpy(h.data() + kBodyBytes, m.data(), m.size());
  memo_->put(c, h);
  return h;
}

Result<HandleContents> HandleSealer::unseal(std::span<const std::uint8_t> h) const {
  if (h.size() != kFileHandleBytes || h[0] != kVersion) {
    return error(Errc::bad_handle, "not a Tidepool file handle");
  }
  HandleContents c;
  c.export_id = boost::endian::load_big_u32(h.data() + 4);
  c.inode = boost::endian::load_big_u64(h.data() + 8);
  c.generation = boost::endian::load_big_u32(h.data() + 16);
  // A handle we sealed ourselves matches byte for byte; anything else has its MAC checked.
  if (auto known = memo_->find(c); known && CRYPTO_memcmp(known->data(), h.data(), h.size()) == 0) {
    return c;
  }
  auto m = mac(h.first(kBodyBytes));
  if (CRYPTO_memcmp(m.data(), h.data() + kBodyBytes, m.size()) != 0) {
    return error(Errc::bad_handle, "file handle seal does not match");
  }
  FileHandle verified;
  std::memcpy(verified.data(), h.data(), verified.size());
  memo_->put(c, verified);
  return c;
}

}  // namespace tidepool::nfsd
