// libFuzzer target: arbitrary bytes as one shipped store operation, or one participant call of
// a change across shards, arriving at a shard's home (the first 4 bytes name the method — with
// the top bit set, a participant's — the rest is its request). The decoder must reject what is
// malformed without reading past the request or allocating by a lying length; whatever decodes
// must round-trip (encode, and decode back to what encodes the same: checked in
// store/remote_store.cc, whose fuzz build does) and runs against a real store.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/endian/conversion.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "store/remote_store.h"

namespace {

using namespace tidepool;

struct Home {
  explicit Home(const std::string& dir) {
    store::StoreOptions options;
    options.data_dir = dir;
    options.threads = 1;
    auto opened = store::Store::open(options);
    if (!opened.ok()) std::abort();
    store = std::move(opened).value();
  }
  std::unique_ptr<store::LocalStore> store;
  boost::asio::io_context io;
};

constexpr std::uint32_t kParticipantBit = 0x80000000u;

boost::asio::awaitable<void> serve(store::LocalStore& store, std::uint32_t method,
                                   std::span<const std::uint8_t> request) {
  if ((method & kParticipantBit) != 0) {
    auto served =
        store::serve_participant_call(store.participant(), method & ~kParticipantBit, request);
    (void)co_await std::move(served);
  } else {
    auto served = store::serve_store_call(store, method, request);
    (void)co_await std::move(served);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Home home("/dev/shm/tidepool-store-fuzz-" + std::to_string(::getpid()));
  if (size < 4) return 0;
  const std::uint32_t method = boost::endian::load_big_u32(data);
  boost::asio::co_spawn(home.io, serve(*home.store, method, {data + 4, size - 4}),
                        boost::asio::detached);
  home.io.restart();
  home.io.run();
  return 0;
}
