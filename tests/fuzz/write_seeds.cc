// Writes a seed corpus of real calls (one file each) for rpc_fuzzer: the procedures of NFSv3,
// MOUNT and PMAP with valid handles for the fuzz node's root.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
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

void sattr(Encoder& e) {
  e.boolean(true);
  e.u32(0644);
  for (int i = 0; i < 3; ++i) e.boolean(false);
  e.u32(0);
  e.u32(0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_seeds DIR\n");
    return 2;
  }
  std::filesystem::create_directories(argv[1]);
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
    std::ofstream(std::string(argv[1]) + "/" + name, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
  }
  return 0;
}
