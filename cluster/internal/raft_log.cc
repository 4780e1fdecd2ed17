#include "cluster/internal/raft_log.h"

#include <cstring>

#include "cluster/internal/raft_codec.h"

namespace tidepool::cluster::internal {
namespace {

enum MetaKey { kTerm = 1, kVote = 2 };

constexpr const char* kSchema = R"sql(
  CREATE TABLE IF NOT EXISTS raft_meta(key INTEGER PRIMARY KEY, value INTEGER NOT NULL);
  CREATE TABLE IF NOT EXISTS raft_entries(
    idx INTEGER PRIMARY KEY, term INTEGER NOT NULL, type INTEGER NOT NULL, data BLOB NOT NULL);
  CREATE TABLE IF NOT EXISTS raft_snapshot(
    id INTEGER PRIMARY KEY CHECK (id = 1), idx INTEGER NOT NULL, term INTEGER NOT NULL,
    configuration BLOB NOT NULL, configuration_index INTEGER NOT NULL, data BLOB NOT NULL);
)sql";

std::span<const std::uint8_t> bytes_of(const raft_buffer& buffer) {
  return {static_cast<const std::uint8_t*>(buffer.base), buffer.len};
}

void* copy_to_raft_memory(const std::string& bytes) {
  void* memory = raft_malloc(bytes.empty() ? 1 : bytes.size());
  if (memory != nullptr && !bytes.empty()) std::memcpy(memory, bytes.data(), bytes.size());
  return memory;
}

}  // namespace

Result<std::unique_ptr<RaftLog>> RaftLog::open(const std::string& path) {
  TP_ASSIGN_OR_RETURN(auto db, sqlite::Database::open(path));
  TP_RETURN_IF_ERROR(db->exec(kSchema));
  std::unique_ptr<RaftLog> log(new RaftLog(std::move(db)));
  {
    auto snapshot = log->db_->prepare("SELECT idx, term FROM raft_snapshot");
    if (snapshot.next_row()) {
      log->snapshot_index_ = static_cast<raft_index>(snapshot.int64(0));
      log->snapshot_term_ = static_cast<raft_term>(snapshot.int64(1));
      log->next_index_ = log->snapshot_index_ + 1;
    }
    auto last = log->db_->prepare("SELECT max(idx) FROM raft_entries");
    if (last.next_row() && !last.is_null(0)) {
      log->next_index_ = static_cast<raft_index>(last.int64(0)) + 1;
    }
  }
  return log;
}

int RaftLog::set_meta(int key, std::uint64_t value) {
  auto put = db_->prepare("INSERT OR REPLACE INTO raft_meta(key, value) VALUES (?, ?)");
  return put.bind(1, static_cast<std::int64_t>(key)).bind(2, value).run().ok() ? 0 : RAFT_IOERR;
}

int RaftLog::set_term(raft_term term) {
  if (!db_->exec("BEGIN").ok()) return RAFT_IOERR;
  if (set_meta(kTerm, term) != 0 || set_meta(kVote, 0) != 0 || !db_->exec("COMMIT").ok()) {
    (void)db_->exec("ROLLBACK");
    return RAFT_IOERR;
  }
  return 0;
}

int RaftLog::set_vote(raft_id server) { return set_meta(kVote, server); }

int RaftLog::bootstrap(const raft_configuration& conf) {
  auto term = db_->prepare("SELECT value FROM raft_meta WHERE key = 1");
  if ((term.next_row() && term.int64(0) != 0) || next_index_ != 1) return RAFT_CANTBOOTSTRAP;
  raft_buffer encoded{};
  if (raft_configuration_encode(&conf, &encoded) != 0) return RAFT_NOMEM;
  raft_entry entry{};
  entry.term = 1;
  entry.type = RAFT_CHANGE;
  entry.buf = encoded;
  int rc = set_term(1);
  if (rc == 0) rc = append(&entry, 1);
  raft_free(encoded.base);
  return rc;
}

int RaftLog::append(const raft_entry entries[], unsigned n) {
  if (!db_->exec("BEGIN").ok()) return RAFT_IOERR;
  for (unsigned i = 0; i < n; ++i) {
    auto insert =
        db_->prepare("INSERT INTO raft_entries(idx, term, type, data) VALUES (?, ?, ?, ?)");
    Status s = insert.bind(1, next_index_ + i)
                   .bind(2, entries[i].term)
                   .bind(3, static_cast<std::uint32_t>(entries[i].type))
                   .bind(4, bytes_of(entries[i].buf))
                   .run();
    if (!s.ok()) {
      (void)db_->exec("ROLLBACK");
      return RAFT_IOERR;
    }
  }
  if (!db_->exec("COMMIT").ok()) {
    (void)db_->exec("ROLLBACK");
    return RAFT_IOERR;
  }
  next_index_ += n;
  return 0;
}

int RaftLog::truncate(raft_index index) {
  auto erase = db_->prepare("DELETE FROM raft_entries WHERE idx >= ?");
  if (!erase.bind(1, index).run().ok()) return RAFT_IOERR;
  if (index < next_index_) next_index_ = index;
  return 0;
}

