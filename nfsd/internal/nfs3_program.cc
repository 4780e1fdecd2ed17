#include "nfsd/internal/nfs3_program.h"

#include <boost/endian/conversion.hpp>

#include "common/crc32c.h"
#include "nfsd/internal/nfs3_xdr.h"
#include "nfsd/internal/status_map.h"

namespace tidepool::nfsd {

using namespace nfs3;  // NOLINT: the XDR helpers of this protocol
using store::Attributes;

struct Nfs3Program::Call {
  const CallContext& context;
  xdr::Decoder& in;
  xdr::Encoder& out;
  std::uint64_t fsid;
  // The exports the call started with: every Target::exported points into them, so they live as
  // long as the call, whatever set_exports does meanwhile.
  std::shared_ptr<const ExportTable> exports;
};

struct Nfs3Program::Target {
  const Export* exported;
  store::InodeId inode;
  store::Caller caller;
};

namespace {

constexpr std::uint32_t kFsfLink = 0x1;
constexpr std::uint32_t kFsfSymlink = 0x2;
constexpr std::uint32_t kFsfHomogeneous = 0x8;
constexpr std::uint32_t kFsfCanSetTime = 0x10;
constexpr std::uint32_t kModifyingAccess =
    store::access::modify | store::access::extend | store::access::erase;
// Bytes one READDIR entry costs in the reply besides its name (value_follows, fileid, name
// length, cookie), and what READDIRPLUS adds (post_op_attr, post_op_fh3).
constexpr std::size_t kEntryOverhead = 4 + 8 + 4 + 8;
constexpr std::size_t kPlusOverhead = 4 + kFattrBytes + 4 + 4 + kFileHandleBytes;
constexpr std::uint32_t kMaxEntriesPerPage = 4096;

void put_status(xdr::Encoder& out, Errc code) { out.u32(nfs3_status(code)); }

void put_verifier(xdr::Encoder& out, std::uint64_t v) {
  std::uint8_t bytes[8];
  boost::endian::store_big_u64(bytes, v);
  out.fixed_opaque(bytes);
}

std::uint64_t get_verifier(xdr::Decoder& in) {
  auto bytes = in.fixed_opaque(8);
  return bytes.size() == 8 ? boost::endian::load_big_u64(bytes.data()) : 0;
}

// Failure replies whose body is a post_op_attr, or a wcc_data, that we leave empty.
AcceptStatus fail_attr(xdr::Encoder& out, Errc code) {
  put_status(out, code);
  out.boolean(false);
  return AcceptStatus::success;
}

AcceptStatus fail_wcc(xdr::Encoder& out, Errc code) {
  put_status(out, code);
  put_empty_wcc(out);
  return AcceptStatus::success;
}

}  // namespace

const Nfs3Program::Procedure Nfs3Program::kProcedures[22] = {
    {&Nfs3Program::null, false, FailureBody::none},
    {&Nfs3Program::getattr, false, FailureBody::none},
    {&Nfs3Program::setattr, true, FailureBody::wcc},
    {&Nfs3Program::lookup, false, FailureBody::attr},
    {&Nfs3Program::access, false, FailureBody::attr},
    {&Nfs3Program::readlink, false, FailureBody::attr},
    {&Nfs3Program::read, false, FailureBody::attr},
    {&Nfs3Program::write, true, FailureBody::wcc},
    {&Nfs3Program::create, true, FailureBody::wcc},
    {&Nfs3Program::mkdir, true, FailureBody::wcc},
    {&Nfs3Program::symlink, true, FailureBody::wcc},
    {&Nfs3Program::mknod, true, FailureBody::wcc},
    {&Nfs3Program::remove, true, FailureBody::wcc},
    {&Nfs3Program::rmdir, true, FailureBody::wcc},
    {&Nfs3Program::rename, true, FailureBody::two_wcc},
    {&Nfs3Program::link, true, FailureBody::attr_and_wcc},
    {&Nfs3Program::readdir, false, FailureBody::attr},
    {&Nfs3Program::readdirplus, false, FailureBody::attr},
    {&Nfs3Program::fsstat, false, FailureBody::attr},
    {&Nfs3Program::fsinfo, false, FailureBody::attr},
    {&Nfs3Program::pathconf, false, FailureBody::attr},
    {&Nfs3Program::commit, false, FailureBody::wcc},
};

AcceptStatus Nfs3Program::put_retry_later(xdr::Encoder& out, FailureBody failure) {
  put_status(out, Errc::unavailable);
  switch (failure) {
    case FailureBody::none: break;
    case FailureBody::attr: out.boolean(false); break;
    case FailureBody::wcc: put_empty_wcc(out); break;
    case FailureBody::two_wcc:
      put_empty_wcc(out);
      put_empty_wcc(out);
      break;
    case FailureBody::attr_and_wcc:
      out.boolean(false);
      put_empty_wcc(out);
      break;
  }
  return AcceptStatus::success;
}

awaitable<std::optional<AcceptStatus>> Nfs3Program::call(const CallContext& context,
                                                         xdr::Decoder& arguments,
                                                         xdr::Encoder& results) {
  if (context.procedure >= std::size(kProcedures)) co_return AcceptStatus::proc_unavail;
  const Procedure& procedure = kProcedures[context.procedure];
  // A node whose lease lapsed may have lost what its caches and copies rely on: it serves
  // nothing until it holds one again (cluster/lease.h). NULL answers all the same.
  const bool leased = context.procedure != 0;
  std::uint64_t started = 0;
  if (leased) {
    std::optional<std::uint64_t> held = co_await service_.held_lease();
    if (!held) co_return put_retry_later(results, procedure.failure);
    started = *held;
  }
  if (!procedure.replay_from_cache) {
    Call call{context, arguments, results, service_.fsid, service_.exports.snapshot()};
    const std::size_t start = results.size();
    const AcceptStatus status = co_await (this->*procedure.handler)(call);
    // An answer read from what this node holds is good only if the lease held throughout:
    // checked once the answer is ready, by this node's clock, so a pause mid-call counts too.
    if (status != AcceptStatus::success || !leased || service_.lease_held_since(started)) {
      co_return status;
    }
    service_.refused_for_want_of_lease();
    results.buffer().resize(start);
    if (context.pieces) context.pieces->pieces.clear();
    co_return put_retry_later(results, procedure.failure);
  }
  // The cache keeps the reply's bytes alone: these procedures leave none by reference.
  CallContext cached_context = context;
  cached_context.pieces = nullptr;
  Call call{cached_context, arguments, results, service_.fsid, service_.exports.snapshot()};

  RequestKey key{context.client.to_uint(), context.client_port, context.xid, context.procedure,
                 crc32c(arguments.peek_rest())};
  std::vector<std::uint8_t> earlier;
  switch (service_.replies.begin(key, earlier)) {
    case DuplicateRequestCache::Outcome::in_progress: co_return std::nullopt;
    case DuplicateRequestCache::Outcome::replay:
      xdr::append(results.buffer(), earlier);
      co_return AcceptStatus::success;
    case DuplicateRequestCache::Outcome::run: break;
  }
  std::size_t start = results.size();
  AcceptStatus status = co_await (this->*procedure.handler)(call);
  if (status == AcceptStatus::success) {
    service_.replies.finish(key, {results.buffer().begin() + static_cast<long>(start),
                                  results.buffer().end()});
  } else {
    service_.replies.abandon(key);
  }
  co_return status;
}

Result<Nfs3Program::Target> Nfs3Program::target(const Call& call,
                                                std::span<const std::uint8_t> handle) const {
  TP_ASSIGN_OR_RETURN(HandleContents contents, service_.sealer()->unseal(handle));
  const Export* exported = call.exports->by_id(contents.export_id);
  if (!exported) return error(Errc::stale, "the export of this handle is gone");
  TP_RETURN_IF_ERROR(service_.admit(*exported, call.context));
  store::Caller caller = exported->caller_for(call.context.identity);
  caller.client = call.context.client.to_uint();
  return Target{exported, contents.inode, std::move(caller)};
}

std::optional<Nfs3Program::Target> Nfs3Program::changeable(
    Call& call, std::span<const std::uint8_t> handle) const {
  auto t = target(call, handle);
  if (!t.ok()) {
    fail_wcc(call.out, t.code());
    return std::nullopt;
  }
  if (t->exported->read_only()) {
    fail_wcc(call.out, Errc::read_only);
    return std::nullopt;
  }
  return *t;
}

awaitable<std::optional<Attributes>> Nfs3Program::attributes_or_fail(
    Call& call, std::span<const std::uint8_t> handle) {
  auto t = target(call, handle);
  if (!t.ok()) {
    fail_attr(call.out, t.code());
    co_return std::nullopt;
  }
  auto a = co_await service_.store.getattr(t->inode);
  if (!a.ok()) {
    fail_attr(call.out, a.code());
    co_return std::nullopt;
  }
  co_return *a;
}

AcceptStatus Nfs3Program::reply_wcc(Call& call, const Result<store::Wcc>& r) const {
  if (!r.ok()) return fail_wcc(call.out, r.code());
  put_status(call.out, Errc::ok);
  put_wcc(call.out, *r, call.fsid);
  return AcceptStatus::success;
}

FileHandle Nfs3Program::handle_for(const Target& parent, const Attributes& a) const {
  return service_.sealer()->seal({parent.exported->id(), a.inode, a.generation});
}

awaitable<AcceptStatus> Nfs3Program::null(Call&) { co_return AcceptStatus::success; }

awaitable<AcceptStatus> Nfs3Program::getattr(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = target(call, fh);
  if (!t.ok()) {
    put_status(call.out, t.code());
    co_return AcceptStatus::success;
  }
  auto a = co_await service_.store.getattr(t->inode);
  put_status(call.out, a.code());
  if (a.ok()) put_fattr(call.out, *a, call.fsid);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::setattr(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  store::AttributeChanges changes = get_sattr(call.in);
  std::optional<std::int64_t> guard;
  if (call.in.boolean()) guard = get_time(call.in);
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = changeable(call, fh);
  if (!t) co_return AcceptStatus::success;
  auto r = co_await service_.store.setattr(t->inode, changes, t->caller, guard);
  co_return reply_wcc(call, r);
}

awaitable<AcceptStatus> Nfs3Program::lookup(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::string name(call.in.string(kMaxDecodedName));
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = target(call, fh);
  if (!t.ok()) co_return fail_attr(call.out, t.code());
  // ".." of an export's root is the root itself: a client never climbs out of its export.
  if (name == "..") {
    auto root = co_await service_.export_root(*t->exported);
    if (root.ok() && *root == t->inode) name = ".";
  }
  auto r = co_await service_.store.lookup(t->inode, name, t->caller);
  if (!r.ok()) co_return fail_attr(call.out, r.code());
  put_status(call.out, Errc::ok);
  put_handle(call.out, handle_for(*t, r->object));
  put_post_op_attr(call.out, r->object, call.fsid);
  put_post_op_attr(call.out, r->directory, call.fsid);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::access(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::uint32_t requested = call.in.u32();
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = target(call, fh);
  if (!t.ok()) co_return fail_attr(call.out, t.code());
  auto r = co_await service_.store.check_access(t->inode, t->caller, requested);
  if (!r.ok()) co_return fail_attr(call.out, r.code());
  std::uint32_t granted = r->granted;
  if (t->exported->read_only()) granted &= ~kModifyingAccess;
  put_status(call.out, Errc::ok);
  put_post_op_attr(call.out, r->attributes, call.fsid);
  call.out.u32(granted);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::readlink(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = target(call, fh);
  if (!t.ok()) co_return fail_attr(call.out, t.code());
  auto r = co_await service_.store.readlink(t->inode);
  if (!r.ok()) co_return fail_attr(call.out, r.code());
  put_status(call.out, Errc::ok);
  put_post_op_attr(call.out, r->attributes, call.fsid);
  call.out.string(r->target);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::read(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::uint64_t offset = call.in.u64();
  std::uint32_t count = call.in.u32();
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = target(call, fh);
  if (!t.ok()) co_return fail_attr(call.out, t.code());
  count = std::min(count, service_.config.read_size_max);

  auto r = co_await service_.store.read_pieces(t->inode, offset, count, t->caller);
  if (!r.ok()) co_return fail_attr(call.out, r.code());
  // A transport that cannot splice gets the piped bytes copied in.
  if (r->piped && !call.context.pieces) {
    if (Status copied = store::take_out_of_pipe(*r); !copied.ok()) {
      co_return fail_attr(call.out, copied.code());
    }
  }
  put_status(call.out, Errc::ok);
  put_post_op_attr(call.out, r->result.attributes, call.fsid);
  call.out.u32(r->result.count);
  call.out.boolean(r->result.eof);
  call.out.u32(r->result.count);
  // The bytes go out from where the store left them when the transport can send them from
  // there (cache blocks); else they are copied in.
  auto& buffer = call.out.buffer();
  if (r->piped) call.context.pieces->pieces.push_back({buffer.size(), {}, {}, std::move(r->piped)});
  for (std::span<const std::uint8_t> piece : r->pieces) {
    if (call.context.pieces) {
      call.context.pieces->pieces.push_back({buffer.size(), piece, r->keep});
    } else {
      xdr::append(buffer, piece);
    }
  }
  constexpr std::uint8_t kPadding[3] = {};
  xdr::append(buffer, std::span(kPadding).first((4 - r->result.count % 4) % 4));
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::write(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::uint64_t offset = call.in.u64();
  std::uint32_t count = call.in.u32();
  std::uint32_t stable = call.in.u32();
  // Anything the record bound let through decodes; beyond wtmax the write is short, as RFC 1813
  // allows, and the client sends the rest again.
  auto data = call.in.opaque(service_.config.max_record_bytes);
  if (!call.in.ok() || stable > 2) co_return AcceptStatus::garbage_args;
  auto t = changeable(call, fh);
  if (!t) co_return AcceptStatus::success;
  if (count != data.size()) co_return fail_wcc(call.out, Errc::invalid_argument);
  data = data.first(std::min<std::size_t>(data.size(), service_.config.write_size_max));
  auto r = co_await service_.store.write(t->inode, offset, data,
                                         static_cast<store::Stability>(stable), t->caller);
  if (!r.ok()) co_return fail_wcc(call.out, r.code());
  put_status(call.out, Errc::ok);
  put_wcc(call.out, r->file, call.fsid);
  call.out.u32(r->count);
  call.out.u32(static_cast<std::uint32_t>(r->committed));
  put_verifier(call.out, r->verifier);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::new_object(Call& call, const Target& dir,
                                                Result<store::NewObject> made) {
  if (!made.ok()) co_return fail_wcc(call.out, made.code());
  put_status(call.out, Errc::ok);
  put_post_op_handle(call.out, handle_for(dir, made->attributes));
  put_post_op_attr(call.out, made->attributes, call.fsid);
  put_wcc(call.out, made->directory, call.fsid);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::create(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::string name(call.in.string(kMaxDecodedName));
  std::uint32_t how = call.in.u32();
  store::AttributeChanges initial;
  store::CreateVerifier verifier{};
  if (how == 0 || how == 1) {
    initial = get_sattr(call.in);
  } else if (how == 2) {
    auto v = call.in.fixed_opaque(verifier.size());
    if (v.size() == verifier.size()) std::copy(v.begin(), v.end(), verifier.begin());
  } else {
    call.in.fail();
  }
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = changeable(call, fh);
  if (!t) co_return AcceptStatus::success;
  auto made = co_await service_.store.create(t->inode, name, static_cast<store::CreateMode>(how),
                                             initial, verifier, t->caller);
  co_return co_await new_object(call, *t, std::move(made));
}

awaitable<AcceptStatus> Nfs3Program::mkdir(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::string name(call.in.string(kMaxDecodedName));
  store::AttributeChanges initial = get_sattr(call.in);
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = changeable(call, fh);
  if (!t) co_return AcceptStatus::success;
  auto made = co_await service_.store.mkdir(t->inode, name, initial, t->caller);
  co_return co_await new_object(call, *t, std::move(made));
}

awaitable<AcceptStatus> Nfs3Program::symlink(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::string name(call.in.string(kMaxDecodedName));
  store::AttributeChanges initial = get_sattr(call.in);
  std::string path(call.in.string(kMaxPath));
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = changeable(call, fh);
  if (!t) co_return AcceptStatus::success;
  auto made = co_await service_.store.symlink(t->inode, name, path, initial, t->caller);
  co_return co_await new_object(call, *t, std::move(made));
}

awaitable<AcceptStatus> Nfs3Program::mknod(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::string name(call.in.string(kMaxDecodedName));
  auto type = static_cast<store::FileType>(call.in.u32());
  store::AttributeChanges initial;
  std::uint32_t major = 0;
  std::uint32_t minor = 0;
  bool makeable = true;
  switch (type) {
    case store::FileType::char_device:
    case store::FileType::block_device:
      initial = get_sattr(call.in);
      major = call.in.u32();
      minor = call.in.u32();
      break;
    case store::FileType::socket:
    case store::FileType::fifo: initial = get_sattr(call.in); break;
    default: makeable = false;
  }
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  if (!makeable) {
    call.out.u32(NFS3ERR_BADTYPE);  // a protocol-level refusal: the store never sees it
    put_empty_wcc(call.out);
    co_return AcceptStatus::success;
  }
  auto t = changeable(call, fh);
  if (!t) co_return AcceptStatus::success;
  auto made =
      co_await service_.store.mknod(t->inode, name, type, major, minor, initial, t->caller);
  co_return co_await new_object(call, *t, std::move(made));
}

awaitable<AcceptStatus> Nfs3Program::remove(Call& call) {
  co_return co_await remove_entry(call, false);
}

awaitable<AcceptStatus> Nfs3Program::rmdir(Call& call) {
  co_return co_await remove_entry(call, true);
}

awaitable<AcceptStatus> Nfs3Program::remove_entry(Call& call, bool directory) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::string name(call.in.string(kMaxDecodedName));
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = changeable(call, fh);
  if (!t) co_return AcceptStatus::success;
  if (directory) {
    auto r = co_await service_.store.rmdir(t->inode, name, t->caller);
    co_return reply_wcc(call, r);
  }
  auto r = co_await service_.store.remove(t->inode, name, t->caller);
  co_return reply_wcc(call, r);
}

awaitable<AcceptStatus> Nfs3Program::rename(Call& call) {
  auto from_fh = call.in.opaque(kMaxHandleBytes);
  std::string from_name(call.in.string(kMaxDecodedName));
  auto to_fh = call.in.opaque(kMaxHandleBytes);
  std::string to_name(call.in.string(kMaxDecodedName));
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto fail = [&call](Errc code) {
    put_status(call.out, code);
    put_empty_wcc(call.out);
    put_empty_wcc(call.out);
    return AcceptStatus::success;
  };
  auto from = target(call, from_fh);
  if (!from.ok()) co_return fail(from.code());
  auto to = target(call, to_fh);
  if (!to.ok()) co_return fail(to.code());
  if (from->exported != to->exported) co_return fail(Errc::cross_device);
  if (from->exported->read_only()) co_return fail(Errc::read_only);
  auto r = co_await service_.store.rename(from->inode, from_name, to->inode, to_name,
                                          from->caller);
  if (!r.ok()) co_return fail(r.code());
  put_status(call.out, Errc::ok);
  put_wcc(call.out, r->from_directory, call.fsid);
  put_wcc(call.out, r->to_directory, call.fsid);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::link(Call& call) {
  auto file_fh = call.in.opaque(kMaxHandleBytes);
  auto dir_fh = call.in.opaque(kMaxHandleBytes);
  std::string name(call.in.string(kMaxDecodedName));
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto fail = [&call](Errc code) {
    put_status(call.out, code);
    call.out.boolean(false);
    put_empty_wcc(call.out);
    return AcceptStatus::success;
  };
  auto file = target(call, file_fh);
  if (!file.ok()) co_return fail(file.code());
  auto dir = target(call, dir_fh);
  if (!dir.ok()) co_return fail(dir.code());
  if (file->exported != dir->exported) co_return fail(Errc::cross_device);
  if (dir->exported->read_only()) co_return fail(Errc::read_only);
  auto r = co_await service_.store.link(file->inode, dir->inode, name, dir->caller);
  if (!r.ok()) co_return fail(r.code());
  put_status(call.out, Errc::ok);
  put_post_op_attr(call.out, r->file, call.fsid);
  put_wcc(call.out, r->directory, call.fsid);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::readdir(Call& call) {
  co_return co_await list_directory(call, false);
}

awaitable<AcceptStatus> Nfs3Program::readdirplus(Call& call) {
  co_return co_await list_directory(call, true);
}

awaitable<AcceptStatus> Nfs3Program::list_directory(Call& call, bool plus) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  std::uint64_t cookie = call.in.u64();
  std::uint64_t verifier = get_verifier(call.in);
  std::uint32_t budget = call.in.u32();  // READDIR: count; READDIRPLUS: dircount
  if (plus) budget = call.in.u32();      // maxcount bounds the whole reply
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto t = target(call, fh);
  if (!t.ok()) co_return fail_attr(call.out, t.code());

  budget = std::min(budget, service_.config.read_size_max);
  const std::size_t per_entry = kEntryOverhead + 8 + (plus ? kPlusOverhead : 0);
  auto max_entries = static_cast<std::uint32_t>(
      std::clamp<std::size_t>(budget / per_entry + 1, 1, kMaxEntriesPerPage));
  auto page = co_await service_.store.readdir(t->inode, cookie, verifier, max_entries, plus,
                                              t->caller);
  if (!page.ok()) co_return fail_attr(call.out, page.code());

  auto root = co_await service_.export_root(*t->exported);
  auto& buffer = call.out.buffer();
  const std::size_t start = buffer.size();
  put_status(call.out, Errc::ok);
  put_post_op_attr(call.out, page->directory, call.fsid);
  put_verifier(call.out, page->cookie_verifier);
  // The whole READDIR3res, from its status on, fits in the client's count (maxcount), the two
  // closing booleans included.
  const std::size_t limit = start + (budget > 8 ? budget - 8 : 0);
  std::size_t written = 0;
  for (const auto& e : page->entries) {
    const std::size_t before = buffer.size();
    // ".." at the export root names the root itself, as LOOKUP answers.
    bool root_parent = e.name == ".." && root.ok() && *root == t->inode;
    call.out.boolean(true);
    call.out.u64(root_parent ? t->inode : e.inode);
    call.out.string(e.name);
    call.out.u64(e.cookie);
    if (plus) {
      std::optional<Attributes> a = root_parent ? page->directory : e.attributes;
      put_post_op_attr(call.out, a, call.fsid);
      if (a) {
        put_post_op_handle(call.out, handle_for(*t, *a));
      } else {
        call.out.boolean(false);
      }
    }
    if (buffer.size() > limit) {
      buffer.resize(before);
      break;
    }
    ++written;
  }
  if (written == 0 && !page->entries.empty()) {
    buffer.resize(start);
    call.out.u32(NFS3ERR_TOOSMALL);
    call.out.boolean(false);
    co_return AcceptStatus::success;
  }
  call.out.boolean(false);  // no more entries in this reply
  call.out.boolean(page->eof && written == page->entries.size());
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::fsstat(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto a = co_await attributes_or_fail(call, fh);
  if (!a) co_return AcceptStatus::success;
  auto s = co_await service_.store.fsstat();
  if (!s.ok()) co_return fail_attr(call.out, s.code());
  put_status(call.out, Errc::ok);
  put_post_op_attr(call.out, *a, call.fsid);
  call.out.u64(s->total_bytes);
  call.out.u64(s->free_bytes);
  call.out.u64(s->available_bytes);
  call.out.u64(s->total_files);
  call.out.u64(s->free_files);
  call.out.u64(s->available_files);
  call.out.u32(0);  // invarsec: the figures change at any time
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::fsinfo(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto a = co_await attributes_or_fail(call, fh);
  if (!a) co_return AcceptStatus::success;
  const NodeConfig& c = service_.config;
  put_status(call.out, Errc::ok);
  put_post_op_attr(call.out, *a, call.fsid);
  call.out.u32(c.read_size_max);
  call.out.u32(c.read_size_preferred);
  call.out.u32(4096);  // rtmult
  call.out.u32(c.write_size_max);
  call.out.u32(c.write_size_preferred);
  call.out.u32(4096);  // wtmult
  call.out.u32(c.read_size_preferred);  // dtpref
  call.out.u64(store::kMaxFileSize);
  call.out.u32(0);  // time_delta: nanosecond timestamps
  call.out.u32(1);
  call.out.u32(kFsfLink | kFsfSymlink | kFsfHomogeneous | kFsfCanSetTime);
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::pathconf(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  auto a = co_await attributes_or_fail(call, fh);
  if (!a) co_return AcceptStatus::success;
  put_status(call.out, Errc::ok);
  put_post_op_attr(call.out, *a, call.fsid);
  call.out.u32(store::kMaxLinks);
  call.out.u32(store::kMaxNameBytes);
  call.out.boolean(true);   // no_trunc: long names are refused, not cut
  call.out.boolean(true);   // chown_restricted
  call.out.boolean(false);  // case_insensitive
  call.out.boolean(true);   // case_preserving
  co_return AcceptStatus::success;
}

awaitable<AcceptStatus> Nfs3Program::commit(Call& call) {
  auto fh = call.in.opaque(kMaxHandleBytes);
  call.in.u64();  // offset and count: the whole file is committed
  call.in.u32();
  if (!call.in.ok()) co_return AcceptStatus::garbage_args;
  // As a WRITE: only a caller who may write the file makes it durable (each commit costs the
  // node a flush).
  auto t = changeable(call, fh);
  if (!t) co_return AcceptStatus::success;
  auto a = co_await service_.store.getattr(t->inode);
  if (!a.ok()) co_return fail_wcc(call.out, a.code());
  if (Status may = store::check_write_access(*a, t->caller); !may.ok()) {
    co_return fail_wcc(call.out, may.code());
  }
  auto committing = service_.store.commit(t->inode, {});
  auto r = co_await std::move(committing);
  if (!r.ok()) co_return fail_wcc(call.out, r.code());
  put_status(call.out, Errc::ok);
  put_wcc(call.out, *r, call.fsid);
  put_verifier(call.out, service_.store.write_verifier());
  co_return AcceptStatus::success;
}

}  // namespace tidepool::nfsd
