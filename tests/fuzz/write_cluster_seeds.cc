// Writes a seed corpus for cluster_message_fuzzer: a Raft vote request and an append of two
// entries, the changes that make a cluster (nodes, objects, their updates and removals), and a
// snapshot of the view they make — each file the fuzzer's selector byte, then the encoding.
// And one for backend_fuzzer: what a peer sends on a backend connection — its hello, then
// frames of backend RPC calls and replies (with their trailers) and of a Raft message.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "cluster/internal/config_db.h"
#include "cluster/internal/raft_codec.h"
#include "cluster/rpc.h"
#include "cluster/tcp_transport.h"

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

// A peer's hello (cluster/tcp_transport.cc): magic "TPN1", protocol version, node id, and where
// it listens.
xdr::Buffer hello(NodeId from) {
  const std::string listening = "127.0.0.1:7100";
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encoder.u32(0x54504e31);
  encoder.u32(kTcpProtocolVersion);
  encoder.u64(from);
  encoder.u32(static_cast<std::uint32_t>(listening.size()));
  xdr::append(out,
              std::span(reinterpret_cast<const std::uint8_t*>(listening.data()), listening.size()));
  return out;
}

void frame(xdr::Buffer& stream, Channel channel, const xdr::Buffer& payload) {
  xdr::Encoder encoder(stream);
  encoder.u32(static_cast<std::uint32_t>(payload.size()));
  encoder.u32(static_cast<std::uint32_t>(channel));
  xdr::append(stream, payload);
}

// A backend RPC message: the body, then the trailer (cluster/rpc.cc) — kind (1 call, 2 reply),
// id, the sender's epoch, and the method called or the reply's status.
xdr::Buffer rpc_message(const xdr::Buffer& body, std::uint32_t kind, std::uint64_t id, Epoch epoch,
                        std::uint32_t method_or_status) {
  xdr::Buffer out = body;
  xdr::Encoder encoder(out);
  encoder.u32(kind);
  encoder.u64(id);
  encoder.u64(epoch);
  encoder.u32(method_or_status);
  return out;
}

void write_backend_seeds(const std::filesystem::path& corpus, const xdr::Buffer& raft_vote) {
  std::filesystem::create_directories(corpus);
  const auto save = [&corpus](const std::string& name, const xdr::Buffer& bytes) {
    std::ofstream(corpus / name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
  };
  xdr::Buffer body;
  xdr::Encoder(body).string("ping");
  const xdr::Buffer rpcs[] = {
      rpc_message(body, 1, 1, 5, 1),  // a call the fuzzer's node answers
      rpc_message(body, 1, 2, 1, 1),  // stamped with an older epoch
      rpc_message(body, 1, 3, 5, 9),  // of a method nobody serves
      rpc_message(body, 2, 4, 5, 0),  // a reply nobody waits for
      rpc_message(body, 2, 5, 5, static_cast<std::uint32_t>(Errc::not_found)),
  };
  xdr::Buffer all = hello(2);
  for (std::size_t i = 0; i < std::size(rpcs); ++i) {
    xdr::Buffer one = hello(2);
    frame(one, Channel::rpc, rpcs[i]);
    save("rpc-" + std::to_string(i), one);
    frame(all, Channel::rpc, rpcs[i]);
  }
  frame(all, Channel::raft, raft_vote);
  save("rpc-and-raft", all);
  save("hello", hello(3));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_cluster_seeds CLUSTER_DIR BACKEND_DIR\n");
    return 2;
  }
  const std::filesystem::path corpus = argv[1];
  std::filesystem::create_directories(corpus);

  raft_message vote{};
  vote.type = RAFT_IO_REQUEST_VOTE;
  vote.request_vote = {7, 3, 42, 6, true, false};
  record(corpus / "raft-vote", kRaftMessage, encoded(vote, 3));
  write_backend_seeds(argv[2], encoded(vote, 2));
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
