// Writes a seed corpus of real calls (one file each) for rpc_fuzzer: the procedures of NFSv3,
// MOUNT, PMAP, NLM and NSM with valid handles for the fuzz node's root; and one for
// transport_fuzzer: the same calls in records and datagrams, and replies to a GRANTED callback.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>
#include <string>

#include "common/xdr.h"
#include "tests/fuzz/fuzz_node.h"

namespace {

using tidepool::xdr::Encoder;

tidepool::xdr::Buffer call(std::uint32_t program, std::uint32_t version, std::uint32_t proc,
                               const std::function<void(Encoder&)>& args) {
  tidepool::xdr::Buffer m;
  Encoder e(m);
  e.u32(0x1000 + proc);
  e.u32(0);
  e.u32(2);
  e.u32(program);
  e.u32(version);
  e.u32(proc);
  tidepool::xdr::Buffer cred;
  Encoder c(cred);
  c.u32(0);
  c.string("seed");
  c.u32(1000);
  c.u32(1000);
  c.u32(0);
  e.u32(1);
  e.opaque(cred);
  e.u32(0);
  e.u32(0);
  args(e);
  return m;
}

constexpr std::uint32_t kLastFragment = 0x80000000u;

// `bytes` after the record mark of a fragment, the last of its record or not.
void append_fragment(tidepool::xdr::Buffer& out, std::span<const std::uint8_t> bytes, bool last) {
  Encoder(out).u32((last ? kLastFragment : 0) | static_cast<std::uint32_t>(bytes.size()));
  tidepool::xdr::append(out, bytes);
}

// The first byte picks transport_fuzzer's path (tests/fuzz/transport_fuzzer.cc).
enum Path : std::uint8_t { tcp = 0, udp = 1, callback_reply = 2 };

tidepool::xdr::Buffer on(Path path) { return tidepool::xdr::Buffer{path}; }

// The reply a client's lock manager sends to a GRANTED callback (xid as transport_fuzzer
// expects), nlm4_res: cookie and status.
tidepool::xdr::Buffer granted_reply(std::uint32_t status) {
  tidepool::xdr::Buffer m;
  Encoder e(m);
  for (std::uint32_t word : {0x6e6c6d00u, 1u, 0u, 0u, 0u, 0u}) e.u32(word);
  e.opaque(std::vector<std::uint8_t>{7});
  e.u32(status);
  return m;
}

void save(const std::string& dir, const std::string& name, std::span<const std::uint8_t> bytes) {
  std::ofstream(dir + "/" + name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
}

void sattr(Encoder& e) {
  e.boolean(true);
  e.u32(0644);
  for (int i = 0; i < 3; ++i) e.boolean(false);
  e.u32(0);
  e.u32(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: write_seeds RPC_DIR TRANSPORT_DIR\n");
    return 2;
  }
  const std::string transport_dir = argv[2];
  std::filesystem::create_directories(argv[1]);
  std::filesystem::create_directories(transport_dir);
  tidepool::fuzz::FuzzNode node("/dev/shm/tidepool-seeds-" + std::to_string(::getpid()));
  auto root = node.root_handle();
  auto fh = [&root](Encoder& e) { e.opaque(root); };
  // nlm4_lock: caller_name, fh, oh, svid, offset, length.
  auto nlm_lock = [&](Encoder& e) {
    e.string("client");
    fh(e);
    e.opaque(std::vector<std::uint8_t>{'o'});
    e.u32(42);
    e.u64(0);
    e.u64(100);
  };
  auto dirop = [&](Encoder& e, const char* name) {
    fh(e);
    e.string(name);
  };
  std::vector<std::pair<std::string, tidepool::xdr::Buffer>> seeds{
      {"nfs-null", call(100003, 3, 0, [](Encoder&) {})},
      {"nfs-getattr", call(100003, 3, 1, fh)},
      {"nfs-setattr", call(100003, 3, 2,
                           [&](Encoder& e) {
                             fh(e);
                             sattr(e);
                             e.boolean(false);
                           })},
      {"nfs-lookup", call(100003, 3, 3, [&](Encoder& e) { dirop(e, "a"); })},
      {"nfs-access", call(100003, 3, 4,
                          [&](Encoder& e) {
                            fh(e);
                            e.u32(0x3f);
                          })},
      {"nfs-readlink", call(100003, 3, 5, fh)},
      {"nfs-read", call(100003, 3, 6,
                        [&](Encoder& e) {
                          fh(e);
                          e.u64(0);
                          e.u32(4096);
                        })},
      {"nfs-write", call(100003, 3, 7,
                         [&](Encoder& e) {
                           fh(e);
                           e.u64(0);
                           e.u32(5);
                           e.u32(0);
                           e.string("hello");
                         })},
      {"nfs-create", call(100003, 3, 8,
                          [&](Encoder& e) {
                            dirop(e, "a");
                            e.u32(1);
                            sattr(e);
                          })},
      {"nfs-mkdir", call(100003, 3, 9,
                         [&](Encoder& e) {
                           dirop(e, "d");
                           sattr(e);
                         })},
      {"nfs-symlink", call(100003, 3, 10,
                           [&](Encoder& e) {
                             dirop(e, "l");
                             sattr(e);
                             e.string("target");
                           })},
      {"nfs-mknod", call(100003, 3, 11,
                         [&](Encoder& e) {
                           dirop(e, "p");
                           e.u32(7);
                           sattr(e);
                         })},
      {"nfs-remove", call(100003, 3, 12, [&](Encoder& e) { dirop(e, "a"); })},
      {"nfs-rmdir", call(100003, 3, 13, [&](Encoder& e) { dirop(e, "d"); })},
      {"nfs-rename", call(100003, 3, 14,
                          [&](Encoder& e) {
                            dirop(e, "a");
                            dirop(e, "b");
                          })},
      {"nfs-link", call(100003, 3, 15,
                        [&](Encoder& e) {
                          fh(e);
                          dirop(e, "h");
                        })},
      {"nfs-readdir", call(100003, 3, 16,
                           [&](Encoder& e) {
                             fh(e);
                             e.u64(0);
                             e.u64(0);
                             e.u32(4096);
                           })},
      {"nfs-readdirplus", call(100003, 3, 17,
                               [&](Encoder& e) {
                                 fh(e);
                                 e.u64(0);
                                 e.u64(0);
                                 e.u32(4096);
                                 e.u32(32768);
                               })},
      {"nfs-fsstat", call(100003, 3, 18, fh)},
      {"nfs-fsinfo", call(100003, 3, 19, fh)},
      {"nfs-pathconf", call(100003, 3, 20, fh)},
      {"nfs-commit", call(100003, 3, 21,
                          [&](Encoder& e) {
                            fh(e);
                            e.u64(0);
                            e.u32(0);
                          })},
      {"mount-mnt", call(100005, 3, 1, [](Encoder& e) { e.string("/ifs"); })},
      {"mount-dump", call(100005, 3, 2, [](Encoder&) {})},
      {"mount-umnt", call(100005, 3, 3, [](Encoder& e) { e.string("/ifs"); })},
      {"mount-export", call(100005, 3, 5, [](Encoder&) {})},
      {"pmap-getport", call(100000, 2, 3,
                            [](Encoder& e) {
                              e.u32(100003);
                              e.u32(3);
                              e.u32(6);
                              e.u32(0);
                            })},
      {"pmap-dump", call(100000, 2, 4, [](Encoder&) {})},
      {"nlm-test", call(100021, 4, 1,
                        [&](Encoder& e) {
                          e.opaque(std::vector<std::uint8_t>{1});
                          e.boolean(true);
                          nlm_lock(e);
                        })},
      {"nlm-lock", call(100021, 4, 2,
                        [&](Encoder& e) {
                          e.opaque(std::vector<std::uint8_t>{2});
                          e.boolean(true);
                          e.boolean(true);
                          nlm_lock(e);
                          e.boolean(false);
                          e.u32(1);
                        })},
      {"nlm-unlock", call(100021, 4, 4,
                          [&](Encoder& e) {
                            e.opaque(std::vector<std::uint8_t>{3});
                            nlm_lock(e);
                          })},
      {"nlm-share", call(100021, 4, 20,
                         [&](Encoder& e) {
                           e.opaque(std::vector<std::uint8_t>{4});
                           e.string("client");
                           fh(e);
                           e.opaque(std::vector<std::uint8_t>{'o'});
                           e.u32(2);
                           e.u32(1);
                           e.boolean(false);
                         })},
      {"nlm-free-all", call(100021, 4, 23,
                            [](Encoder& e) {
                              e.string("client");
                              e.u32(3);
                            })},
      {"nsm-notify", call(100024, 1, 6,
                          [](Encoder& e) {
                            e.string("client");
                            e.u32(3);
                          })},
      {"nsm-stat", call(100024, 1, 1, [](Encoder& e) { e.string("client"); })},
  };
  for (const auto& [name, bytes] : seeds) {
    if (node.dispatch(bytes).empty()) {
      std::fprintf(stderr, "seed %s got no reply\n", name.c_str());
      return 1;
    }
    save(argv[1], name, bytes);
    auto record = on(tcp);
    append_fragment(record, bytes, true);
    save(transport_dir, "tcp-" + name, record);
    if (!name.starts_with("nfs-")) {
      auto datagram = on(udp);
      tidepool::xdr::append(datagram, bytes);
      save(transport_dir, "udp-" + name, datagram);
    }
  }
  // Calls back to back on one connection, one of them in three fragments.
  auto pipelined = on(tcp);
  for (const auto& [name, bytes] : seeds) {
    if (name != "nfs-getattr" && name != "nfs-lookup" && name != "nfs-readdirplus") continue;
    const std::span<const std::uint8_t> call(bytes);
    if (name == "nfs-lookup") {
      append_fragment(pipelined, call.first(4), false);
      append_fragment(pipelined, call.subspan(4, 20), false);
      append_fragment(pipelined, call.subspan(24), true);
    } else {
      append_fragment(pipelined, call, true);
    }
  }
  save(transport_dir, "tcp-pipelined", pipelined);
  for (std::uint32_t status : {0u, 1u}) {
    const auto reply = granted_reply(status);
    auto whole = on(callback_reply);
    append_fragment(whole, reply, true);
    save(transport_dir, "callback-granted-" + std::to_string(status), whole);
  }
  const auto reply = granted_reply(0);
  auto split = on(callback_reply);
  append_fragment(split, std::span<const std::uint8_t>(reply).first(12), false);
  append_fragment(split, std::span<const std::uint8_t>(reply).subspan(12), true);
  save(transport_dir, "callback-granted-fragments", split);
  return 0;
}
