// libFuzzer target: arbitrary bytes as one lock manager message arriving at a coordinator. The
// decoder must reject what is malformed without reading past the message or allocating by a
// lying count; what decodes must encode back to the very same bytes (the encoding is
// canonical), and a call that decodes is applied to a lock table that lives across inputs.
#include <cstdint>
#include <cstdlib>
#include <span>
#include <variant>

#include "lockmgr/internal/lock_table.h"
#include "lockmgr/internal/messages.h"

namespace {

using namespace tidepool::lockmgr;
using namespace tidepool::lockmgr::internal;

// Bounds the table the inputs build up, so a long run measures the decoder, not memory.
constexpr std::size_t kMaxLocks = 10'000;

struct Apply {
  LockTable& table;
  std::vector<Notice>& notices;
  void operator()(const LockCall& call) { (void)table.request(call.request, notices); }
  void operator()(const ConvertCall& call) {
    (void)table.convert(call.id, call.mode, call.try_only, call.timeout_ms, call.value, notices);
  }
  void operator()(const ReleaseCall& call) { (void)table.release(call.id, call.value, notices); }
  void operator()(const CancelCall& call) { (void)table.cancel(call.id, notices); }
  void operator()(const Report& report) {
    for (const LockRecord& record : report.records) (void)table.adopt(record);
    if (report.part + 1 == report.parts) table.settle(notices);
  }
  template <typename Answer>
  void operator()(const Answer&) {}
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static LockTable table;
  auto message = decode_lock_message(std::span(data, size));
  if (!message) return 0;
  tidepool::xdr::Buffer again = encode_lock_message(*message);
  if (again.size() != size || !std::equal(again.begin(), again.end(), data)) std::abort();
  std::vector<Notice> notices;
  std::visit(Apply{table, notices}, message->body);
  table.expire(message->epoch, notices);
  if (table.size() > kMaxLocks) table = LockTable();
  return 0;
}
