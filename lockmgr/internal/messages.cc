#include "lockmgr/internal/messages.h"

#include <algorithm>
#include <type_traits>

namespace tidepool::lockmgr::internal {
namespace {

using MessageBody = decltype(LockMessage::body);

// The body's kind on the wire is its alternative's index plus one.
constexpr std::uint32_t kKinds = std::variant_size_v<MessageBody>;

class Writer {
 public:
  explicit Writer(xdr::Buffer& out) : out_(out) {}

  void id(LockId id) {
    out_.u64(id.node);
    out_.u64(id.sequence);
  }
  void mode(Mode mode) { out_.u32(static_cast<std::uint32_t>(mode)); }
  void range(Range range) {
    out_.u64(range.start);
    out_.u64(range.end);
  }
  void owner(LockOwner owner) {
    out_.u64(owner.high);
    out_.u64(owner.low);
  }
  void value(const LockValue& value) { out_.fixed_opaque(value); }
  void value(const std::optional<LockValue>& value) {
    out_.boolean(value.has_value());
    if (value) this->value(*value);
  }
  void record(const LockRecord& r) {
    id(r.id);
    out_.u32(static_cast<std::uint32_t>(r.resource.kind));
    out_.u64(r.resource.id);
    range(r.range);
    out_.u32(static_cast<std::uint32_t>(r.state));
    mode(r.granted);
    mode(r.requested);
    out_.u64(r.position);
    out_.u64(r.deadline_ms);
    value(r.value);
    out_.u64(r.op);
    owner(r.owner);
  }

  void operator()(const LockCall& call) {
    const LockRequest& r = call.request;
    id(r.id);
    out_.u32(static_cast<std::uint32_t>(r.resource.kind));
    out_.u64(r.resource.id);
    mode(r.mode);
    range(r.range);
    out_.boolean(r.try_only);
    out_.boolean(r.expandable);
    out_.u64(r.deadline_ms);
    owner(r.owner);
  }
  void operator()(const ConvertCall& call) {
    id(call.id);
    mode(call.mode);
    out_.boolean(call.try_only);
    out_.u64(call.timeout_ms);
    value(call.value);
  }
  void operator()(const ReleaseCall& call) {
    id(call.id);
    value(call.value);
  }
  void operator()(const CancelCall& call) { id(call.id); }
  void operator()(const Granted& granted) {
    id(granted.id);
    mode(granted.mode);
    range(granted.range);
    value(granted.value);
  }
  void operator()(const Queued& queued) {
    id(queued.id);
    out_.u64(queued.position);
  }
  void operator()(const Refused& refused) {
    id(refused.id);
    out_.u32(static_cast<std::uint32_t>(refused.reason));
    out_.boolean(refused.in_the_way.has_value());
    if (refused.in_the_way) {
      range(refused.in_the_way->range);
      mode(refused.in_the_way->mode);
      owner(refused.in_the_way->owner);
    }
  }
  void operator()(const Blocking& blocking) {
    id(blocking.holder);
    mode(blocking.wanted);
    range(blocking.range);
  }
  void operator()(const Released& released) { id(released.id); }
  void operator()(const Report& report) {
    out_.u32(static_cast<std::uint32_t>(report.records.size()));
    for (const LockRecord& r : report.records) record(r);
    out_.u32(report.part);
    out_.u32(report.parts);
  }
  void operator()(const ReportAck&) {}
  void operator()(const BlockingAck& ack) { id(ack.holder); }

 private:
  xdr::Encoder out_;
};

// Reads fields, failing the decoder on any value outside its type.
class Reader {
 public:
  explicit Reader(xdr::Decoder& in) : in_(in) {}

  LockId id() {
    LockId id{in_.u64(), in_.u64()};
    if (id.node == 0) in_.fail();
    return id;
  }
  Mode mode() { return bounded<Mode>(kModeCount - 1); }
  ResourceName resource() {
    auto kind = bounded<ResourceKind>(static_cast<std::uint32_t>(kLastResourceKind));
    if (static_cast<std::uint32_t>(kind) == 0) in_.fail();
    return {kind, in_.u64()};
  }
  Range range() {
    Range range{in_.u64(), in_.u64()};
    if (!range.valid()) in_.fail();
    return range;
  }
  LockValue value() {
    LockValue value{};
    auto bytes = in_.fixed_opaque(value.size());
    if (in_.ok()) std::copy(bytes.begin(), bytes.end(), value.begin());
    return value;
  }
  LockOwner owner() { return {in_.u64(), in_.u64()}; }
  std::optional<LockValue> optional_value() {
    if (!in_.boolean()) return std::nullopt;
    return value();
  }
  LockRecord record() {
    LockRecord r;
    r.id = id();
    r.resource = resource();
    r.range = range();
    r.state = bounded<LockState>(static_cast<std::uint32_t>(LockState::waiting));
    r.granted = mode();
    r.requested = mode();
    r.position = in_.u64();
    r.deadline_ms = in_.u64();
    r.value = value();
    r.op = in_.u64();
    r.owner = owner();
    return r;
  }

