// The lock manager's messages between a node and a resource's coordinator, in XDR. Every
// message carries the sender's group epoch, so a coordinator refuses work decided under an
// older view (recovery may have moved the resource since).
//
// The node asks (lock, convert, release, cancel); the coordinator answers with the table's
// notices (granted, queued, refused, blocking) and acknowledges releases. After a view change
// each node reports to every coordinator the locks it holds and waits for there (report, in
// parts), and the coordinator acknowledges a node's whole report (report_ack). A node
// acknowledges every blocking callback for a lock it has (blocking_ack).
// Timeouts travel as durations: the nodes' clocks are not comparable.
//
// Calls and their answers carry the requesting node's operation number on the lock (op): the
// node numbers the operations on each lock 1, 2, 3…, so that the coordinator can tell a
// repeated or overtaken call from a new one, and the node an answer to its current operation
// from a late answer to an old one.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <variant>
#include <vector>

#include "cluster/types.h"
#include "common/xdr.h"
#include "lockmgr/internal/lock_table.h"

namespace tidepool::lockmgr::internal {

// A report holds at most this many records; a node with more sends several, up to
// kMaxReportParts (64 million locks per node and coordinator).
inline constexpr std::size_t kMaxReportRecords = 4096;
inline constexpr std::uint32_t kMaxReportParts = 16384;

struct LockCall {
  LockRequest request;  // request.deadline_ms carries the timeout, 0: none
};

struct ConvertCall {
  LockId id;
  Mode mode = Mode::null;
  bool try_only = false;
  std::uint64_t timeout_ms = 0;
  std::optional<LockValue> value;
};

struct ReleaseCall {
  LockId id;
  std::optional<LockValue> value;
};

struct CancelCall {
  LockId id;
};

// The coordinator no longer has the lock: released, or never known.
struct Released {
  LockId id;
};

struct Report {
  std::vector<LockRecord> records;  // deadline_ms carries the time left, 0: none
  std::uint32_t part = 0;           // this is part `part` of `parts`, counted from 0
  std::uint32_t parts = 1;
};

// The coordinator has every part of the node's report for this epoch.
struct ReportAck {};

// The holder's node got a blocking callback for `holder`: it is alive and will give way when
// its user is done. A coordinator that hears nothing back by its deadline has the group view
// mark the node down.
struct BlockingAck {
  LockId holder;
};

struct LockMessage {
  using Body = std::variant<LockCall, ConvertCall, ReleaseCall, CancelCall, Granted, Queued,
                            Refused, Blocking, Released, Report, ReportAck, BlockingAck>;
  cluster::Epoch epoch = 0;
  std::uint64_t op = 0;  // 0 in blocking callbacks and reports
  Body body;
};

// Whether the message is for a coordinator (a call or a report) rather than for the node that
// asks (an answer, a blocking callback, a report's acknowledgement).
bool to_coordinator(const LockMessage& message);
// The lock a call or an answer is about, or the holder a blocking callback is for; none for
// reports and their acknowledgements.
std::optional<LockId> lock_of(const LockMessage& message);

xdr::Buffer encode_lock_message(const LockMessage& message);
// Null for anything malformed: a short or over-long body, an unknown kind, mode, state or
// reason, an empty range, a lock id of node 0, too many records or parts, a part past the parts.
std::optional<LockMessage> decode_lock_message(std::span<const std::uint8_t> bytes);

}  // namespace tidepool::lockmgr::internal
