// Writes a seed corpus for cluster_message_fuzzer: a Raft vote request and an append of two
// entries, the changes that make a cluster (nodes, objects, their updates and removals), and a
// snapshot of the view they make — each file the fuzzer's selector byte, then the encoding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cluster/internal/config_db.h"
#include "cluster/internal/raft_codec.h"

namespace {

using namespace tidepool;
using namespace tidepool::cluster;
using namespace tidepool::cluster::internal;

enum Selector : std::uint8_t { kRaftMessage = 0, kChange = 1, kSnapshot = 2 };

void record(const std::filesystem::path& file, Selector selector, const xdr::Buffer& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.put(static_cast<char>(selector));
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

xdr::Buffer encoded(const Change& change) {
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encode_change(change, encoder);
  return out;
}

xdr::Buffer encoded(const raft_message& message, NodeId sender) {
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encode_raft_message(message, sender, encoder);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_cluster_seeds CORPUS_DIR\n");
    return 2;
  }
  const std::filesystem::path corpus = argv[1];
  std::filesystem::create_directories(corpus);

  raft_message vote{};
  vote.type = RAFT_IO_REQUEST_VOTE;
  vote.request_vote = {7, 3, 42, 6, true, false};
  record(corpus / "raft-vote", kRaftMessage, encoded(vote, 3));
  std::string first = "first entry", second = "second";
  raft_entry entries[2] = {};
  entries[0] = {5, RAFT_COMMAND, {first.data(), first.size()}, nullptr};
  entries[1] = {6, RAFT_CHANGE, {second.data(), second.size()}, nullptr};
  raft_message append{};
  append.type = RAFT_IO_APPEND_ENTRIES;
  append.append_entries = {6, 10, 5, 9, entries, 2};
  record(corpus / "raft-append", kRaftMessage, encoded(append, 2));

  const std::string path = "/dev/shm/tidepool-cluster-seeds-" + std::to_string(::getpid());
  auto db = ConfigDb::open(path);
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.status().to_string().c_str());
    return 1;
  }
  const Change changes[] = {
      Change::add_node({1, "node-1", "127.0.0.1:7100", "127.0.0.1", "127.0.0.1:8080", "f800", true}),
      Change::add_node({2, "node-2", "127.0.0.2:7100", "127.0.0.2", "127.0.0.2:8080", "h500", true}),
      Change::set_node_state(2, false),
      Change::create_object("export", "1", R"({"version":2,"path":"/ifs","clients":[]})"),
      Change::update_object("export", "1", R"({"version":2,"path":"/ifs/data"})", 4),
      Change::create_object("tier", "hot-tier", R"({"children":["f800"]})"),
      Change::delete_object("tier", "hot-tier"),
      Change::remove_node(2),
  };
  int count = 0;
  for (const Change& change : changes) {
    const xdr::Buffer bytes = encoded(change);
    record(corpus / ("change-" + std::to_string(count++)), kChange, bytes);
    Change applied;
    Status outcome;
    if (!(*db)->apply(bytes, applied, outcome).ok()) return 1;
  }
  record(corpus / "snapshot", kSnapshot, (*db)->snapshot());
  db->reset();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return 0;
}
