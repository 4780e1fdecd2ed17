#include "cluster/ring.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace tidepool::cluster {
namespace {

// SplitMix64's finaliser: every input bit affects every output bit.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

std::uint64_t weight(std::uint64_t key, NodeId node) { return mix(mix(key) ^ mix(~node)); }

}  // namespace

Ring::Ring(std::vector<NodeId> nodes) : nodes_(std::move(nodes)) {
  std::sort(nodes_.begin(), nodes_.end());
  nodes_.erase(std::unique(nodes_.begin(), nodes_.end()), nodes_.end());
}

std::vector<NodeId> Ring::owners(std::uint64_t key, std::size_t count) const {
  count = std::min(count, nodes_.size());
  std::vector<std::pair<std::uint64_t, NodeId>> ranked;
  ranked.reserve(nodes_.size());
  for (NodeId node : nodes_) ranked.emplace_back(weight(key, node), node);
  // Highest weight first; equal weights (vanishingly rare) fall back to the lower node id.
  auto before = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(count),
                    ranked.end(), before);
  std::vector<NodeId> result;
  result.reserve(count);
  for (std::size_t i = 0; i < count; ++i) result.push_back(ranked[i].second);
  return result;
}

NodeId Ring::owner(std::uint64_t key) const {
  assert(!nodes_.empty());
  NodeId best = nodes_.front();
  std::uint64_t best_weight = weight(key, best);
  for (NodeId node : nodes_) {
    std::uint64_t w = weight(key, node);
    if (w > best_weight) {  // strict: on a tie the lower id (seen first) stays
      best = node;
      best_weight = w;
    }
  }
  return best;
}

std::uint64_t Ring::key_of(std::string_view name) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;  // FNV-1a, then mixed
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return mix(hash);
}

std::uint64_t Ring::key_of(std::uint64_t first, std::uint64_t second) {
  return mix(mix(first) + second);
}

}  // namespace tidepool::cluster
