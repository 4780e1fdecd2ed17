// Replies to non-idempotent calls, kept so that a retransmission gets the original reply
// instead of running the call twice. Bounded (LRU). A retransmission is the same client address
// and port, xid, procedure and arguments: clients on one host (or several connections of one
// client) reuse xids, so the xid alone would replay one caller's reply to another.
// Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tidepool::nfsd {

struct RequestKey {
  std::uint32_t client = 0;
  std::uint16_t port = 0;
  std::uint32_t xid = 0;
  std::uint32_t procedure = 0;
  std::uint32_t arguments_crc = 0;
  bool operator==(const RequestKey&) const = default;
};

class DuplicateRequestCache {
 public:
  explicit DuplicateRequestCache(std::size_t capacity) : capacity_(capacity) {}

  enum class Outcome { run, in_progress, replay };
  // run: the caller executes the call and must finish() it. in_progress: an earlier copy is
  // still running; drop this one. replay: `results` holds the original reply's results.
  Outcome begin(const RequestKey& key, std::vector<std::uint8_t>& results);
  void finish(const RequestKey& key, std::vector<std::uint8_t> results);
  // The call ended without a reply worth keeping.
  void abandon(const RequestKey& key);

 private:
  struct KeyHash {
    std::size_t operator()(const RequestKey& k) const {
      return (std::size_t{k.client} * 0x9e3779b97f4a7c15ull) ^ (std::size_t{k.xid} << 8) ^
             (std::size_t{k.port} << 40) ^ k.procedure ^ (std::size_t{k.arguments_crc} << 20);
    }
  };
  struct Entry {
    std::optional<std::vector<std::uint8_t>> results;  // empty while in progress
    std::list<RequestKey>::iterator age;
  };

  std::size_t capacity_;
  std::mutex mutex_;
  std::list<RequestKey> ages_;                                  // guarded by mutex_; newest first
  std::unordered_map<RequestKey, Entry, KeyHash> entries_;  // guarded by mutex_
};

}  // namespace tidepool::nfsd
