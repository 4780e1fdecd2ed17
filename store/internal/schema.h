// The schema of a shard database.
#pragma once

#include <string_view>

namespace tidepool::store::internal {

// Where a shard's copy lives under the data directory, on its home and on its mirror alike.
inline constexpr const char* kShardDatabasePath = "/shards/0000.db";
inline constexpr const char* kDataFilesPath = "/data";

// Directory entries are ordered by `cookie`, which only grows, so a READDIR cookie stays valid
// however entries are added and removed. Neither cookies nor inode numbers are counted in a
// row written by every create (a page more in each transaction): `meta` holds how far they are
// claimed, a range at a time (store.cc, reserve_numbers). Databases made before that keep
// AUTOINCREMENT on dirents, which is as correct.
// No index on atime or size: SQLite does not choose them for find_files()' inode-ordered pages
// (bench/README.md, tp-policy-eval), and they cost pages in every create, write and read that
// moves atime. A row of `moves` is a file whose data is being moved to another node pool
// (Store::migrate): the new copy holds its first `copied` bytes durably, so a move cut short by
// a crash goes on from there. A row of `copies_behind` is a copy of a placed file's unit (every
// unit it holds, for unit -1) on a node that missed a write or sync while it was down: nothing
// reads that copy until the home has put the unit back on it (store.cc, catch_up). A row of
// `units_left` is a node that keeps units of a file in a pool where no placement reads them:
// it was down when they were to be removed (the file removed, moved or restriped); they are
// removed there once it is up (store.cc, clear_units_left).
// A directory's `parent` is its ".." (null in databases made before directories could live on
// another shard than their entry: the entry naming them tells). `transactions` and
// `transaction_steps` hold this shard's parts of changes spanning shards
// (store/cross_shard.h): prepared (state 0), decided on their coordinator (1), or aborted (2:
// on their coordinator, so that it never commits them), with the boot of the store that
// prepared them (meta's boots): parts of earlier boots are what recovery settles.
inline constexpr const char* kShardSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(
  key TEXT PRIMARY KEY,
  value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS inodes(
  ino INTEGER PRIMARY KEY,
  generation INTEGER NOT NULL,
  type INTEGER NOT NULL,
  mode INTEGER NOT NULL,
  nlink INTEGER NOT NULL,
  uid INTEGER NOT NULL,
  gid INTEGER NOT NULL,
  size INTEGER NOT NULL,
  rdev_major INTEGER NOT NULL,
  rdev_minor INTEGER NOT NULL,
  atime INTEGER NOT NULL,
  mtime INTEGER NOT NULL,
  ctime INTEGER NOT NULL,
  birth INTEGER NOT NULL,
  symlink_target BLOB,
  create_verifier BLOB,
  parent INTEGER);
DROP INDEX IF EXISTS inodes_by_atime;
DROP INDEX IF EXISTS inodes_by_size;
CREATE TABLE IF NOT EXISTS dirents(
  cookie INTEGER PRIMARY KEY,
  dir INTEGER NOT NULL,
  name BLOB NOT NULL,
  ino INTEGER NOT NULL,
  UNIQUE(dir, name));
CREATE INDEX IF NOT EXISTS dirents_by_dir ON dirents(dir, cookie);
CREATE INDEX IF NOT EXISTS dirents_by_ino ON dirents(ino);
CREATE TABLE IF NOT EXISTS layouts(
  ino INTEGER PRIMARY KEY,
  pool TEXT NOT NULL,
  stripe_unit INTEGER NOT NULL,
  protection INTEGER NOT NULL,
  access_pattern TEXT NOT NULL DEFAULT 'concurrency',
  nodes TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS moves(
  ino INTEGER PRIMARY KEY,
  pool TEXT NOT NULL,
  protection INTEGER NOT NULL,
  nodes TEXT NOT NULL,
  copied INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS copies_behind(
  ino INTEGER NOT NULL,
  node INTEGER NOT NULL,
  unit INTEGER NOT NULL,
  PRIMARY KEY(ino, node, unit)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS units_left(
  ino INTEGER NOT NULL,
  pool TEXT NOT NULL,
  node INTEGER NOT NULL,
  PRIMARY KEY(ino, pool, node)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS transactions(
  id INTEGER PRIMARY KEY,
  coordinator INTEGER NOT NULL,
  state INTEGER NOT NULL,
  participants TEXT NOT NULL,
  boot INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS transaction_steps(
  id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  kind INTEGER NOT NULL,
  directory INTEGER NOT NULL,
  name BLOB NOT NULL,
  inode INTEGER NOT NULL,
  delta INTEGER NOT NULL,
  parent INTEGER NOT NULL,
  PRIMARY KEY(id, seq)) WITHOUT ROWID;
)sql";

// Every table of kShardSchema: the tables whose changes a mirror takes.
inline constexpr std::string_view kShardTables[] = {
    "meta",          "inodes",     "dirents",      "layouts",          "moves",
    "copies_behind", "units_left", "transactions", "transaction_steps"};

}  // namespace tidepool::store::internal
