#include "store/pool_data.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "cluster/ring.h"
#include "cluster/rpc.h"
#include "common/config.h"
#include "store/internal/data_files.h"

namespace tidepool::store {
namespace {

constexpr std::size_t kMaxPoolNameBytes = 63;
// A write or read of a range sends its units' calls together, this many at a time at most: a
// 1 MiB range of 128 KiB units, both copies, in one go.
constexpr std::size_t kUnitCallsInFlight = 16;

Status malformed(std::string_view why) {
  return error(Errc::invalid_argument, "a unit message that does not decode: " + std::string(why));
}

}  // namespace

xdr::Buffer encode_unit_request(const UnitRequest& request) {
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encoder.string(request.pool);
  encoder.u64(request.inode);
  encoder.u64(request.offset);
  encoder.u64(request.value);
  encoder.opaque(request.bytes);
  return out;
}

Result<UnitRequest> decode_unit_request(std::span<const std::uint8_t> body) {
  xdr::Decoder in(body);
  UnitRequest request;
  request.pool = std::string(in.string(kMaxPoolNameBytes));
  request.inode = in.u64();
  request.offset = in.u64();
  request.value = in.u64();
  request.bytes = in.opaque(kMaxUnitMessageBytes);
  if (!in.ok() || in.remaining() != 0) return malformed("truncated or too long");
  // A pool names a directory here: is_valid_name keeps it one plain name.
  if (!is_valid_name(request.pool)) return malformed("no valid pool name");
  if (request.offset > kMaxFileSize || request.bytes.size() > kMaxFileSize - request.offset) {
    return malformed("past the largest file");
  }
  return request;
}

UnitStore::UnitStore(std::string root, std::shared_ptr<L2> l2)
    : root_(std::move(root)),
      l2_(l2 ? std::move(l2) : L2::make(0)),
      boot_(std::random_device{}() | std::uint64_t{std::random_device{}()} << 32) {}

xdr::Buffer UnitStore::boot_reply() const {
  xdr::Buffer out;
  xdr::Encoder(out).u64(boot_);
  return out;
}

UnitStore::~UnitStore() = default;

Result<internal::DataFiles*> UnitStore::files_of(const std::string& pool) {
  std::lock_guard lock(mutex_);
  auto found = pools_.find(pool);
  if (found != pools_.end()) return found->second.get();
  if (pools_.size() >= kMaxUnitPools) {
    return error(Errc::not_supported, "this node keeps units of at most " +
                                          std::to_string(kMaxUnitPools) + " pools, not of '" +
                                          pool + "'");
  }
  auto files = std::make_unique<internal::DataFiles>(root_ + "/" + pool, l2_);
  TP_RETURN_IF_ERROR(files->prepare());
  return pools_.emplace(pool, std::move(files)).first->second.get();
}

Result<xdr::Buffer> UnitStore::serve(std::uint32_t method, std::span<const std::uint8_t> body) {
  if (method < 1 || method > kLastUnitMethod) {
    return error(Errc::not_supported, "no unit method " + std::to_string(method));
  }
  TP_ASSIGN_OR_RETURN(UnitRequest request, decode_unit_request(body));
  TP_ASSIGN_OR_RETURN(internal::DataFiles * files, files_of(request.pool));
  switch (static_cast<UnitMethod>(method)) {
    case UnitMethod::write:
      TP_RETURN_IF_ERROR(files->write(request.inode, request.offset, request.bytes));
      if (request.value != 0) TP_RETURN_IF_ERROR(files->sync(request.inode));
      return boot_reply();
    case UnitMethod::read: {
      if (request.value > kMaxUnitMessageBytes || request.value > kMaxFileSize - request.offset) {
        return malformed("a read longer than a message");
      }
      TP_ASSIGN_OR_RETURN(bool held, files->holds(request.inode));
      if (!held) return error(Errc::not_found, "no unit of inode " + std::to_string(request.inode));
      xdr::Buffer bytes;
      // The RPC's trailer goes after the bytes without moving them.
      bytes.reserve(request.value + cluster::kRpcTrailerBytes);
      bytes.resize(request.value);
      // From the L2, else from the page cache (which may keep the units in the L2), else disk.
      l2_->reads().data_bytes_read.fetch_add(request.value, std::memory_order_relaxed);
      if (files->read_from_l2(request.inode, request.offset, bytes)) {
        l2_->reads().data_bytes_hit.fetch_add(request.value, std::memory_order_relaxed);
        return bytes;
      }
      Result<bool> cached = files->read_cached(request.inode, request.offset, bytes);
      if (cached.ok() && *cached) return bytes;
      TP_RETURN_IF_ERROR(files->read(request.inode, request.offset, bytes));
      return bytes;
    }
    case UnitMethod::sync: {
      const auto after = static_cast<AfterSync>(request.value);
      if (after != AfterSync::keep_cached && after != AfterSync::release_cached) {
        return malformed("a sync that keeps or releases the page cache, not " +
                         std::to_string(request.value));
      }
      TP_RETURN_IF_ERROR(after == AfterSync::release_cached ? files->sync_and_release(request.inode)
                                                            : files->sync(request.inode));
      return boot_reply();
    }
    case UnitMethod::repair:
      TP_RETURN_IF_ERROR(files->repair(request.inode, request.offset, request.bytes).status());
      return xdr::Buffer{};
    case UnitMethod::truncate:
      if (request.value > kMaxFileSize) return malformed("a size past the largest file");
      TP_RETURN_IF_ERROR(files->truncate(request.inode, request.value));
      return xdr::Buffer{};
    case UnitMethod::remove:
      files->remove(request.inode);
      return xdr::Buffer{};
    case UnitMethod::drop:
      if (request.value > kMaxDropBytes || request.value > kMaxFileSize - request.offset) {
        return malformed("a hole larger than a message makes, or past the largest file");
      }
      TP_RETURN_IF_ERROR(files->drop(request.inode, request.offset, request.value));
      return xdr::Buffer{};
  }
  return error(Errc::not_supported, "no unit method " + std::to_string(method));
}

PoolData::PoolData(std::shared_ptr<PoolPeers> peers, std::shared_ptr<IntegrityCounters> integrity)
    : peers_(std::move(peers)), integrity_(std::move(integrity)) {}

std::vector<cluster::NodeId> PoolData::nodes_of(const std::string& pool) const {
  return peers_->nodes_of(pool);
}

std::vector<cluster::NodeId> unit_owners(std::vector<cluster::NodeId> pool_nodes, InodeId inode,
                                         std::uint64_t unit, std::uint32_t copies) {
  const cluster::Ring ring(std::move(pool_nodes));
  if (ring.empty()) return {};
  return ring.owners(cluster::Ring::key_of(inode, unit), std::max<std::uint32_t>(copies, 1));
}

Result<std::vector<cluster::NodeId>> PoolData::owners(const Placement& where, InodeId inode,
                                                      std::uint64_t unit) const {
  std::vector<cluster::NodeId> owners = unit_owners(where.nodes, inode, unit, where.copies);
  if (owners.empty()) return error(Errc::unavailable, "node pool '" + where.pool + "' has no node");
  return owners;
}

Result<std::uint64_t> BootIds::note(cluster::NodeId node, std::span<const std::uint8_t> reply) {
  xdr::Decoder in(reply);
  const std::uint64_t boot = in.u64();
  if (!in.ok()) return error(Errc::io_error, "node " + std::to_string(node) + " gave no boot id");
  note_boot(node, boot);
  return boot;
}

void BootIds::note_boot(cluster::NodeId node, std::uint64_t boot) {
  std::lock_guard lock(mutex_);
  auto [known, first] = boots_.try_emplace(node, boot);
  if (!first && known->second != boot) {
    known->second = boot;
    restarts_.fetch_add(1);
    spdlog::warn("node {} restarted: data it had not synced may be gone, so the write verifier "
                 "changes",
                 node);
  }
}

std::vector<Result<xdr::Buffer>> PoolPeers::call_each(std::span<const UnitCall> calls) {
  std::vector<Result<xdr::Buffer>> answers;
  answers.reserve(calls.size());
  for (const UnitCall& each : calls) answers.push_back(call(each.node, each.method, each.request));
  return answers;
}

Status PoolData::call_counting_boots(cluster::NodeId node, UnitMethod method,
                                     const xdr::Buffer& request) {
  return boot_noted(node, peers_->call(node, method, request));
}

Status PoolData::boot_noted(cluster::NodeId node, const Result<xdr::Buffer>& answer) {
  if (!answer.ok()) return answer.status();
  return boot_ids_.note(node, *answer).status();
}

std::vector<Result<xdr::Buffer>> PoolData::call_each(std::span<const UnitCall> calls) {
  std::vector<Result<xdr::Buffer>> answers;
  answers.reserve(calls.size());
  for (std::size_t at = 0; at < calls.size(); at += kUnitCallsInFlight) {
    std::vector<Result<xdr::Buffer>> some =
        peers_->call_each(calls.subspan(at, std::min(kUnitCallsInFlight, calls.size() - at)));
    std::move(some.begin(), some.end(), std::back_inserter(answers));
  }
  return answers;
}

Status PoolData::for_each_unit(std::uint32_t stripe_unit, std::uint64_t offset, std::size_t length,
                               const std::function<Status(std::uint64_t unit, std::size_t done,
                                                          std::size_t piece)>& visit) {
  if (stripe_unit == 0) return error(Errc::corrupt, "a placement without a stripe unit");
  std::size_t done = 0;
  while (done < length) {
    const std::uint64_t at = offset + done;
    const std::uint64_t unit = at / stripe_unit;
    const std::size_t piece =
        std::min<std::uint64_t>(length - done, (unit + 1) * stripe_unit - at);
    TP_RETURN_IF_ERROR(visit(unit, done, piece));
    done += piece;
  }
  return {};
}

namespace {

// A node that did not answer may be down, or on the far side of a partition: a copy it missed.
bool unreachable(const Status& status) {
  return status.code() == Errc::unavailable || status.code() == Errc::timed_out;
}

}  // namespace

Status PoolData::write(const Placement& where, InodeId inode, std::uint64_t offset,
                       std::span<const std::uint8_t> data, bool durable, const CopyBehind& hold) {
  return write_units(where, inode, offset, data, durable, nullptr, nullptr, hold);
}

bool PoolData::every_copy_held(const Placement& where, InodeId inode, std::uint64_t offset,
                               std::uint64_t length, const CopyBehind& hold) const {
  // No unit at all (a layout without a stripe unit) is not held: the copy fails as it would.
  bool held = false;
  for_each_unit_owners(where, inode, offset, offset + length,
                       [&](std::uint64_t unit, const std::vector<cluster::NodeId>& owners) {
                         held = std::all_of(owners.begin(), owners.end(),
                                            [&](cluster::NodeId node) { return hold(node, unit); });
                         return held;
                       });
  return held;
}

Status PoolData::write_past_down(const Placement& where, InodeId inode, std::uint64_t offset,
                                 std::span<const std::uint8_t> data, bool durable,
                                 const CopyBehind& behind, std::vector<MissedCopy>& missed) {
  return write_units(where, inode, offset, data, durable, behind, &missed);
}

// `missed` null: every owner must take the write. Every copy of every unit is sent at once;
// what each answered is then judged unit by unit, in order.
Status PoolData::write_units(const Placement& where, InodeId inode, std::uint64_t offset,
                             std::span<const std::uint8_t> data, bool durable,
                             const CopyBehind& behind, std::vector<MissedCopy>* missed,
                             const CopyBehind& hold) {
  // How each owner of a unit takes the write: held already, passed over as down, or the answer
  // to a call.
  constexpr std::ptrdiff_t kHeld = -1;
  constexpr std::ptrdiff_t kDown = -2;
  struct UnitWrite {
    std::uint64_t unit = 0;
    std::vector<cluster::NodeId> owners;
    xdr::Buffer request;
    std::vector<std::ptrdiff_t> answer_of;  // per owner
  };
  std::vector<UnitWrite> writes;
  std::vector<UnitCall> calls;
  TP_RETURN_IF_ERROR(for_each_unit(
      where.stripe_unit, offset, data.size(),
      [&](std::uint64_t unit, std::size_t done, std::size_t piece) -> Status {
        TP_ASSIGN_OR_RETURN(std::vector<cluster::NodeId> owners, owners(where, inode, unit));
        // A write only copies behind took could not be read: no copy would hold both it and
        // what those copies missed.
        if (missed && !current_copy_up(owners, unit, behind)) {
          return no_current_copy_up(inode, unit);
        }
        writes.push_back({unit,
                          std::move(owners),
                          encode_unit_request({where.pool, inode, offset + done, durable ? 1u : 0u,
                                               data.subspan(done, piece)}),
                          {}});
        return {};
      }));
  for (UnitWrite& write : writes) {
    for (cluster::NodeId node : write.owners) {
      if (hold && hold(node, write.unit)) {
        write.answer_of.push_back(kHeld);
      } else if (missed && !peers_->is_up(node)) {
        write.answer_of.push_back(kDown);
      } else {
        write.answer_of.push_back(static_cast<std::ptrdiff_t>(calls.size()));
        calls.push_back({node, UnitMethod::write, write.request});
      }
    }
  }
  const std::vector<Result<xdr::Buffer>> answers = call_each(calls);
  for (const UnitWrite& write : writes) {
    const auto current = [&](cluster::NodeId node) {
      return !(behind && behind(node, write.unit));
    };
    bool taken = false;
    std::vector<MissedCopy> missed_here;
    Status last;
    for (std::size_t k = 0; k < write.owners.size(); ++k) {
      const cluster::NodeId node = write.owners[k];
      const std::ptrdiff_t answer = write.answer_of[k];
      if (answer == kHeld) {
        taken = taken || current(node);
        continue;
      }
      Status written = answer == kDown
                           ? error(Errc::unavailable, "node " + std::to_string(node) + " is down")
                           : boot_noted(node, answers[static_cast<std::size_t>(answer)]);
      if (written.ok()) {
        taken = taken || current(node);
        continue;
      }
      if (!missed || !unreachable(written)) return written;
      missed_here.push_back({node, write.unit});
      last = std::move(written);
    }
    // The unit's write failed: the copies that missed it are no further behind than before.
    if (!taken) {
      return last.ok()
                 ? error(Errc::unavailable, "no up-to-date copy of unit " +
                                                std::to_string(write.unit) + " took the write")
                 : last;
    }
    if (missed) missed->insert(missed->end(), missed_here.begin(), missed_here.end());
  }
  return {};
}

bool PoolData::current_copy_up(const std::vector<cluster::NodeId>& owners, std::uint64_t unit,
                               const CopyBehind& behind) const {
  return std::any_of(owners.begin(), owners.end(), [&](cluster::NodeId node) {
    return !(behind && behind(node, unit)) && peers_->is_up(node);
  });
}

Status PoolData::no_current_copy_up(InodeId inode, std::uint64_t unit) {
  return error(Errc::unavailable, "inode " + std::to_string(inode) +
                                      ": no up-to-date copy of unit " + std::to_string(unit) +
                                      " is on a node up");
}

Result<std::vector<MissedCopy>> PoolData::copies_down(const Placement& where, InodeId inode,
                                                      std::uint64_t offset, std::uint64_t length,
                                                      const CopyBehind& behind) const {
  std::vector<MissedCopy> down;
  // Every write of a placed file asks: with every node up, no owner need be worked out.
  if (std::all_of(where.nodes.begin(), where.nodes.end(),
                  [this](cluster::NodeId node) { return peers_->is_up(node); })) {
    return down;
  }
  std::optional<std::uint64_t> lacking;  // a unit without a current copy up
  for_each_unit_owners(where, inode, offset, offset + length,
                       [&](std::uint64_t unit, const std::vector<cluster::NodeId>& owners) {
                         if (!current_copy_up(owners, unit, behind)) {
                           lacking = unit;
                           return false;
                         }
                         for (cluster::NodeId node : owners) {
                           if (!peers_->is_up(node)) down.push_back({node, unit});
                         }
                         return true;
                       });
  if (lacking) return no_current_copy_up(inode, *lacking);
  return down;
}

// Each unit is asked of its first owner at once; a unit whose first owner fails goes on to the
// next, one unit at a time.
Status PoolData::read(const Placement& where, InodeId inode, std::uint64_t offset,
                      std::span<std::uint8_t> into, const CopyBehind& behind) {
  struct UnitRead {
    std::uint64_t offset = 0;
    std::span<std::uint8_t> into;
    std::vector<cluster::NodeId> nodes;
    xdr::Buffer request;
  };
  std::vector<UnitRead> reads;
  TP_RETURN_IF_ERROR(for_each_unit(
      where.stripe_unit, offset, into.size(),
      [&](std::uint64_t unit, std::size_t done, std::size_t piece) -> Status {
        TP_ASSIGN_OR_RETURN(std::vector<cluster::NodeId> nodes,
                            read_order(where, inode, unit, behind));
        reads.push_back({offset + done, into.subspan(done, piece), std::move(nodes),
                         encode_unit_request({where.pool, inode, offset + done, piece, {}})});
        return {};
      }));
  std::vector<UnitCall> calls;
  calls.reserve(reads.size());
  for (const UnitRead& read : reads) {
    calls.push_back({read.nodes.front(), UnitMethod::read, read.request});
  }
  std::vector<Result<xdr::Buffer>> answers = call_each(calls);
  for (std::size_t k = 0; k < reads.size(); ++k) {
    TP_RETURN_IF_ERROR(read_from(where, inode, reads[k].offset, reads[k].into, reads[k].nodes,
                                 reads[k].request, std::move(answers[k])));
  }
  return {};
}

// `into` lies within one unit.
Status PoolData::read_unit(const Placement& where, InodeId inode, std::uint64_t offset,
                           std::span<std::uint8_t> into, const CopyBehind& behind) {
  TP_ASSIGN_OR_RETURN(std::vector<cluster::NodeId> nodes,
                      read_order(where, inode, offset / where.stripe_unit, behind));
  return read_from(where, inode, offset, into, nodes,
                   encode_unit_request({where.pool, inode, offset, into.size(), {}}), std::nullopt);
}

Result<std::vector<cluster::NodeId>> PoolData::read_order(const Placement& where, InodeId inode,
                                                          std::uint64_t unit,
                                                          const CopyBehind& behind) const {
  TP_ASSIGN_OR_RETURN(std::vector<cluster::NodeId> nodes, owners(where, inode, unit));
  if (behind) {
    std::erase_if(nodes, [&](cluster::NodeId node) { return behind(node, unit); });
    if (nodes.empty()) {
      return error(Errc::unavailable, "inode " + std::to_string(inode) + ": every copy of offset " +
                                          std::to_string(unit * where.stripe_unit) + " is behind");
    }
  }
  std::stable_partition(nodes.begin(), nodes.end(),
                        [this](cluster::NodeId node) { return peers_->is_up(node); });
  return nodes;
}

Status PoolData::read_from(const Placement& where, InodeId inode, std::uint64_t offset,
                           std::span<std::uint8_t> into, const std::vector<cluster::NodeId>& nodes,
                           const xdr::Buffer& request, std::optional<Result<xdr::Buffer>> first) {
  std::vector<cluster::NodeId> bad;
  std::size_t holding_nothing = 0;
  Status last = error(Errc::unavailable, "no copy answered");
  for (cluster::NodeId node : nodes) {
    Result<xdr::Buffer> got =
        first ? std::move(*first) : peers_->call(node, UnitMethod::read, request);
    first.reset();
    if (got.ok() && got->size() == into.size()) {
      std::memcpy(into.data(), got->data(), into.size());
      if (!bad.empty()) repair(where, inode, offset, into.size(), node, bad);
      return {};
    }
    last = got.ok() ? error(Errc::io_error, "node " + std::to_string(node) + " answered a short read")
                    : got.status();
    if (last.code() == Errc::not_found) ++holding_nothing;
    if (last.code() == Errc::corrupt) {
      integrity_->checksum_failures.fetch_add(1);
      bad.push_back(node);
    }
  }
  if (holding_nothing == nodes.size()) {
    std::fill(into.begin(), into.end(), std::uint8_t{0});  // never written: a hole
    return {};
  }
  if (!bad.empty() && bad.size() + holding_nothing == nodes.size()) {
    spdlog::error("inode {}: every copy of the data at offset {} in pool {} fails its checksum",
                  inode, offset, where.pool);
    return error(Errc::corrupt, "inode " + std::to_string(inode) + ": every copy of offset " +
                                    std::to_string(offset) + " fails its checksum");
  }
  return error(Errc::unavailable, "no copy of inode " + std::to_string(inode) + " at offset " +
                                      std::to_string(offset) + " could be read: " +
                                      last.message());
}

// Puts the blocks of `bad` copies that still fail their checksums back from `good`'s, whole
// checksum blocks at a time; a block a writer rewrote meanwhile is left alone.
void PoolData::repair(const Placement& where, InodeId inode, std::uint64_t offset,
                      std::size_t length, cluster::NodeId good,
                      const std::vector<cluster::NodeId>& bad) {
  const std::uint64_t first = offset / internal::kChecksumBlock * internal::kChecksumBlock;
  const std::uint64_t end =
      (offset + length + internal::kChecksumBlock - 1) / internal::kChecksumBlock *
      internal::kChecksumBlock;
  Result<xdr::Buffer> blocks =
      peers_->call(good, UnitMethod::read, encode_unit_request({where.pool, inode, first, end - first, {}}));
  if (!blocks.ok() || blocks->size() != end - first) return;  // served; repaired next time
  const xdr::Buffer request = encode_unit_request({where.pool, inode, first, 0, *blocks});
  for (cluster::NodeId broken : bad) {
    if (Status s = peers_->call(broken, UnitMethod::repair, request).status(); !s.ok()) {
      spdlog::warn("inode {}: node {}'s copy at offset {} is still bad: {}", inode, broken, offset,
                   s.to_string());
      continue;
    }
    integrity_->checksum_repairs.fetch_add((end - first) / internal::kChecksumBlock);
    spdlog::warn("inode {}: node {}'s copy of offsets {}..{} in pool {} put back from node {}",
                 inode, broken, first, end, where.pool, good);
  }
}

Status PoolData::sync(const Placement& where, InodeId inode, AfterSync after) {
  const xdr::Buffer body =
      encode_unit_request({where.pool, inode, 0, static_cast<std::uint64_t>(after), {}});
  std::vector<UnitCall> calls;
  for (cluster::NodeId node : where.nodes) calls.push_back({node, UnitMethod::sync, body});
  const std::vector<Result<xdr::Buffer>> answers = call_each(calls);
  for (std::size_t k = 0; k < calls.size(); ++k) {
    TP_RETURN_IF_ERROR(boot_noted(calls[k].node, answers[k]));
  }
  return {};
}

Result<std::vector<cluster::NodeId>> PoolData::sync_past_down(
    const Placement& where, InodeId inode, const std::vector<SyncedNode>& synced) {
  const xdr::Buffer body = encode_unit_request({where.pool, inode, 0, 0, {}});
  std::vector<cluster::NodeId> missed;
  Status last;
  std::vector<UnitCall> calls;
  for (cluster::NodeId node : where.nodes) {
    const auto already = std::ranges::find(synced, node, &SyncedNode::node);
    if (already != synced.end()) {
      boot_ids_.note_boot(node, already->boot);
    } else if (!peers_->is_up(node)) {
      missed.push_back(node);
      last = error(Errc::unavailable, "node " + std::to_string(node) + " is down");
    } else {
      calls.push_back({node, UnitMethod::sync, body});
    }
  }
  const std::vector<Result<xdr::Buffer>> answers = call_each(calls);
  for (std::size_t k = 0; k < calls.size(); ++k) {
    Status synced = boot_noted(calls[k].node, answers[k]);
    if (synced.ok()) continue;
    if (!unreachable(synced)) return synced;
    missed.push_back(calls[k].node);
    last = std::move(synced);
  }
  if (!where.nodes.empty() && missed.size() == where.nodes.size()) return last;
  return missed;
}

void PoolData::for_each_unit_owners(
    const Placement& where, InodeId inode, std::uint64_t begin, std::uint64_t end,
    const std::function<bool(std::uint64_t unit, const std::vector<cluster::NodeId>& owners)>&
        visit) {
  if (where.stripe_unit == 0 || begin >= end) return;
  const cluster::Ring ring(where.nodes);
  for (std::uint64_t unit = begin / where.stripe_unit; unit <= (end - 1) / where.stripe_unit;
       ++unit) {
    const std::vector<cluster::NodeId> owners =
        ring.owners(cluster::Ring::key_of(inode, unit), std::max<std::uint32_t>(where.copies, 1));
    if (!visit(unit, owners)) return;
  }
}

bool PoolData::every_unit_kept(const Placement& where, InodeId inode, std::uint64_t end,
                               const std::vector<cluster::NodeId>& missed,
                               const CopyBehind& behind) const {
  if (where.stripe_unit == 0) return false;
  bool kept = true;
  for_each_unit_owners(
      where, inode, 0, end, [&](std::uint64_t unit, const std::vector<cluster::NodeId>& owners) {
        kept = std::any_of(owners.begin(), owners.end(), [&](cluster::NodeId node) {
          return std::find(missed.begin(), missed.end(), node) == missed.end() &&
                 !(behind && behind(node, unit));
        });
        return kept;
      });
  return kept;
}

std::vector<std::uint64_t> PoolData::units_held_by(const Placement& where, InodeId inode,
                                                   cluster::NodeId node, std::uint64_t end) const {
  std::vector<std::uint64_t> held;
  for_each_unit_owners(where, inode, 0, end,
                       [&](std::uint64_t unit, const std::vector<cluster::NodeId>& owners) {
                         if (std::find(owners.begin(), owners.end(), node) != owners.end()) {
                           held.push_back(unit);
                         }
                         return true;
                       });
  return held;
}

Status PoolData::drop_units(const Placement& from, const Placement& keep, InodeId inode,
                            std::uint64_t begin, std::uint64_t end, const CopyBehind& behind,
                            std::vector<cluster::NodeId>* left) {
  if (from.stripe_unit == 0 || from.stripe_unit != keep.stripe_unit || begin >= end) return {};
  // Per node, runs of consecutive units: as few messages as the bound on each allows.
  std::map<cluster::NodeId, std::vector<std::pair<std::uint64_t, std::uint64_t>>> runs;
  const cluster::Ring keep_ring(keep.nodes);
  for_each_unit_owners(
      from, inode, begin, end, [&](std::uint64_t unit, const std::vector<cluster::NodeId>& owners) {
        const std::vector<cluster::NodeId> kept = keep_ring.owners(
            cluster::Ring::key_of(inode, unit), std::max<std::uint32_t>(keep.copies, 1));
        for (cluster::NodeId node : owners) {
          if (std::find(kept.begin(), kept.end(), node) != kept.end() &&
              !(behind && behind(node, unit))) {
            continue;
          }
          auto& node_runs = runs[node];
          if (!node_runs.empty() && node_runs.back().second == unit) {
            ++node_runs.back().second;
          } else {
            node_runs.emplace_back(unit, unit + 1);
          }
        }
        return true;
      });
  Status first;
  for (const auto& [node, node_runs] : runs) {
    // A node down is not waited for, nor one that failed once: its units stay.
    Status node_status =
        peers_->is_up(node) ? Status{}
                            : error(Errc::unavailable, "node " + std::to_string(node) + " is down");
    for (auto run = node_runs.begin(); node_status.ok() && run != node_runs.end(); ++run) {
      // Only [begin, end) of the run's first and last units.
      std::uint64_t at = std::max(begin, run->first * from.stripe_unit);
      const std::uint64_t stop = std::min(end, run->second * from.stripe_unit);
      while (node_status.ok() && at < stop) {
        const std::uint64_t length = std::min(stop - at, kMaxDropBytes);
        node_status = peers_
                          ->call(node, UnitMethod::drop,
                                 encode_unit_request({from.pool, inode, at, length, {}}))
                          .status();
        at += length;
      }
    }
    if (node_status.ok()) continue;
    if (first.ok()) first = node_status;
    if (left != nullptr) left->push_back(node);
  }
  return first;
}

Status PoolData::copy_unit_to(const Placement& where, InodeId inode, std::uint64_t unit,
                              cluster::NodeId node, const CopyBehind& behind) {
  std::vector<std::uint8_t> bytes(where.stripe_unit);
  const std::uint64_t offset = unit * where.stripe_unit;
  const Status read =
      read_unit(where, inode, offset, bytes, [&](cluster::NodeId from, std::uint64_t u) {
        return from == node || (behind && behind(from, u));
      });
  if (!read.ok()) {
    return error(Errc::io_error, "no good copy of unit " + std::to_string(unit) + " of inode " +
                                     std::to_string(inode) + " to copy: " + read.message());
  }
  return call_counting_boots(node, UnitMethod::write,
                             encode_unit_request({where.pool, inode, offset, 1, bytes}));
}

Status PoolData::truncate(const Placement& where, InodeId inode, std::uint64_t size) {
  const xdr::Buffer body = encode_unit_request({where.pool, inode, 0, size, {}});
  for (cluster::NodeId node : where.nodes) {
    TP_RETURN_IF_ERROR(peers_->call(node, UnitMethod::truncate, body).status());
  }
  return {};
}

std::vector<cluster::NodeId> PoolData::remove(const Placement& where, InodeId inode) {
  const xdr::Buffer body = encode_unit_request({where.pool, inode, 0, 0, {}});
  std::vector<cluster::NodeId> left;
  for (cluster::NodeId node : where.nodes) {
    if (!peers_->is_up(node)) {
      left.push_back(node);
    } else if (Status s = peers_->call(node, UnitMethod::remove, body).status(); !s.ok()) {
      spdlog::warn("inode {}: node {} keeps its units in pool {} for now: {}", inode, node,
                   where.pool, s.to_string());
      left.push_back(node);
    }
  }
  return left;
}

}  // namespace tidepool::store
