// libFuzzer target: what the cluster layer decodes from other nodes. The first byte picks the
// decoder, the rest is its input:
//   - a Raft message (decode_raft_message): what decodes re-encodes to a message that decodes;
//   - a group view change, decoded and applied to a configuration database (ConfigDb::apply,
//     which every node runs on what the log holds): a change that applies or is refused, never
//     a database failure;
//   - a group view snapshot (ConfigDb::restore), as a node that fell behind installs it;
//   - a Raft configuration, as snapshots carry it.
// None may crash, hang or allocate without bound.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>

#include "cluster/internal/config_db.h"
#include "cluster/internal/raft_codec.h"

namespace {

using namespace tidepool;
using namespace tidepool::cluster;
using namespace tidepool::cluster::internal;

// Kept across inputs, as a node's is across changes; emptied now and then so that it stays
// small.
constexpr int kInputsBetweenResets = 1000;

struct Database {
  std::unique_ptr<ConfigDb> db;
  xdr::Buffer empty;
  int inputs = 0;
};

Database& database() {
  static Database* opened = [] {
    const std::string path = "/dev/shm/tidepool-cluster-fuzz-" + std::to_string(::getpid());
    auto db = ConfigDb::open(path);
    if (!db.ok()) std::abort();
    auto* made = new Database{std::move(db).value(), {}, 0};
    made->empty = made->db->snapshot();
    return made;
  }();
  return *opened;
}

void raft_message_round_trip(std::span<const std::uint8_t> bytes) {
  Result<raft_message> decoded = decode_raft_message(bytes);
  if (!decoded.ok()) return;
  raft_message message = *decoded;
  xdr::Buffer again;
  xdr::Encoder encoder(again);
  encode_raft_message(message, message.server_id, encoder);
  Result<raft_message> redecoded = decode_raft_message(again);
  if (!redecoded.ok()) std::abort();
  raft_message second = *redecoded;
  release_raft_message(second);
  release_raft_message(message);
}

void apply_change(std::span<const std::uint8_t> bytes) {
  Database& d = database();
  Change change;
  Status outcome;
  if (!d.db->apply(bytes, change, outcome).ok()) std::abort();
  (void)d.db->view();
}

void restore_snapshot(std::span<const std::uint8_t> bytes) {
  Database& d = database();
  if (d.db->restore(bytes).ok()) (void)d.db->view();
  if (!d.db->restore(d.empty).ok()) std::abort();
}

void read_configuration(std::span<const std::uint8_t> bytes) {
  xdr::Decoder decoder(bytes);
  raft_configuration conf;
  if (decode_configuration(decoder, conf)) raft_configuration_close(&conf);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::span<const std::uint8_t> rest(data + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      raft_message_round_trip(rest);
      break;
    case 1:
      apply_change(rest);
      break;
    case 2:
      restore_snapshot(rest);
      break;
    default:
      read_configuration(rest);
      break;
  }
  Database& d = database();
  if (++d.inputs % kInputsBetweenResets == 0 && !d.db->restore(d.empty).ok()) std::abort();
  return 0;
}
