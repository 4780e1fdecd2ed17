// NFS file handles: export id, inode and generation, sealed with a truncated HMAC-SHA256 under
// a secret kept in the node's data directory — the cluster's secret once the node is a member,
// so that a handle from any node is good on every node — so a client cannot forge a handle
// that escapes its export.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "common/status.h"
#include "store/store.h"

struct evp_mac_ctx_st;

namespace tidepool::nfsd {

struct HandleContents {
  std::uint32_t export_id = 0;
  store::InodeId inode = 0;
  std::uint32_t generation = 0;

  bool operator==(const HandleContents&) const = default;
};

inline constexpr std::size_t kFileHandleBytes = 36;
using FileHandle = std::array<std::uint8_t, kFileHandleBytes>;

class HandleSealer {
 public:
  using Key = std::array<std::uint8_t, 32>;

  // Reads data_dir/handle.key, creating it (mode 0600, 32 random bytes) on first start.
  static Result<HandleSealer> load_or_create(const std::string& data_dir);
  // Seals under `key` from now on, and keeps it in data_dir/handle.key for the next start.
  static Result<HandleSealer> adopt(const std::string& data_dir, const Key& key);

  FileHandle seal(const HandleContents& contents) const;
  // bad_handle when the size, version or MAC is wrong.
  Result<HandleContents> unseal(std::span<const std::uint8_t> handle) const;

 private:
  class Memo;
  HandleSealer(std::shared_ptr<evp_mac_ctx_st> keyed, std::shared_ptr<Memo> memo)
      : keyed_(std::move(keyed)), memo_(std::move(memo)) {}
  static Result<HandleSealer> make(const Key& key);
  std::array<std::uint8_t, 16> mac(std::span<const std::uint8_t> body) const;

  // An HMAC-SHA256 context with the key already absorbed: each seal duplicates it rather than
  // fetching the algorithm and hashing the key again. Never used directly, only duplicated.
  std::shared_ptr<evp_mac_ctx_st> keyed_;
  // Recently sealed handles: READDIRPLUS seals a handle per entry and clients present the same
  // handles again and again, so most seals and checks are a lookup, not an HMAC.
  std::shared_ptr<Memo> memo_;
};

}  // namespace tidepool::nfsd
