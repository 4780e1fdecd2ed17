#include "store/internal/mirror_feed.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "store/internal/mirror_messages.h"

namespace tidepool::store::internal {

MirrorFeed::MirrorFeed(DataFiles& data, std::string image)
    : data_(data), image_(std::move(image)) {}

Status MirrorFeed::attach(sqlite::Database& db, std::shared_ptr<MirrorTarget> mirror) {
  std::unique_lock gate(gate_);
  ++generation_;
  recorder_.reset();
  mirror_.reset();
  if (!mirror) return {};
  TP_RETURN_IF_ERROR(copy_whole_shard(db, *mirror));
  TP_ASSIGN_OR_RETURN(recorder_, ChangeRecorder::attach(db));
  mirror_ = std::move(mirror);
  return {};
}

void MirrorFeed::detach() {
  std::unique_lock gate(gate_);
  ++generation_;
  recorder_.reset();
  mirror_.reset();
}

Delivery MirrorFeed::batch_done(bool committed, bool changing) {
  if (!committed || !recorder_) return nullptr;
  auto changes = recorder_->take();
  if (!changes.ok()) return [failed = changes.status()] { return failed; };
  if (!changing && changes->empty()) return nullptr;
  auto outcome = std::make_shared<std::optional<Status>>();
  {
    std::lock_guard lock(undelivered_mutex_);
    undelivered_.push_back({generation_, std::move(*changes), outcome});
  }
  return [this, outcome] {
    if (!*outcome) deliver_changes();
    return **outcome;
  };
}

Status MirrorFeed::send(MirrorMethod method, std::span<const std::uint8_t> message) {
  if (!mirror_) return {};
  return mirror_->call(method, message);
}

Result<xdr::Buffer> MirrorFeed::fetch(MirrorMethod method, std::span<const std::uint8_t> message) {
  if (!mirror_) return error(Errc::unavailable, "the shard has no mirror");
  return mirror_->fetch(method, message);
}

void MirrorFeed::deliver_changes() {
  std::vector<Undelivered> taken;
  {
    std::lock_guard lock(undelivered_mutex_);
    taken.swap(undelivered_);
  }
  std::vector<std::vector<std::uint8_t>> changes;
  std::vector<Undelivered*> current;
  std::shared_lock gate(gate_);
  for (Undelivered& batch : taken) {
    // A whole copy taken since holds these changes already (it was taken after they
    // committed), and a mirror no longer kept needs none.
    if (batch.generation != generation_) {
      *batch.outcome = Status{};
      continue;
    }
    current.push_back(&batch);
    if (!batch.changes.empty()) changes.push_back(std::move(batch.changes));
  }
  Status sent;
  if (undelivered_since_ == generation_) {
    sent = undelivered_reason_;
  } else if (!changes.empty()) {
    Result<std::vector<std::uint8_t>> merged = merge_changesets(changes);
    sent = merged.ok() ? mirror_->call(MirrorMethod::changes, *merged) : merged.status();
    if (!sent.ok()) {
      undelivered_since_ = generation_;
      undelivered_reason_ = sent;
    }
  }
  for (Undelivered* batch : current) *batch->outcome = sent;
}

Status MirrorFeed::copy_whole_shard(sqlite::Database& db, MirrorTarget& mirror) {
  spdlog::info("shard: sending a whole copy to the new mirror");
  TP_RETURN_IF_ERROR(mirror.call(MirrorMethod::copy_begin, {}));
  std::filesystem::remove(image_);
  TP_RETURN_IF_ERROR(
      db.prepare("VACUUM INTO CAST(? AS TEXT)").bind(1, std::string_view(image_)).run());
  Status sent = send_file(image_, mirror);
  std::filesystem::remove(image_);
  TP_RETURN_IF_ERROR(sent);
  TP_ASSIGN_OR_RETURN(std::vector<InodeId> inodes, data_.list());
  std::vector<std::uint8_t> chunk(kCopyChunkBytes);
  std::uint64_t bytes = 0;
  for (InodeId inode : inodes) {
    TP_ASSIGN_OR_RETURN(auto extents, data_.extents(inode));
    for (const auto& [start, length] : extents) {
      for (std::uint64_t done = 0; done < length; done += chunk.size()) {
        auto piece = std::span(chunk).first(std::min<std::uint64_t>(chunk.size(), length - done));
        TP_RETURN_IF_ERROR(data_.read(inode, start + done, piece));
        TP_RETURN_IF_ERROR(mirror.call(MirrorMethod::copy_data,
                                       encode_mirror_extent({inode, start + done, false, piece})));
        bytes += piece.size();
      }
    }
  }
  TP_RETURN_IF_ERROR(mirror.call(MirrorMethod::copy_end, {}));
  spdlog::info("shard: the mirror holds a whole copy ({} data files, {} bytes of data)",
               inodes.size(), bytes);
  return {};
}

Status MirrorFeed::send_file(const std::string& path, MirrorTarget& mirror) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error(Errc::io_error, "cannot read " + path);
  std::vector<std::uint8_t> chunk(kCopyChunkBytes);
  std::uint64_t offset = 0;
  while (in) {
    in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    TP_RETURN_IF_ERROR(
        mirror.call(MirrorMethod::copy_database,
                    encode_mirror_extent({0, offset, false, std::span(chunk).first(got)})));
    offset += got;
  }
  if (in.bad()) return error(Errc::io_error, "cannot read " + path);
  return {};
}

}  // namespace tidepool::store::internal