int RaftLog::put_snapshot(const raft_snapshot& snapshot, unsigned trailing) {
  xdr::Buffer configuration;
  xdr::Encoder encoder(configuration);
  encode_configuration(snapshot.configuration, encoder);
  std::string data;
  for (unsigned i = 0; i < snapshot.n_bufs; ++i) {
    data.append(static_cast<const char*>(snapshot.bufs[i].base), snapshot.bufs[i].len);
  }
  if (!db_->exec("BEGIN").ok()) return RAFT_IOERR;
  auto put = db_->prepare(
      "INSERT OR REPLACE INTO raft_snapshot(id, idx, term, configuration, configuration_index, "
      "data) VALUES (1, ?, ?, ?, ?, ?)");
  Status s = put.bind(1, snapshot.index)
                 .bind(2, snapshot.term)
                 .bind(3, std::span<const std::uint8_t>(configuration.data(), configuration.size()))
                 .bind(4, snapshot.configuration_index)
                 .bind(5, std::string_view(data))
                 .run();
  if (s.ok()) {
    if (trailing == 0) {
      s = db_->exec("DELETE FROM raft_entries");
    } else if (snapshot.index > trailing) {
      auto erase = db_->prepare("DELETE FROM raft_entries WHERE idx <= ?");
      s = erase.bind(1, snapshot.index - trailing).run();
    }
  }
  if (!s.ok() || !db_->exec("COMMIT").ok()) {
    (void)db_->exec("ROLLBACK");
    return RAFT_IOERR;
  }
  if (trailing == 0) next_index_ = snapshot.index + 1;
  snapshot_index_ = snapshot.index;
  snapshot_term_ = snapshot.term;
  return 0;
}

int RaftLog::get_snapshot(raft_snapshot** out) {
  *out = nullptr;
  auto row = db_->prepare(
      "SELECT idx, term, configuration, configuration_index, data FROM raft_snapshot");
  if (!row.next_row()) return row.status().ok() ? 0 : RAFT_IOERR;
  auto* snapshot = static_cast<raft_snapshot*>(raft_calloc(1, sizeof(raft_snapshot)));
  if (snapshot == nullptr) return RAFT_NOMEM;
  snapshot->index = static_cast<raft_index>(row.int64(0));
  snapshot->term = static_cast<raft_term>(row.int64(1));
  std::string configuration = row.blob(2);
  xdr::Decoder decoder({reinterpret_cast<const std::uint8_t*>(configuration.data()),
                        configuration.size()});
  if (!decode_configuration(decoder, snapshot->configuration)) {
    raft_free(snapshot);
    return RAFT_CORRUPT;
  }
  snapshot->configuration_index = static_cast<raft_index>(row.int64(3));
  std::string data = row.blob(4);
  snapshot->bufs = static_cast<raft_buffer*>(raft_malloc(sizeof(raft_buffer)));
  void* base = copy_to_raft_memory(data);
  if (snapshot->bufs == nullptr || base == nullptr) {
    raft_free(base);
    raft_free(snapshot->bufs);
    raft_configuration_close(&snapshot->configuration);
    raft_free(snapshot);
    return RAFT_NOMEM;
  }
  snapshot->bufs[0] = raft_buffer{base, data.size()};
  snapshot->n_bufs = 1;
  *out = snapshot;
  return 0;
}

int RaftLog::load(raft_term* term, raft_id* voted_for, raft_snapshot** snapshot,
                  raft_index* start_index, raft_entry** entries, std::size_t* n_entries) {
  *term = 0;
  *voted_for = 0;
  *entries = nullptr;
  *n_entries = 0;
  {
    auto meta = db_->prepare("SELECT key, value FROM raft_meta");
    while (meta.next_row()) {
      if (meta.int64(0) == kTerm) *term = static_cast<raft_term>(meta.int64(1));
      if (meta.int64(0) == kVote) *voted_for = static_cast<raft_id>(meta.int64(1));
    }
    if (!meta.status().ok()) return RAFT_IOERR;
  }
  if (int rc = get_snapshot(snapshot); rc != 0) return rc;
  *start_index = *snapshot != nullptr ? (*snapshot)->index + 1 : 1;

  struct Row {
    raft_index index;
    raft_term term;
    unsigned short type;
    std::string data;
  };
  std::vector<Row> rows;
  std::size_t total = 0;
  auto select = db_->prepare("SELECT idx, term, type, data FROM raft_entries ORDER BY idx");
  while (select.next_row()) {
    rows.push_back({static_cast<raft_index>(select.int64(0)),
                    static_cast<raft_term>(select.int64(1)),
                    static_cast<unsigned short>(select.int64(2)), select.blob(3)});
    total += rows.back().data.size();
  }
  // On failure Raft owns nothing: the snapshot read above is released here.
  auto fail = [snapshot](int rc) {
    if (*snapshot != nullptr) {
      raft_configuration_close(&(*snapshot)->configuration);
      raft_free((*snapshot)->bufs[0].base);
      raft_free((*snapshot)->bufs);
      raft_free(*snapshot);
      *snapshot = nullptr;
    }
    return rc;
  };
  if (!select.status().ok()) return fail(RAFT_IOERR);
  if (rows.empty()) return 0;

  *start_index = rows.front().index;
  auto* loaded = static_cast<raft_entry*>(raft_calloc(rows.size(), sizeof(raft_entry)));
  auto* batch = static_cast<std::uint8_t*>(raft_malloc(total == 0 ? 1 : total));
  if (loaded == nullptr || batch == nullptr) {
    raft_free(loaded);
    raft_free(batch);
    return fail(RAFT_NOMEM);
  }
  std::uint8_t* cursor = batch;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    loaded[i].term = rows[i].term;
    loaded[i].type = rows[i].type;
    loaded[i].buf = raft_buffer{cursor, rows[i].data.size()};
    loaded[i].batch = batch;
    if (!rows[i].data.empty()) std::memcpy(cursor, rows[i].data.data(), rows[i].data.size());
    cursor += rows[i].data.size();
  }
  *entries = loaded;
  *n_entries = rows.size();
  return 0;
}

}  // namespace tidepool::cluster::internal
