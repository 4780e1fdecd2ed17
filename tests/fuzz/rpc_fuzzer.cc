// libFuzzer target: arbitrary bytes as one RPC call message to a node's NFS, MOUNT and PMAP
// programs. The decoders must reject what is malformed without reading past the message or
// allocating by a lying length; whatever decodes runs against a real store.
#include <unistd.h>

#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_node.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static tidepool::fuzz::FuzzNode node("/dev/shm/tidepool-fuzz-" + std::to_string(::getpid()));
  node.dispatch({data, size});
  return 0;
}
