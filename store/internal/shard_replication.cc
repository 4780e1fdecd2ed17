#include "store/internal/shard_replication.h"

#include <sqlite3.h>

#include <algorithm>
#include <limits>
#include <string_view>

#include "common/crc32c.h"
#include "store/internal/schema.h"

namespace tidepool::store::internal {
namespace {

Status sqlite_error(sqlite::Database& db, const char* what, int rc) {
  return error(Errc::io_error, std::string(what) + ": " + sqlite3_errstr(rc) + " (" +
                                   db.last_error() + ")");
}

struct Applying {
  bool out_of_step = false;
  bool unknown_table = false;
};

// SQLite skips changes to tables it does not have; a shard changeset never names one, so one
// that does is not a shard changeset.
int only_shard_tables(void* applying, const char* table) {
  for (std::string_view known : kShardTables) {
    if (known == table) return 1;
  }
  static_cast<Applying*>(applying)->unknown_table = true;
  return 0;
}

// Any conflict aborts the whole changeset: the copy diverged and must be copied anew.
int abort_on_conflict(void* applying, int, sqlite3_changeset_iter*) {
  static_cast<Applying*>(applying)->out_of_step = true;
  return SQLITE_CHANGESET_ABORT;
}

// Reads the session extension's changeset format (sqlite3session.h, "Changeset Format"),
// bounded by the bytes there are. SQLite 3.40's changeset reader loops forever on some
// changesets that are not of that form, and a seal shows only that a changeset arrived as it
// was sent: what reaches SQLite is first checked here.
class ChangesetReader {
 public:
  explicit ChangesetReader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}

  bool well_formed() {
    while (at_ < bytes_.size()) {
      const std::uint8_t op = bytes_[at_++];
      if (op == 'T') {
        if (!table_header()) return false;
        continue;
      }
      // A change comes after its table's header; its indirect flag, then its records.
      if (primary_key_.empty() || !skip(1)) return false;
      switch (op) {
        case SQLITE_INSERT:
        case SQLITE_DELETE:
          if (!record(Undefined::refused)) return false;
          break;
        case SQLITE_UPDATE:
          // SQLite finds the row an update changes by the old record's key, read unchecked.
          if (!record(Undefined::allowed_but_in_key) || !record(Undefined::allowed)) {
            return false;
          }
          break;
        default:
          return false;
      }
    }
    return true;
  }

 private:
  // SQLite's limit on a table's columns, at its largest.
  static constexpr std::uint64_t kMaxColumns = 32767;

  std::size_t left() const { return bytes_.size() - at_; }

  bool skip(std::uint64_t count) {
    if (count > left()) return false;
    at_ += count;
    return true;
  }

  // SQLite's variable-length integer: big-endian groups of 7 bits, at most 9 bytes, the ninth
  // of 8.
  bool varint(std::uint64_t& value) {
    value = 0;
    for (int i = 0; i < 8; ++i) {
      if (at_ == bytes_.size()) return false;
      const std::uint8_t byte = bytes_[at_++];
      value = (value << 7) | (byte & 0x7f);
      if ((byte & 0x80) == 0) return true;
    }
    if (at_ == bytes_.size()) return false;
    value = (value << 8) | bytes_[at_++];
    return true;
  }

  // Column count, one byte per column that is not 0 for a column of the primary key (which a
  // table must have to be recorded; SQLite writes the column's place in the key), and the name.
  bool table_header() {
    std::uint64_t columns = 0;
    if (!varint(columns) || columns == 0 || columns > kMaxColumns || columns > left()) {
      return false;
    }
    primary_key_.assign(bytes_.begin() + at_, bytes_.begin() + at_ + columns);
    at_ += columns;
    if (std::none_of(primary_key_.begin(), primary_key_.end(), [](auto flag) { return flag; })) {
      primary_key_.clear();
      return false;
    }
    for (; at_ < bytes_.size(); ++at_) {
      if (bytes_[at_] == 0) {
        ++at_;
        return true;
      }
    }
    return false;
  }

  enum class Undefined { refused, allowed_but_in_key, allowed };

  // One value per column of the current table; which may be undefined (type 0) depends on the
  // record.
  bool record(Undefined undefined) {
    for (const std::uint8_t in_key : primary_key_) {
      if (at_ == bytes_.size()) return false;
      std::uint64_t length = 0;
      switch (bytes_[at_++]) {
        case 0:
          if (undefined == Undefined::refused) return false;
          if (undefined == Undefined::allowed_but_in_key && in_key != 0) return false;
          break;
        case SQLITE_INTEGER:
        case SQLITE_FLOAT:
          if (!skip(8)) return false;
          break;
        case SQLITE_TEXT:
        case SQLITE_BLOB:
          if (!varint(length) || length > std::numeric_limits<std::int32_t>::max() ||
              !skip(length)) {
            return false;
          }
          break;
        case SQLITE_NULL:
          break;
        default:
          return false;
      }
    }
    return true;
  }

  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
  // The current table's primary key flags, empty before the first table header.
  std::vector<std::uint8_t> primary_key_;
};

// The changeset a seal covers, if it is whole.
Result<std::span<const std::uint8_t>> unsealed(std::span<const std::uint8_t> sealed) {
  if (sealed.size() < 4) return error(Errc::corrupt, "a shard changeset cut short");
  const auto changeset = sealed.first(sealed.size() - 4);
  std::uint32_t sum = 0;
  for (int i = 0; i < 4; ++i) sum |= std::uint32_t{sealed[sealed.size() - 4 + i]} << (8 * i);
  if (sum != crc32c(changeset)) return error(Errc::corrupt, "a shard changeset not whole");
  return changeset;
}

}  // namespace

