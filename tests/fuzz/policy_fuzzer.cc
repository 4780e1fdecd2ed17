// libFuzzer target: arbitrary text as a file pool policy filter, in both syntaxes (the flags
// one line an argument). The parser must refuse what is malformed with an error, never crash
// or run long; what parses must read back from its readable form to the same filter, evaluate
// and compile to SQL.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "policy/filter.h"

namespace {

using namespace tidepool::policy;

void check(const Filter& filter) {
  const std::string text = to_expression(filter);
  auto again = parse_expression(text);
  // A filter of the maximum length may grow past it when written out again.
  if (text.size() <= 4096 && (!again.ok() || !(*again == filter))) std::abort();
  FileFacts facts;
  facts.path = "/ifs/data/train/shard-0001.tar";
  facts.size = 1u << 30;
  (void)matches(filter, facts, 1'750'000'000);
  (void)to_sql(filter, 1'750'000'000);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (auto filter = parse_expression(input); filter.ok()) check(*filter);
  std::vector<std::string> arguments;
  for (std::size_t start = 0; start <= input.size();) {
    const std::size_t end = std::min(input.find('\n', start), input.size());
    arguments.emplace_back(input.substr(start, end - start));
    start = end + 1;
  }
  if (auto filter = parse_flags(arguments); filter.ok()) check(*filter);
  return 0;
}
