// libFuzzer target: arbitrary bytes as one message a home sends a node about the stripe units it
// holds (the first 4 bytes name the method, the rest is its body). The decoder must reject what
// is malformed — a pool name that is no name, lying lengths, ranges past the largest file —
// without reading past the body. What decodes must encode to a body that decodes to the same
// request, and encodes to the same bytes again (a round trip), and is then served by a real
// UnitStore, its inode and offset folded into a small range so that the disk it fills stays
// bounded.
#include <unistd.h>

#include <algorithm>
#include <boost/endian/conversion.hpp>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "store/pool_data.h"

using namespace tidepool;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static store::UnitStore units("/dev/shm/tidepool-unit-fuzz-" + std::to_string(::getpid()));
  if (size < 4) return 0;
  const std::uint32_t method = boost::endian::load_big_u32(data);
  auto request = store::decode_unit_request({data + 4, size - 4});
  if (!request.ok()) return 0;
  const tidepool::xdr::Buffer encoded = store::encode_unit_request(*request);
  const auto again = store::decode_unit_request(encoded);
  if (!again.ok() || again->pool != request->pool || again->inode != request->inode ||
      again->offset != request->offset || again->value != request->value ||
      !std::ranges::equal(again->bytes, request->bytes) ||
      !std::ranges::equal(store::encode_unit_request(*again), encoded)) {
    std::abort();
  }
  constexpr std::uint64_t kOffsets = 16u << 20;
  request->inode %= 8;
  request->offset %= kOffsets;
  if (method == static_cast<std::uint32_t>(store::UnitMethod::truncate)) {
    request->value %= kOffsets;
  }
  (void)units.serve(method, store::encode_unit_request(*request));
  return 0;
}
