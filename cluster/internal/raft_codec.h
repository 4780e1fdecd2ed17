// The wire form of Raft's messages (XDR), so that they travel over any Transport.
#pragma once

#include "cluster/internal/raft_c.h"

#include <span>
#include <string_view>

#include "cluster/types.h"
#include "common/status.h"
#include "common/xdr.h"

namespace tidepool::cluster::internal {

// Bounds a decoder enforces, so that a lying length cannot make a node allocate without end.
inline constexpr std::size_t kMaxEntriesPerMessage = 4096;
inline constexpr std::size_t kMaxEntryBytes = 16 << 20;
inline constexpr std::size_t kMaxSnapshotBytes = 256 << 20;
inline constexpr std::size_t kMaxServers = 1024;
inline constexpr std::size_t kMaxAddressLength = 256;

// Encodes `message` as sent by `sender` (message.server_id, the destination, is not encoded).
void encode_raft_message(const raft_message& message, NodeId sender, xdr::Encoder& out);

// A decoded message whose allocations follow Raft's rules for received messages, so that it
// can be handed to Raft, which then owns them: append entries share one raft_malloc'ed batch,
// a snapshot's configuration and data are raft_malloc'ed. server_address is left null.
Result<raft_message> decode_raft_message(std::span<const std::uint8_t> bytes);

// A Raft configuration (servers with their addresses and roles), as carried by snapshots.
void encode_configuration(const raft_configuration& conf, xdr::Encoder& out);
// On success `conf` is initialised and the caller must raft_configuration_close it.
bool decode_configuration(xdr::Decoder& in, raft_configuration& conf);

// Frees what decode_raft_message allocated, for a message that is not handed to Raft.
void release_raft_message(raft_message& message);

}  // namespace tidepool::cluster::internal