  MessageBody body(std::uint32_t kind) {
    switch (kind) {
      case 1: {
        LockCall call;
        call.request.id = id();
        call.request.resource = resource();
        call.request.mode = mode();
        call.request.range = range();
        call.request.try_only = in_.boolean();
        call.request.expandable = in_.boolean();
        call.request.deadline_ms = in_.u64();
        call.request.owner = owner();
        return call;
      }
      case 2: {
        ConvertCall call;
        call.id = id();
        call.mode = mode();
        call.try_only = in_.boolean();
        call.timeout_ms = in_.u64();
        call.value = optional_value();
        return call;
      }
      case 3: {
        ReleaseCall call;
        call.id = id();
        call.value = optional_value();
        return call;
      }
      case 4:
        return CancelCall{id()};
      case 5: {
        Granted granted;
        granted.id = id();
        granted.mode = mode();
        granted.range = range();
        granted.value = value();
        return granted;
      }
      case 6: {
        Queued queued;
        queued.id = id();
        queued.position = in_.u64();
        return queued;
      }
      case 7: {
        Refused refused;
        refused.id = id();
        refused.reason = bounded<Refusal>(static_cast<std::uint32_t>(Refusal::cancelled));
        if (in_.boolean()) refused.in_the_way = Conflict{range(), mode(), owner()};
        return refused;
      }
      case 8: {
        Blocking blocking;
        blocking.holder = id();
        blocking.wanted = mode();
        blocking.range = range();
        return blocking;
      }
      case 9:
        return Released{id()};
      case 10: {
        Report report;
        // A record is 32 XDR words.
        std::uint32_t count = in_.array_count(kMaxReportRecords, 32 * 4);
        report.records.reserve(count);
        for (std::uint32_t i = 0; i < count && in_.ok(); ++i) report.records.push_back(record());
        report.part = in_.u32();
        report.parts = in_.u32();
        if (report.part >= report.parts || report.parts > kMaxReportParts) in_.fail();
        return report;
      }
      case 11:
        return ReportAck{};
      default:
        return BlockingAck{id()};
    }
  }

 private:
  template <typename Enum>
  Enum bounded(std::uint32_t largest) {
    std::uint32_t raw = in_.u32();
    if (raw > largest) in_.fail();
    return static_cast<Enum>(std::min(raw, largest));
  }

  xdr::Decoder& in_;
};

}  // namespace

bool to_coordinator(const LockMessage& message) {
  return std::visit(
      [](const auto& body) {
        using T = std::decay_t<decltype(body)>;
        return std::is_same_v<T, LockCall> || std::is_same_v<T, ConvertCall> ||
               std::is_same_v<T, ReleaseCall> || std::is_same_v<T, CancelCall> ||
               std::is_same_v<T, Report> || std::is_same_v<T, BlockingAck>;
      },
      message.body);
}

std::optional<LockId> lock_of(const LockMessage& message) {
  return std::visit(
      [](const auto& body) -> std::optional<LockId> {
        using T = std::decay_t<decltype(body)>;
        if constexpr (std::is_same_v<T, LockCall>) {
          return body.request.id;
        } else if constexpr (std::is_same_v<T, Blocking> || std::is_same_v<T, BlockingAck>) {
          return body.holder;
        } else if constexpr (std::is_same_v<T, Report> || std::is_same_v<T, ReportAck>) {
          return std::nullopt;
        } else {
          return body.id;
        }
      },
      message.body);
}

xdr::Buffer encode_lock_message(const LockMessage& message) {
  xdr::Buffer out;
  xdr::Encoder header(out);
  header.u64(message.epoch);
  header.u64(message.op);
  header.u32(static_cast<std::uint32_t>(message.body.index() + 1));
  Writer writer(out);
  std::visit(writer, message.body);
  return out;
}

std::optional<LockMessage> decode_lock_message(std::span<const std::uint8_t> bytes) {
  xdr::Decoder in(bytes);
  LockMessage message;
  message.epoch = in.u64();
  message.op = in.u64();
  std::uint32_t kind = in.u32();
  if (!in.ok() || kind == 0 || kind > kKinds) return std::nullopt;
  Reader reader(in);
  message.body = reader.body(kind);
  if (!in.ok() || in.remaining() != 0) return std::nullopt;
  return message;
}

}  // namespace tidepool::lockmgr::internal
