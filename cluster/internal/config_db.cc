#include "cluster/internal/config_db.h"

#include <utility>

namespace tidepool::cluster::internal {
namespace {

constexpr const char* kSchema = R"sql(
  CREATE TABLE IF NOT EXISTS counters(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS nodes(
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, backend_address TEXT NOT NULL,
    frontend_address TEXT NOT NULL, admin_address TEXT NOT NULL, pool TEXT NOT NULL,
    up INTEGER NOT NULL, certificate TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS revoked(certificate TEXT PRIMARY KEY);
  CREATE TABLE IF NOT EXISTS objects(
    kind TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, changed INTEGER NOT NULL,
    PRIMARY KEY (kind, name));
)sql";

void encode_node(const NodeInfo& node, xdr::Encoder& out) {
  out.u64(node.id);
  out.string(node.name);
  out.string(node.backend_address);
  out.string(node.frontend_address);
  out.string(node.admin_address);
  out.string(node.pool);
  out.boolean(node.up);
  out.string(node.certificate);
}

NodeInfo decode_node(xdr::Decoder& in) {
  NodeInfo node;
  node.id = in.u64();
  node.name = in.string(kMaxNameLength);
  node.backend_address = in.string(kMaxNameLength);
  node.frontend_address = in.string(kMaxNameLength);
  node.admin_address = in.string(kMaxNameLength);
  node.pool = in.string(kMaxNameLength);
  node.up = in.boolean();
  node.certificate = in.string(kMaxFingerprintLength);
  return node;
}

void encode_object(const ConfigObject& object, xdr::Encoder& out) {
  out.string(object.kind);
  out.string(object.name);
  out.string(object.body);
  out.u64(object.changed);
}

ConfigObject decode_object(xdr::Decoder& in) {
  ConfigObject object;
  object.kind = in.string(kMaxNameLength);
  object.name = in.string(kMaxNameLength);
  object.body = in.string(kMaxObjectBodyBytes);
  object.changed = in.u64();
  return object;
}

Status insert_node(sqlite::Database& db, const NodeInfo& node) {
  auto insert = db.prepare(
      "INSERT INTO nodes(id, name, backend_address, frontend_address, admin_address, pool, up, "
      "certificate) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  return insert.bind(1, node.id)
      .bind(2, std::string_view(node.name))
      .bind(3, std::string_view(node.backend_address))
      .bind(4, std::string_view(node.frontend_address))
      .bind(5, std::string_view(node.admin_address))
      .bind(6, std::string_view(node.pool))
      .bind(7, std::int64_t{node.up})
      .bind(8, std::string_view(node.certificate))
      .run();
}

// FNV-1a over the previous digest and the change, then mixed: equal digests mean equal
// histories (barring a 64-bit collision).
std::uint64_t chain(std::uint64_t digest, std::span<const std::uint8_t> change) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto feed = [&h](std::uint8_t byte) {
    h ^= byte;
    h *= 0x100000001b3ULL;
  };
  for (int i = 0; i < 8; ++i) feed(static_cast<std::uint8_t>(digest >> (8 * i)));
  for (std::uint8_t byte : change) feed(byte);
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

}  // namespace

void encode_change(const Change& change, xdr::Encoder& out) {
  out.u32(static_cast<std::uint32_t>(change.kind));
  encode_node(change.node, out);
  encode_object(change.object, out);
}

Result<Change> decode_change(std::span<const std::uint8_t> bytes) {
  xdr::Decoder in(bytes);
  Change change;
  std::uint32_t kind = in.u32();
  change.node = decode_node(in);
  change.object = decode_object(in);
  if (!in.ok() || in.remaining() != 0 || kind < 1 ||
      kind > static_cast<std::uint32_t>(Change::Kind::delete_object)) {
    return error(Errc::invalid_argument, "malformed group change");
  }
  change.kind = static_cast<Change::Kind>(kind);
  return change;
}

Result<std::unique_ptr<ConfigDb>> ConfigDb::open(const std::string& path) {
  TP_ASSIGN_OR_RETURN(auto db, sqlite::Database::open(path, sqlite::Database::Durability::rebuildable));
  // The view is rebuilt from the Raft log at every start: tables of an older schema go.
  TP_RETURN_IF_ERROR(db->exec(
      "DROP TABLE IF EXISTS nodes; DROP TABLE IF EXISTS objects; DROP TABLE IF EXISTS revoked;"));
  TP_RETURN_IF_ERROR(db->exec(kSchema));
  std::unique_ptr<ConfigDb> config(new ConfigDb(std::move(db)));
  TP_RETURN_IF_ERROR(config->clear());
  return config;
}

Status ConfigDb::clear() {
  TP_RETURN_IF_ERROR(db_->exec(
      "DELETE FROM counters; DELETE FROM nodes; DELETE FROM objects; DELETE FROM revoked;"));
  counters_ = {};
  view_stale_ = true;
  return {};
}

Status ConfigDb::commit(const Counters& next, Status written) {
  for (auto [key, value] : {std::pair{"epoch", next.epoch}, std::pair{"applied", next.applied},
                            std::pair{"digest", next.digest}}) {
    if (!written.ok()) break;
    auto put = db_->prepare("INSERT OR REPLACE INTO counters(key, value) VALUES (?, ?)");
    written = put.bind(1, std::string_view(key)).bind(2, value).run();
  }
  if (written.ok()) written = db_->exec("COMMIT");
  if (!written.ok()) {
    (void)db_->exec("ROLLBACK");
    return written;
  }
  counters_ = next;
  view_stale_ = true;
  return {};
}

Status ConfigDb::apply(std::span<const std::uint8_t> encoded, Change& change, Status& outcome) {
  auto decoded = decode_change(encoded);
  TP_RETURN_IF_ERROR(db_->exec("BEGIN"));
  Status written;
  if (decoded.ok()) {
    change = std::move(decoded).value();
    written = apply_change(change, outcome);
  } else {
    change = Change{};
    outcome = decoded.status();
  }
  Counters next = counters_;
  next.applied += 1;
  next.digest = chain(next.digest, encoded);
  if (outcome.ok()) next.epoch += 1;
  return commit(next, written);
}

bool ConfigDb::revoked(const std::string& certificate) {
  if (certificate.empty()) return false;
  auto row = db_->prepare("SELECT 1 FROM revoked WHERE certificate = ?");
  row.bind(1, std::string_view(certificate));
  return row.next_row();
}

bool ConfigDb::exists(const std::string& kind, const std::string& name) {
  auto row = db_->prepare("SELECT 1 FROM objects WHERE kind = ? AND name = ?");
  row.bind(1, std::string_view(kind)).bind(2, std::string_view(name));
  return row.next_row();
}

Status ConfigDb::apply_change(const Change& change, Status& outcome) {
  outcome = {};
  const NodeInfo& node = change.node;
  const ConfigObject& object = change.object;
  // The epoch this change will carry if it succeeds.
  const Epoch next_epoch = counters_.epoch + 1;
  switch (change.kind) {
    case Change::Kind::add_node: {
      if (node.id == 0 || node.name.empty()) {
        outcome = error(Errc::invalid_argument, "a node needs an id and a name");
        return {};
      }
      if (revoked(node.certificate)) {
        outcome = error(Errc::access_denied, "node " + std::to_string(node.id) +
                                                 "'s certificate was revoked when a node was "
                                                 "removed: it is added with a new one");
        return {};
      }
      auto same = db_->prepare(
          "SELECT id, name, backend_address, frontend_address, admin_address, pool, "
          "certificate FROM nodes WHERE id = ? OR name = ?");
      same.bind(1, node.id).bind(2, std::string_view(node.name));
      if (same.next_row()) {
        bool identical = static_cast<NodeId>(same.int64(0)) == node.id &&
                         same.blob(1) == node.name && same.blob(2) == node.backend_address &&
                         same.blob(3) == node.frontend_address &&
                         same.blob(4) == node.admin_address && same.blob(5) == node.pool &&
                         same.blob(6) == node.certificate;
        outcome = identical ? Status{}
                            : error(Errc::already_exists,
                                    "node id " + std::to_string(node.id) + " or name '" +
                                        node.name + "' is already registered");
        return same.status();
      }
      TP_RETURN_IF_ERROR(same.status());
      NodeInfo registered = node;
      registered.up = true;  // a node joins up; the leader records otherwise when it is silent
      return insert_node(*db_, registered);
    }
    case Change::Kind::remove_node:
      TP_RETURN_IF_ERROR(db_->prepare("INSERT OR IGNORE INTO revoked(certificate) SELECT "
                                      "certificate FROM nodes WHERE id = ? AND certificate != ''")
                             .bind(1, node.id)
                             .run());
      [[fallthrough]];
    case Change::Kind::set_node_state: {
      auto update = change.kind == Change::Kind::remove_node
                        ? db_->prepare("DELETE FROM nodes WHERE id = ?1")
                        : db_->prepare("UPDATE nodes SET up = ?2 WHERE id = ?1");
      update.bind(1, node.id);
      if (change.kind == Change::Kind::set_node_state) update.bind(2, std::int64_t{node.up});
      TP_RETURN_IF_ERROR(update.run());
      if (db_->changes() == 0) {
        outcome = error(Errc::not_found, "no node with id " + std::to_string(node.id));
      }
      return {};
    }
    case Change::Kind::create_object:
    case Change::Kind::update_object: {
      if (object.kind.empty() || object.name.empty()) {
        outcome = error(Errc::invalid_argument, "a configuration object needs a kind and a name");
        return {};
      }
      const bool creating = change.kind == Change::Kind::create_object;
      const bool conditional = !creating && object.changed != 0;
      auto write = creating ? db_->prepare("INSERT OR IGNORE INTO objects(kind, name, body, changed) "
                                           "VALUES (?1, ?2, ?3, ?4)")
                   : conditional ? db_->prepare("UPDATE objects SET body = ?3, changed = ?4 "
                                                "WHERE kind = ?1 AND name = ?2 AND changed = ?5")
                                 : db_->prepare("UPDATE objects SET body = ?3, changed = ?4 "
                                                "WHERE kind = ?1 AND name = ?2");
      write.bind(1, std::string_view(object.kind))
          .bind(2, std::string_view(object.name))
          .bind(3, std::string_view(object.body))
          .bind(4, next_epoch);
      if (conditional) write.bind(5, object.changed);
      TP_RETURN_IF_ERROR(write.run());
      if (db_->changes() != 0) return {};
      if (creating) {
        outcome = error(Errc::already_exists, object.kind + " '" + object.name + "' already exists");
      } else if (conditional && exists(object.kind, object.name)) {
        outcome = error(Errc::precondition_failed,
                        object.kind + " '" + object.name + "' changed after epoch " +
                            std::to_string(object.changed));
      } else {
        outcome = error(Errc::not_found, "no " + object.kind + " '" + object.name + "'");
      }
      return {};
    }
    case Change::Kind::delete_object: {
      auto erase = db_->prepare("DELETE FROM objects WHERE kind = ? AND name = ?");
      TP_RETURN_IF_ERROR(erase.bind(1, std::string_view(object.kind))
                             .bind(2, std::string_view(object.name))
                             .run());
      if (db_->changes() == 0) {
        outcome = error(Errc::not_found, "no " + object.kind + " '" + object.name + "'");
      }
      return {};
    }
  }
  outcome = error(Errc::invalid_argument, "unknown change");
  return {};
}

const GroupView& ConfigDb::view() {
  if (!view_stale_) return view_;
  GroupView view;
  view.epoch = counters_.epoch;
  view.applied = counters_.applied;
  view.digest = counters_.digest;
  auto nodes = db_->prepare(
      "SELECT id, name, backend_address, frontend_address, admin_address, pool, up, "
      "certificate FROM nodes ORDER BY id");
  while (nodes.next_row()) {
    view.nodes.push_back(NodeInfo{static_cast<NodeId>(nodes.int64(0)), nodes.blob(1), nodes.blob(2),
                                  nodes.blob(3), nodes.blob(4), nodes.blob(5), nodes.int64(6) != 0,
                                  nodes.blob(7)});
  }
  auto objects = db_->prepare("SELECT kind, name, body, changed FROM objects ORDER BY kind, name");
  while (objects.next_row()) {
    view.objects.push_back(ConfigObject{objects.blob(0), objects.blob(1), objects.blob(2),
                                        static_cast<Epoch>(objects.int64(3))});
  }
  auto revoked = db_->prepare("SELECT certificate FROM revoked ORDER BY certificate");
  while (revoked.next_row()) view.revoked_certificates.push_back(revoked.blob(0));
  view_ = std::move(view);
  view_stale_ = false;
  return view_;
}

xdr::Buffer ConfigDb::snapshot() {
  const GroupView& state = view();
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encoder.u64(state.epoch);
  encoder.u64(state.applied);
  encoder.u64(state.digest);
  encoder.u32(static_cast<std::uint32_t>(state.nodes.size()));
  for (const auto& node : state.nodes) encode_node(node, encoder);
  encoder.u32(static_cast<std::uint32_t>(state.objects.size()));
  for (const auto& object : state.objects) encode_object(object, encoder);
  encoder.u32(static_cast<std::uint32_t>(state.revoked_certificates.size()));
  for (const auto& certificate : state.revoked_certificates) encoder.string(certificate);
  return out;
}

Status ConfigDb::restore(std::span<const std::uint8_t> snapshot) {
  xdr::Decoder in(snapshot);
  Epoch epoch = in.u64();
  std::uint64_t applied = in.u64();
  std::uint64_t digest = in.u64();
  std::vector<NodeInfo> nodes(in.array_count(1 << 16, 32));
  for (auto& node : nodes) node = decode_node(in);
  std::vector<ConfigObject> objects(in.array_count(1 << 20, 16));
  for (auto& object : objects) object = decode_object(in);
  std::vector<std::string> revoked(in.array_count(1 << 20, 4));
  for (auto& certificate : revoked) certificate = in.string(kMaxFingerprintLength);
  if (!in.ok() || in.remaining() != 0) {
    return error(Errc::corrupt, "malformed group view snapshot");
  }
  TP_RETURN_IF_ERROR(db_->exec("BEGIN"));
  Status s = db_->exec("DELETE FROM nodes; DELETE FROM objects; DELETE FROM revoked;");
  for (const auto& node : nodes) {
    if (!s.ok()) break;
    s = insert_node(*db_, node);
  }
  for (const auto& object : objects) {
    if (!s.ok()) break;
    auto insert =
        db_->prepare("INSERT INTO objects(kind, name, body, changed) VALUES (?, ?, ?, ?)");
    s = insert.bind(1, std::string_view(object.kind))
            .bind(2, std::string_view(object.name))
            .bind(3, std::string_view(object.body))
            .bind(4, object.changed)
            .run();
  }
  for (const auto& certificate : revoked) {
    if (!s.ok()) break;
    s = db_->prepare("INSERT OR IGNORE INTO revoked(certificate) VALUES (?)")
            .bind(1, std::string_view(certificate))
            .run();
  }
  return commit(Counters{epoch, applied, digest}, s);
}

}  // namespace tidepool::cluster::internal
