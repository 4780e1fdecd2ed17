#include "store/shard_mirror.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "common/xdr.h"
#include "store/internal/data_files.h"
#include "store/internal/mirror_messages.h"
#include "store/internal/schema.h"
#include "store/internal/shard_replication.h"

namespace tidepool::store {

namespace internal {

std::vector<std::uint8_t> encode_mirror_extent(const MirrorExtent& extent) {
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encoder.u64(extent.inode);
  encoder.u64(extent.offset);
  encoder.boolean(extent.durable);
  encoder.opaque(extent.bytes);
  return {out.begin(), out.end()};
}

std::optional<MirrorExtent> decode_mirror_extent(std::span<const std::uint8_t> body) {
  xdr::Decoder in(body);
  MirrorExtent extent;
  extent.inode = in.u64();
  extent.offset = in.u64();
  extent.durable = in.boolean();
  extent.bytes = in.opaque(kMaxMirrorExtentBytes);
  if (!in.ok() || in.remaining() != 0 || extent.offset > kMaxFileSize ||
      extent.bytes.size() > kMaxFileSize - extent.offset) {
    return std::nullopt;
  }
  return extent;
}

std::vector<std::uint8_t> encode_mirror_inode(const MirrorInode& message) {
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encoder.u64(message.inode);
  encoder.u64(message.value);
  return {out.begin(), out.end()};
}

std::optional<MirrorInode> decode_mirror_inode(std::span<const std::uint8_t> body) {
  xdr::Decoder in(body);
  MirrorInode message;
  message.inode = in.u64();
  message.value = in.u64();
  if (!in.ok() || in.remaining() != 0) return std::nullopt;
  return message;
}

std::vector<std::uint8_t> encode_mirror_range(const MirrorRange& range) {
  xdr::Buffer out;
  xdr::Encoder encoder(out);
  encoder.u64(range.inode);
  encoder.u64(range.offset);
  encoder.u32(range.length);
  return {out.begin(), out.end()};
}

std::optional<MirrorRange> decode_mirror_range(std::span<const std::uint8_t> body) {
  xdr::Decoder in(body);
  MirrorRange range;
  range.inode = in.u64();
  range.offset = in.u64();
  range.length = in.u32();
  if (!in.ok() || in.remaining() != 0 || range.length > kMaxMirrorExtentBytes ||
      range.offset > kMaxFileSize || range.length > kMaxFileSize - range.offset) {
    return std::nullopt;
  }
  return range;
}

}  // namespace internal

namespace {

Status malformed(MirrorMethod method) {
  return error(Errc::invalid_argument,
               "malformed mirror message " + std::to_string(static_cast<std::uint32_t>(method)));
}

Status errno_error(const std::string& what) {
  return error(Errc::io_error, what + ": " + std::strerror(errno));
}

}  // namespace

ShardCopy::ShardCopy(std::string data_dir) : data_dir_(std::move(data_dir)) {}

ShardCopy::~ShardCopy() { close(); }

Result<std::unique_ptr<ShardCopy>> ShardCopy::open(const std::string& data_dir) {
  std::unique_ptr<ShardCopy> copy(new ShardCopy(data_dir));
  std::error_code ec;
  std::filesystem::create_directories(data_dir + "/shards", ec);
  if (ec) return error(Errc::io_error, "cannot create " + data_dir + "/shards: " + ec.message());
  copy->data_ = std::make_unique<internal::DataFiles>(data_dir + internal::kDataFilesPath);
  TP_RETURN_IF_ERROR(copy->data_->prepare());
  TP_RETURN_IF_ERROR(copy->open_database());
  return copy;
}

Status ShardCopy::open_database() {
  TP_ASSIGN_OR_RETURN(db_, sqlite::Database::open(data_dir_ + internal::kShardDatabasePath));
  return db_->exec(internal::kShardSchema);
}

void ShardCopy::close() {
  std::unique_lock lock(mutex_);
  if (closed_) return;
  closed_ = true;
  in_step_ = false;
  if (incoming_fd_ >= 0) ::close(incoming_fd_);
  incoming_fd_ = -1;
  db_.reset();
  data_.reset();
}

Status ShardCopy::apply(std::uint32_t number, std::span<const std::uint8_t> request) {
  if (number < 1 || number > kLastMirrorMethod) {
    return error(Errc::not_supported, "unknown mirror message " + std::to_string(number));
  }
  const auto method = static_cast<MirrorMethod>(number);
  switch (method) {
    case MirrorMethod::write:
    case MirrorMethod::copy_data: {
      auto extent = internal::decode_mirror_extent(request);
      if (!extent) return malformed(method);
      std::shared_lock lock(mutex_);
      if (closed_) return error(Errc::unavailable, "the shard copy is closed");
      // A whole copy that could not start left no data files to write to.
      if (!data_) return error(Errc::unavailable, "no whole copy of the shard is under way");
      // During a whole copy nothing is in step yet, and the home sends only copy messages.
      if (method == MirrorMethod::write && !in_step_) {
        return error(Errc::unavailable, "the shard copy is not in step with its home");
      }
      TP_RETURN_IF_ERROR(data_->write(extent->inode, extent->offset, extent->bytes));
      if (extent->durable) return data_->sync(extent->inode);
      return {};
    }
    case MirrorMethod::sync:
    case MirrorMethod::truncate:
    case MirrorMethod::remove: {
      auto message = internal::decode_mirror_inode(request);
      if (!message) return malformed(method);
      std::shared_lock lock(mutex_);
      if (closed_ || !in_step_) {
        return error(Errc::unavailable, "the shard copy is not in step with its home");
      }
      if (method == MirrorMethod::sync) return data_->sync(message->inode);
      if (method == MirrorMethod::truncate) return data_->truncate(message->inode, message->value);
      data_->remove(message->inode);
      return {};
    }
    case MirrorMethod::changes: {
      std::unique_lock lock(mutex_);
      if (closed_ || !in_step_) {
        return error(Errc::unavailable, "the shard copy is not in step with its home");
      }
      Status applied = internal::apply_changeset(*db_, request);
      // A change that does not fit leaves the copy behind for good: only a whole copy mends it.
      if (applied.code() == Errc::corrupt) in_step_ = false;
      return applied;
    }
    case MirrorMethod::copy_begin: {
      if (!request.empty()) return malformed(method);
      std::unique_lock lock(mutex_);
      if (closed_) return error(Errc::unavailable, "the shard copy is closed");
      return begin_copy();
    }
    case MirrorMethod::copy_database: {
      auto extent = internal::decode_mirror_extent(request);
      if (!extent || extent->inode != 0) return malformed(method);
      std::unique_lock lock(mutex_);
      if (closed_ || incoming_fd_ < 0) {
        return error(Errc::unavailable, "no whole copy of the shard is under way");
      }
      std::size_t done = 0;
      while (done < extent->bytes.size()) {
        ssize_t n = ::pwrite(incoming_fd_, extent->bytes.data() + done, extent->bytes.size() - done,
                             static_cast<off_t>(extent->offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return errno_error("write the incoming shard database");
        done += static_cast<std::size_t>(n);
      }
      return {};
    }
    case MirrorMethod::copy_end: {
      if (!request.empty()) return malformed(method);
      std::unique_lock lock(mutex_);
      if (closed_ || incoming_fd_ < 0) {
        return error(Errc::unavailable, "no whole copy of the shard is under way");
      }
      return end_copy();
    }
    case MirrorMethod::read:
      return error(Errc::invalid_argument, "a read is answered with data, not applied");
  }
  return malformed(method);
}

Result<xdr::Buffer> ShardCopy::read(std::span<const std::uint8_t> request) {
  auto range = internal::decode_mirror_range(request);
  if (!range) return malformed(MirrorMethod::read);
  std::shared_lock lock(mutex_);
  if (closed_ || !in_step_) {
    return error(Errc::unavailable, "the shard copy is not in step with its home");
  }
  xdr::Buffer data(range->length);
  TP_RETURN_IF_ERROR(data_->read(range->inode, range->offset, data));
  return data;
}

// Throws the old copy away: its database, and every data file.
Status ShardCopy::begin_copy() {
  in_step_ = false;
  if (incoming_fd_ >= 0) ::close(incoming_fd_);
  incoming_fd_ = -1;
  db_.reset();
  data_.reset();
  const std::string database = data_dir_ + internal::kShardDatabasePath;
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", ".incoming"}) {
    std::filesystem::remove(database + suffix, ec);
    if (ec) return error(Errc::io_error, "cannot remove " + database + suffix + ": " + ec.message());
  }
  std::filesystem::remove_all(data_dir_ + internal::kDataFilesPath, ec);
  if (ec) return error(Errc::io_error, "cannot remove the old data files: " + ec.message());
  data_ = std::make_unique<internal::DataFiles>(data_dir_ + internal::kDataFilesPath);
  TP_RETURN_IF_ERROR(data_->prepare());
  incoming_fd_ = ::open((database + ".incoming").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                        0600);
  if (incoming_fd_ < 0) return errno_error("create the incoming shard database");
  spdlog::info("shard copy: taking a whole copy from the home");
  return {};
}

// The database image goes in place only once it is durable, and the data files written during
// the copy are made durable with it: from here on the copy is what the home acknowledged.
Status ShardCopy::end_copy() {
  const std::string database = data_dir_ + internal::kShardDatabasePath;
  if (::fsync(incoming_fd_) != 0) return errno_error("sync the incoming shard database");
  ::close(incoming_fd_);
  incoming_fd_ = -1;
  TP_RETURN_IF_ERROR(data_->sync_all());
  std::error_code ec;
  std::filesystem::rename(database + ".incoming", database, ec);
  if (ec) return error(Errc::io_error, "cannot install the shard database: " + ec.message());
  const int directory = ::open((data_dir_ + "/shards").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory < 0) return errno_error("open the shard directory");
  const int synced = ::fsync(directory);
  ::close(directory);
  if (synced != 0) return errno_error("sync the shard directory");
  TP_RETURN_IF_ERROR(open_database());
  in_step_ = true;
  spdlog::info("shard copy: in step with the home");
  return {};
}

}  // namespace tidepool::store
