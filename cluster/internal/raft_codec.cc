#include "cluster/internal/raft_codec.h"

#include <cstring>
#include <string>

namespace tidepool::cluster::internal {
namespace {

// Copies `bytes` into a raft_malloc'ed buffer Raft may later raft_free. Never returns a null
// base for an empty payload, since Raft frees the pointer unconditionally.
bool copy_to_raft_buffer(std::span<const std::uint8_t> bytes, raft_buffer& buffer) {
  buffer.base = raft_malloc(bytes.empty() ? 1 : bytes.size());
  buffer.len = bytes.size();
  if (buffer.base == nullptr) return false;
  if (!bytes.empty()) std::memcpy(buffer.base, bytes.data(), bytes.size());
  return true;
}

bool decode_entries(xdr::Decoder& in, raft_append_entries& message) {
  message.entries = nullptr;
  message.n_entries = in.array_count(kMaxEntriesPerMessage, 16);
  if (!in.ok() || message.n_entries == 0) return in.ok();
  // Two passes: the first validates and sizes, the second copies into one batch.
  struct Seen {
    raft_term term;
    unsigned short type;
    std::span<const std::uint8_t> data;
  };
  std::vector<Seen> seen;
  seen.reserve(message.n_entries);
  std::size_t total = 0;
  for (unsigned i = 0; i < message.n_entries; ++i) {
    raft_term term = in.u64();
    std::uint32_t type = in.u32();
    auto data = in.opaque(kMaxEntryBytes);
    if (type != RAFT_COMMAND && type != RAFT_BARRIER && type != RAFT_CHANGE) in.fail();
    if (!in.ok()) return false;
    seen.push_back({term, static_cast<unsigned short>(type), data});
    total += data.size();
  }
  auto* entries = static_cast<raft_entry*>(raft_calloc(message.n_entries, sizeof(raft_entry)));
  auto* batch = static_cast<std::uint8_t*>(raft_malloc(total == 0 ? 1 : total));
  if (entries == nullptr || batch == nullptr) {
    raft_free(entries);
    raft_free(batch);
    in.fail();
    return false;
  }
  std::uint8_t* cursor = batch;
  for (unsigned i = 0; i < message.n_entries; ++i) {
    entries[i].term = seen[i].term;
    entries[i].type = seen[i].type;
    entries[i].buf.base = cursor;
    entries[i].buf.len = seen[i].data.size();
    entries[i].batch = batch;
    if (!seen[i].data.empty()) std::memcpy(cursor, seen[i].data.data(), seen[i].data.size());
    cursor += seen[i].data.size();
  }
  message.entries = entries;
  return true;
}

}  // namespace

void encode_configuration(const raft_configuration& conf, xdr::Encoder& out) {
  out.u32(conf.n);
  for (unsigned i = 0; i < conf.n; ++i) {
    out.u64(conf.servers[i].id);
    out.string(conf.servers[i].address);
    out.i32(conf.servers[i].role);
  }
}

bool decode_configuration(xdr::Decoder& in, raft_configuration& conf) {
  raft_configuration_init(&conf);
  std::uint32_t n = in.array_count(kMaxServers, 16);
  for (std::uint32_t i = 0; i < n && in.ok(); ++i) {
    raft_id id = in.u64();
    std::string address(in.string(kMaxAddressLength));
    int role = in.i32();
    if (!in.ok()) break;
    if (role != RAFT_STANDBY && role != RAFT_VOTER && role != RAFT_SPARE) in.fail();
    if (id == 0 || raft_configuration_add(&conf, id, address.c_str(), role) != 0) in.fail();
  }
  if (!in.ok()) raft_configuration_close(&conf);
  return in.ok();
}

void encode_raft_message(const raft_message& message, NodeId sender, xdr::Encoder& out) {
  out.u32(message.type);
  out.u64(sender);
  switch (message.type) {
    case RAFT_IO_REQUEST_VOTE: {
      const auto& m = message.request_vote;
      out.u64(m.term);
      out.u64(m.candidate_id);
      out.u64(m.last_log_index);
      out.u64(m.last_log_term);
      out.boolean(m.disrupt_leader);
      out.boolean(m.pre_vote);
      break;
    }
    case RAFT_IO_REQUEST_VOTE_RESULT: {
      const auto& m = message.request_vote_result;
      out.u64(m.term);
      out.boolean(m.vote_granted);
      out.u32(static_cast<std::uint32_t>(m.pre_vote));
      break;
    }
    case RAFT_IO_APPEND_ENTRIES: {
      const auto& m = message.append_entries;
      out.u64(m.term);
      out.u64(m.prev_log_index);
      out.u64(m.prev_log_term);
      out.u64(m.leader_commit);
      out.u32(m.n_entries);
      for (unsigned i = 0; i < m.n_entries; ++i) {
        out.u64(m.entries[i].term);
        out.u32(m.entries[i].type);
        out.opaque({static_cast<const std::uint8_t*>(m.entries[i].buf.base), m.entries[i].buf.len});
      }
      break;
    }
    case RAFT_IO_APPEND_ENTRIES_RESULT: {
      const auto& m = message.append_entries_result;
      out.u64(m.term);
      out.u64(m.rejected);
      out.u64(m.last_log_index);
      break;
    }
    case RAFT_IO_INSTALL_SNAPSHOT: {
      const auto& m = message.install_snapshot;
      out.u64(m.term);
      out.u64(m.last_index);
      out.u64(m.last_term);
      encode_configuration(m.conf, out);
      out.u64(m.conf_index);
      out.opaque({static_cast<const std::uint8_t*>(m.data.base), m.data.len});
      break;
    }
    case RAFT_IO_TIMEOUT_NOW: {
      const auto& m = message.timeout_now;
      out.u64(m.term);
      out.u64(m.last_log_index);
      out.u64(m.last_log_term);
      break;
    }
    default:
      break;
  }
}

Result<raft_message> decode_raft_message(std::span<const std::uint8_t> bytes) {
  xdr::Decoder in(bytes);
  raft_message message{};
  message.type = static_cast<unsigned short>(in.u32());
  message.server_id = in.u64();
  message.server_address = nullptr;
  bool allocated = false;
  switch (message.type) {
    case RAFT_IO_REQUEST_VOTE: {
      auto& m = message.request_vote;
      m.term = in.u64();
      m.candidate_id = in.u64();
      m.last_log_index = in.u64();
      m.last_log_term = in.u64();
      m.disrupt_leader = in.boolean();
      m.pre_vote = in.boolean();
      break;
    }
    case RAFT_IO_REQUEST_VOTE_RESULT: {
      auto& m = message.request_vote_result;
      m.term = in.u64();
      m.vote_granted = in.boolean();
      std::uint32_t pre_vote = in.u32();
      if (pre_vote > raft_tribool_false) in.fail();
      m.pre_vote = static_cast<raft_tribool>(pre_vote);
      break;
    }
    case RAFT_IO_APPEND_ENTRIES: {
      auto& m = message.append_entries;
      m.term = in.u64();
      m.prev_log_index = in.u64();
      m.prev_log_term = in.u64();
      m.leader_commit = in.u64();
      allocated = in.ok() && decode_entries(in, m);
      break;
    }
    case RAFT_IO_APPEND_ENTRIES_RESULT: {
      auto& m = message.append_entries_result;
      m.term = in.u64();
      m.rejected = in.u64();
      m.last_log_index = in.u64();
      break;
    }
    case RAFT_IO_INSTALL_SNAPSHOT: {
      auto& m = message.install_snapshot;
      m.term = in.u64();
      m.last_index = in.u64();
      m.last_term = in.u64();
      if (!in.ok() || !decode_configuration(in, m.conf)) {
        in.fail();
        break;
      }
      m.conf_index = in.u64();
      auto data = in.opaque(kMaxSnapshotBytes);
      if (!in.ok() || !copy_to_raft_buffer(data, m.data)) {
        raft_configuration_close(&m.conf);
        in.fail();
        break;
      }
      allocated = true;
      break;
    }
    case RAFT_IO_TIMEOUT_NOW: {
      auto& m = message.timeout_now;
      m.term = in.u64();
      m.last_log_index = in.u64();
      m.last_log_term = in.u64();
      break;
    }
    default:
      in.fail();
  }
  if (in.ok() && (in.remaining() != 0 || message.server_id == 0)) {
    if (allocated) release_raft_message(message);
    return error(Errc::invalid_argument, "malformed raft message");
  }
  if (!in.ok()) return error(Errc::invalid_argument, "malformed raft message");
  return message;
}

void release_raft_message(raft_message& message) {
  if (message.type == RAFT_IO_APPEND_ENTRIES && message.append_entries.entries != nullptr) {
    raft_free(message.append_entries.entries[0].batch);
    raft_free(message.append_entries.entries);
    message.append_entries.entries = nullptr;
    message.append_entries.n_entries = 0;
  } else if (message.type == RAFT_IO_INSTALL_SNAPSHOT) {
    raft_configuration_close(&message.install_snapshot.conf);
    raft_free(message.install_snapshot.data.base);
    message.install_snapshot.data.base = nullptr;
  }
}

}  // namespace tidepool::cluster::internal