void seal_changeset(std::vector<std::uint8_t>& changeset) {
  if (changeset.empty()) return;
  const std::uint32_t sum = crc32c(changeset);
  for (int i = 0; i < 4; ++i) changeset.push_back(static_cast<std::uint8_t>(sum >> (8 * i)));
}

Result<std::unique_ptr<ChangeRecorder>> ChangeRecorder::attach(sqlite::Database& db) {
  std::unique_ptr<ChangeRecorder> recorder(new ChangeRecorder(db));
  TP_RETURN_IF_ERROR(recorder->start());
  return recorder;
}

ChangeRecorder::~ChangeRecorder() { end_session(); }

void ChangeRecorder::end_session() {
  if (session_ == nullptr) return;
  sqlite3session_delete(session_);
  session_ = nullptr;
  db_.count_session(-1);
}

Status ChangeRecorder::start() {
  if (int rc = sqlite3session_create(db_.handle(), "main", &session_); rc != SQLITE_OK) {
    session_ = nullptr;
    return sqlite_error(db_, "cannot record shard changes", rc);
  }
  db_.count_session(1);
  if (int rc = sqlite3session_attach(session_, nullptr); rc != SQLITE_OK) {
    return sqlite_error(db_, "cannot record shard changes", rc);
  }
  return {};
}

Result<std::vector<std::uint8_t>> ChangeRecorder::take() {
  if (session_ == nullptr) {
    return error(Errc::io_error, "shard changes are not being recorded (a restart failed)");
  }
  int size = 0;
  void* bytes = nullptr;
  if (int rc = sqlite3session_changeset(session_, &size, &bytes); rc != SQLITE_OK) {
    return sqlite_error(db_, "cannot read shard changes", rc);
  }
  std::vector<std::uint8_t> changeset(static_cast<std::uint8_t*>(bytes),
                                      static_cast<std::uint8_t*>(bytes) + size);
  sqlite3_free(bytes);
  seal_changeset(changeset);
  // A session has no reset: the next batch is recorded by a new one.
  end_session();
  TP_RETURN_IF_ERROR(start());
  return changeset;
}

Status apply_changeset(sqlite::Database& db, std::span<const std::uint8_t> sealed) {
  if (sealed.empty()) return {};
  TP_ASSIGN_OR_RETURN(const auto changeset, unsealed(sealed));
  if (!ChangesetReader(changeset).well_formed()) {
    return error(Errc::corrupt, "a shard changeset not of SQLite's changeset form");
  }
  TP_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
  Applying applying;
  const int rc = sqlite3changeset_apply(
      db.handle(), static_cast<int>(changeset.size()), const_cast<std::uint8_t*>(changeset.data()),
      only_shard_tables, abort_on_conflict, &applying);
  if (rc != SQLITE_OK || applying.out_of_step || applying.unknown_table) {
    (void)db.exec("ROLLBACK");
    if (applying.out_of_step) {
      return error(Errc::corrupt, "the shard copy is not in step with its home");
    }
    if (applying.unknown_table) return error(Errc::corrupt, "not a shard changeset");
    return sqlite_error(db, "cannot apply shard changes", rc);
  }
  return db.exec("COMMIT");
}

Result<std::vector<std::uint8_t>> merge_changesets(
    std::span<const std::vector<std::uint8_t>> sealed) {
  sqlite3_changegroup* group = nullptr;
  if (int rc = sqlite3changegroup_new(&group); rc != SQLITE_OK) {
    return error(Errc::io_error, std::string("cannot merge shard changes: ") + sqlite3_errstr(rc));
  }
  std::unique_ptr<sqlite3_changegroup, decltype(&sqlite3changegroup_delete)> owned(
      group, sqlite3changegroup_delete);
  for (const std::vector<std::uint8_t>& one : sealed) {
    if (one.empty()) continue;
    TP_ASSIGN_OR_RETURN(const auto changeset, unsealed(one));
    if (int rc = sqlite3changegroup_add(group, static_cast<int>(changeset.size()),
                                        const_cast<std::uint8_t*>(changeset.data()));
        rc != SQLITE_OK) {
      return error(Errc::corrupt, std::string("cannot merge shard changes: ") + sqlite3_errstr(rc));
    }
  }
  int size = 0;
  void* bytes = nullptr;
  if (int rc = sqlite3changegroup_output(group, &size, &bytes); rc != SQLITE_OK) {
    return error(Errc::io_error, std::string("cannot merge shard changes: ") + sqlite3_errstr(rc));
  }
  std::vector<std::uint8_t> merged(static_cast<std::uint8_t*>(bytes),
                                   static_cast<std::uint8_t*>(bytes) + size);
  sqlite3_free(bytes);
  seal_changeset(merged);
  return merged;
}

}  // namespace tidepool::store::internal
