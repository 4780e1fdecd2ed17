#include "daemon/membership.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/callback_awaitable.h"
#include "common/fail_points.h"
#include "common/files.h"
#include "common/hex.h"
#include "common/tls_identity.h"
#include "daemon/config_objects.h"
#include "daemon/filepool.h"

namespace tidepool::daemon {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;
using nlohmann::json;

constexpr std::uint32_t kStatsMethod = 2;
constexpr std::uint32_t kReportMethod = 4;
constexpr std::size_t kMaxReportBytes = 64 << 20;
constexpr std::chrono::milliseconds kChangeDeadline{10'000};
constexpr std::chrono::milliseconds kRegistrationPoll{20};
// A setup secret an administrator writes must be hard to guess; the one a node makes has 64.
constexpr std::size_t kMinSetupSecretLength = 16;
// Written in the cluster directory once the cluster removed this node (leave_removed).
constexpr const char* kRemovedFile = "removed.json";
constexpr const char* kIdentityFile = "identity.json";

// identity.json: the cluster this node belongs to; "creating" while the node makes it, until
// every record of the new cluster is written.
std::string identity_text(const ClusterIdentity& identity, cluster::NodeId node, bool creating) {
  json body{{"cluster", identity.name}, {"id", identity.id}, {"node", node}};
  if (creating) body["creating"] = true;
  return body.dump(2) + "\n";
}

Result<std::string> random_hex(std::size_t bytes) {
  std::vector<std::uint8_t> random(bytes);
  if (RAND_bytes(random.data(), static_cast<int>(bytes)) != 1) {
    return error(Errc::internal, "no randomness (OpenSSL RAND_bytes)");
  }
  return to_hex(random);
}

std::string sha256_hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(text.data(), text.size(), digest, &length, EVP_sha256(), nullptr);
  return to_hex(std::span<const std::uint8_t>(digest, length));
}

Status check_bindable(const std::string& address) {
  TP_ASSIGN_OR_RETURN(auto host_port, cluster::split_host_port(address));
  asio::io_context io;
  boost::system::error_code ec;
  auto ip = asio::ip::make_address_v4(host_port.first, ec);
  if (ec) return error(Errc::invalid_argument, "bad backend address " + address);
  asio::ip::tcp::acceptor acceptor(io);
  acceptor.open(asio::ip::tcp::v4(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind({ip, host_port.second}, ec);
  if (ec) return error(Errc::already_exists, "cannot listen on " + address + ": " + ec.message());
  return {};
}

// The CA's key is kept sealed under the admin token (cluster::seal): what every member holds,
// and a removed node's disk too, mints no certificate without the administrator.
std::string identity_body(const std::string& name, const std::string& id,
                          const std::string& token_sha256, const std::string& sealed_ca_key) {
  return json{
      {"name", name}, {"id", id}, {"token_sha256", token_sha256}, {"ca_key_sealed", sealed_ca_key}}
      .dump();
}

std::string ca_body(const std::string& certificate) {
  return json{{"certificate", certificate}}.dump();
}

// The fields of the cluster identity object.
struct StoredIdentity {
  json body;
  std::string id;
  std::string token_sha256;
  std::string sealed_ca_key;
};
Result<StoredIdentity> stored_identity(std::string_view identity_body) {
  json body = json::parse(identity_body, nullptr, false);
  if (!body.is_object() || !body.value("token_sha256", json()).is_string() ||
      !body.value("id", json()).is_string() || !body.value("ca_key_sealed", json()).is_string()) {
    return error(Errc::corrupt, "the cluster's identity object is malformed");
  }
  std::string id = body["id"];
  std::string token_sha256 = body["token_sha256"];
  std::string sealed = body["ca_key_sealed"];
  return StoredIdentity{std::move(body), std::move(id), std::move(token_sha256), std::move(sealed)};
}

bool same_secret(std::string_view expected, std::string_view given) {
  return expected.size() == given.size() &&
         CRYPTO_memcmp(expected.data(), given.data(), given.size()) == 0;
}

// The setup secret of a node in no cluster. The node makes one at the default place at its
// first start; a file the administrator named must exist, or nobody could make the node a
// member.
Result<std::string> read_setup_secret(const NodeConfig& config) {
  const bool named = !config.setup_secret_file.empty();
  const std::string path = named ? config.setup_secret_file : config.data_dir + "/setup-secret";
  if (!fs::exists(path)) {
    if (named) {
      return error(Errc::not_found, "cluster.setup_secret_file " + path + " does not exist");
    }
    TP_ASSIGN_OR_RETURN(std::string made, random_hex(32));
    TP_RETURN_IF_ERROR(write_file(path, made + "\n", 0600));
    spdlog::info("made this node's setup secret in {}", path);
  }
  TP_ASSIGN_OR_RETURN(std::string secret, read_secret_file(path));
  if (secret.size() < kMinSetupSecretLength) {
    return error(Errc::invalid_argument, "the setup secret in " + path + " has " +
                                             std::to_string(secret.size()) +
                                             " characters: it needs at least " +
                                             std::to_string(kMinSetupSecretLength));
  }
  return secret;
}

}  // namespace

Result<RotatedToken> rotate_token(std::string_view identity_body, std::string_view current_token) {
  TP_ASSIGN_OR_RETURN(StoredIdentity identity, stored_identity(identity_body));
  TP_ASSIGN_OR_RETURN(std::string ca_key,
                      cluster::unseal(identity.sealed_ca_key, current_token, identity.id));
  TP_ASSIGN_OR_RETURN(std::string token, random_hex(32));
  TP_ASSIGN_OR_RETURN(std::string sealed, cluster::seal(ca_key, token, identity.id));
  identity.body["token_sha256"] = sha256_hex(token);
  identity.body["ca_key_sealed"] = std::move(sealed);
  return RotatedToken{std::move(token), identity.body.dump()};
}

Membership::Membership(asio::any_io_executor strand, const NodeConfig& config, Hooks hooks)
    : strand_(std::move(strand)),
      config_(config),
      hooks_(std::move(hooks)),
      dir_(config.data_dir + "/cluster") {}

Membership::~Membership() {
  *alive_ = false;
  stop_member();
}

Result<std::unique_ptr<Membership>> Membership::open(asio::any_io_executor strand,
                                                     const NodeConfig& config, Hooks hooks) {
  std::unique_ptr<Membership> m(new Membership(std::move(strand), config, std::move(hooks)));
  std::error_code ec;
  fs::create_directories(m->dir_, ec);
  if (ec) return error(Errc::io_error, "cannot create " + m->dir_ + ": " + ec.message());
  ::chmod(m->dir_.c_str(), 0700);

  const std::string key_path = m->dir_ + "/node.key";
  const std::string self_path = m->dir_ + "/self-signed.pem";
  if (!fs::exists(key_path)) {
    TP_ASSIGN_OR_RETURN(cluster::PemPair made, cluster::create_self_signed_certificate(
                                                   cluster::node_common_name(config.node_id)));
    TP_RETURN_IF_ERROR(write_file(self_path, made.certificate, 0644));
    TP_RETURN_IF_ERROR(write_file(key_path, made.private_key, 0600));
  }
  TP_ASSIGN_OR_RETURN(m->self_signed_.private_key, read_file(key_path));
  TP_ASSIGN_OR_RETURN(m->self_signed_.certificate, read_file(self_path));

  const std::string identity_path = m->dir_ + "/" + kIdentityFile;
  if (Result<std::string> removed = read_file(m->dir_ + "/" + kRemovedFile); removed.ok()) {
    const json note = json::parse(*removed, nullptr, false);
    const bool said = note.is_object() && note.value("reason", json()).is_string();
    return error(Errc::not_permitted,
                 (said ? note["reason"].get<std::string>()
                       : std::string("this node was removed from its cluster")) +
                     ": it serves nothing. To use it again, empty " + config.data_dir +
                     " and add it to a cluster anew");
  }
  if (fs::exists(identity_path)) TP_RETURN_IF_ERROR(m->roll_back_half_made_cluster());
  if (!fs::exists(identity_path)) {
    TP_RETURN_IF_ERROR(check_bindable(config.backend_address));
    TP_ASSIGN_OR_RETURN(m->self_signed_fingerprint_,
                        cluster::certificate_fingerprint(m->self_signed_.certificate));
    TP_ASSIGN_OR_RETURN(m->setup_secret_, read_setup_secret(config));
    return m;
  }
  TP_ASSIGN_OR_RETURN(std::string text, read_file(identity_path));
  const json identity = json::parse(text, nullptr, false);
  if (!identity.is_object() || !identity.value("cluster", json()).is_string() ||
      !identity.value("id", json()).is_string() || !identity.value("node", json()).is_number()) {
    return error(Errc::corrupt, identity_path + " is not a cluster identity");
  }
  m->identity_ = ClusterIdentity{identity["cluster"], identity["id"]};
  const auto node = identity["node"].get<std::uint64_t>();
  if (node != config.node_id) {
    return error(Errc::invalid_argument, "data directory " + config.data_dir + " belongs to node " +
                                             std::to_string(node) + " of cluster '" +
                                             m->identity_->name + "', not to node " +
                                             std::to_string(config.node_id));
  }
  if (!config.cluster_name.empty() && config.cluster_name != m->identity_->name) {
    return error(Errc::invalid_argument, "data directory " + config.data_dir +
                                             " belongs to cluster '" + m->identity_->name +
                                             "', not '" + config.cluster_name + "'");
  }
  TP_ASSIGN_OR_RETURN(m->certificate_, read_file(m->dir_ + "/node.pem"));
  TP_ASSIGN_OR_RETURN(m->certificate_fingerprint_,
                      cluster::certificate_fingerprint(m->certificate_));
  TP_ASSIGN_OR_RETURN(m->ca_certificate_, read_file(m->dir_ + "/ca.pem"));
  TP_RETURN_IF_ERROR(m->start_member(false));
  return m;
}

cluster::NodeInfo Membership::self() const {
  return cluster::NodeInfo{config_.node_id,
                           cluster::node_common_name(config_.node_id),
                           config_.backend_address,
                           config_.frontend_address,
                           config_.admin_address,
                           config_.pool,
                           true,
                           certificate_fingerprint_};
}

cluster::PemPair Membership::admin_certificate() const {
  if (certificate_.empty()) return self_signed_;
  return cluster::PemPair{certificate_, self_signed_.private_key};
}

cluster::TcpTransport::Stats Membership::transport_stats() const {
  return transport_ ? transport_->stats() : cluster::TcpTransport::Stats{};
}

std::string Membership::ca_certificate() const { return ca_certificate_; }

Status Membership::start_member(bool bootstrap) {
  loop_ = cluster::make_asio_event_loop(strand_);
  cluster::TcpTransportOptions transport_options;
  transport_options.self = config_.node_id;
  transport_options.listen_address = config_.backend_address;
  if (config_.backend_tls) {
    transport_options.tls =
        cluster::TlsFiles{dir_ + "/ca.pem", dir_ + "/node.pem", dir_ + "/node.key"};
  }
  // On the strand, and never once the transport stopped (as it does before this is destroyed).
  transport_options.revoked = [this](cluster::NodeId by, const std::string& why) {
    leave_removed(by, why);
  };
  TP_ASSIGN_OR_RETURN(transport_,
                      cluster::TcpTransport::start(strand_, *loop_, std::move(transport_options)));
  cluster::GroupOptions group_options;
  group_options.id = config_.node_id;
  group_options.address = config_.backend_address;
  group_options.raft_log_path = dir_ + "/raft.db";
  group_options.config_db_path = dir_ + "/config.db";
  TP_ASSIGN_OR_RETURN(group_, cluster::GroupMember::open(*loop_, *transport_, group_options));
  // Before anything runs: until the group grants one, the front end serves nothing it may lose.
  if (hooks_.lease) hooks_.lease(group_->lease());
  if (bootstrap) TP_RETURN_IF_ERROR(group_->bootstrap(self()));
  rpc_ = std::make_unique<cluster::RpcEndpoint>(*loop_, *transport_,
                                                [group = group_.get()] { return group->epoch(); });
  client_ = std::make_unique<cluster::GroupClient>(*loop_, *group_, *rpc_);
  if (hooks_.serve_rpc) hooks_.serve_rpc(*rpc_);
  rpc_->handle(kStatsMethod, [this](cluster::NodeId, std::span<const std::uint8_t>,
                                    cluster::RpcEndpoint::Reply reply) {
    const NodeStats stats = hooks_.local_stats();
    xdr::Buffer body;
    xdr::Encoder out(body);
    out.u64(stats.in_bytes_per_second);
    out.u64(stats.out_bytes_per_second);
    out.u64(stats.used_bytes);
    out.u64(stats.size_bytes);
    reply(std::move(body));
  });
  rpc_->handle(kReportMethod, [this](cluster::NodeId, std::span<const std::uint8_t> request,
                                     cluster::RpcEndpoint::Reply reply) {
    xdr::Decoder in(request);
    const std::uint32_t report = in.u32();
    const json parameters = json::parse(in.string(kMaxReportBytes), nullptr, false);
    if (!in.ok() || parameters.is_discarded()) {
      return reply(error(Errc::invalid_argument, "malformed report request"));
    }
    local_report(static_cast<NodeReport>(report), parameters, [reply](Result<json> answer) {
      if (!answer.ok()) return reply(answer.status());
      const std::string text = answer->dump();
      xdr::Buffer body;
      xdr::Encoder out(body);
      out.string(text);
      reply(std::move(body));
    });
  });
  lockmgr::LockManagerOptions lock_options;
  lock_options.self = config_.node_id;
  // Past every lock id an earlier run of this node used, unless it handed out more than a
  // thousand per millisecond.
  lock_options.first_sequence =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count()) *
      1000;
  // A node that leaves a blocking callback unanswered is not skipped: the group view marks it
  // down, which drops its locks everywhere and fences it until it is heard from again.
  lock_options.unresponsive = [this, alive = std::weak_ptr<bool>(alive_)](cluster::NodeId node) {
    if (alive.expired() || !client_) return;
    spdlog::error("lock manager: node {} answered no blocking callback in time; marking it down",
                  node);
    client_->propose(cluster::Change::set_node_state(node, false), kChangeDeadline,
                     [node](Status s) {
                       if (!s.ok())
                         spdlog::warn("could not mark node {} down: {}", node, s.message());
                     });
  };
  lock_options.may_coordinate = [lease = group_->lease()] { return lease->held(); };
  lock_manager_ = std::make_unique<lockmgr::LockManager>(*loop_, *transport_, lock_options);
  advisory_locks_ = lockmgr::AdvisoryLocks::make(*loop_, *lock_manager_, hooks_.nlm_locks_lost);
  group_->on_applied([this](const cluster::AppliedChange& applied) {
    membership_changed(applied);
    changes_applied();
  });
  TP_RETURN_IF_ERROR(group_->start());
  if (hooks_.advisory_locks) hooks_.advisory_locks(advisory_locks_);
  if (hooks_.lock_manager) hooks_.lock_manager(loop_.get(), lock_manager_.get());
  if (!bootstrap && group_->view().node(config_.node_id) != nullptr) announce_up();
  spdlog::info("member of cluster '{}' ({}) as node {}, backend {}{}", identity_->name,
               identity_->id, config_.node_id, config_.backend_address,
               config_.backend_tls ? " (mutual TLS)" : " (no TLS)");
  return {};
}

void Membership::membership_changed(const cluster::AppliedChange& applied) {
  using Kind = cluster::Change::Kind;
  const Kind kind = applied.change.kind;
  if (!lock_manager_ || !applied.outcome.ok() ||
      (kind != Kind::add_node && kind != Kind::remove_node && kind != Kind::set_node_state)) {
    return;
  }
  // The change's own epoch, the same on every node: the lock manager's epoch moves only when
  // membership does, not with every change to the configuration.
  lock_manager_->set_view(applied.epoch, group_->view().up_nodes());
  // Later on the loop: the callers' callbacks may propose changes, and this runs while the
  // group applies one.
  const cluster::NodeId node = applied.change.node.id;
  if (node != config_.node_id && !group_->view().is_up(node)) {
    loop_->post([this, alive = std::weak_ptr<bool>(alive_), node] {
      const std::shared_ptr<bool> held = alive.lock();
      if (held && *held && rpc_) {
        rpc_->abandon_calls_to(node, "the group recorded it down");
      }
    });
  }
}

void Membership::announce_up() {
  client_->propose(cluster::Change::set_node_state(config_.node_id, true), kChangeDeadline,
                   [this, alive = std::weak_ptr<bool>(alive_)](Status s) {
                     if (alive.expired() || s.ok() || !client_) return;
                     spdlog::warn("cannot record this node up yet ({}); trying again", s.message());
                     loop_->schedule(std::chrono::seconds(1), [this, alive] {
                       if (!alive.expired() && client_) announce_up();
                     });
                   });
}

void Membership::changes_applied() {
  if (refresh_posted_) return;
  refresh_posted_ = true;
  loop_->post([this, alive = std::weak_ptr<bool>(alive_)] {
    if (alive.expired()) return;
    refresh_posted_ = false;
    const cluster::GroupView& view = group_->view();
    cluster::PeerCertificates certificates;
    for (const cluster::NodeInfo& node : view.nodes) {
      if (node.id != config_.node_id) transport_->set_address(node.id, node.backend_address);
      certificates.issued.emplace(node.id, node.certificate);
    }
    certificates.revoked.insert(view.revoked_certificates.begin(), view.revoked_certificates.end());
    if (certificates != peer_certificates_) {
      peer_certificates_ = certificates;
      transport_->set_peer_certificates(std::move(certificates));
    }
    hooks_.view_changed(view);
  });
}

bool Membership::admin_token_known() const {
  return group_ && group_->view().object(kClusterKind, kIdentityName) != nullptr;
}

bool Membership::setup_secret_valid(std::string_view secret) const {
  return !identity_ && !setup_secret_.empty() && same_secret(setup_secret_, secret);
}

std::string Membership::own_setup_proof() const {
  if (identity_ || setup_secret_.empty()) return {};
  return setup_proof(setup_secret_, self_signed_fingerprint_);
}

bool Membership::token_valid(std::string_view token) const {
  if (!admin_token_known() || token.empty()) return false;
  const cluster::ConfigObject* identity = group_->view().object(kClusterKind, kIdentityName);
  const Result<StoredIdentity> stored = stored_identity(identity->body);
  return stored.ok() && same_secret(stored->token_sha256, sha256_hex(token));
}

asio::awaitable<Result<CreatedCluster>> Membership::create(std::string name) {
  if (identity_) {
    co_return error(Errc::already_exists, "this node is already in cluster '" + identity_->name + "'");
  }
  if (!is_valid_name(name)) {
    co_return error(Errc::invalid_argument,
                    "'" + name + "' is not a cluster name (1-63 of A-Z a-z 0-9 - _)");
  }
  if (!config_.cluster_name.empty() && config_.cluster_name != name) {
    co_return error(Errc::invalid_argument, "this node is configured for cluster '" +
                                                config_.cluster_name + "', not '" + name + "'");
  }
  CreatedCluster created;
  created.identity.name = name;
  auto id = random_hex(16);
  auto token = random_hex(32);
  auto ca = cluster::create_certificate_authority(name);
  if (!id.ok() || !token.ok() || !ca.ok()) co_return error(Errc::internal, "cannot make the cluster's keys");
  created.identity.id = *id;
  created.token = *token;
  created.ca_certificate = ca->certificate;
  auto admin = cluster::split_host_port(config_.admin_address);
  if (!admin.ok()) co_return admin.status();
  auto certificate = cluster::sign_certificate(*ca, cluster::node_common_name(config_.node_id),
                                               self_signed_.certificate, admin->first);
  if (!certificate.ok()) co_return certificate.status();
  if (Status installed = install(JoinPackage{created.identity, ca->certificate, *certificate}, true);
      !installed.ok()) {
    co_return installed;
  }
  // The leader registers itself a tick after it leads; the cluster is made only once it has,
  // so that what the administrator does next (a tier of this node's pool) finds the node.
  for (auto waited = std::chrono::milliseconds(0);; waited += kRegistrationPoll) {
    auto looking = await_callback<bool>([this](auto done) {
      loop_->schedule(kRegistrationPoll, [this, done = std::move(done)]() mutable {
        done(group_->view().node(config_.node_id) != nullptr);
      });
    });
    if (co_await std::move(looking)) break;
    if (waited >= kChangeDeadline) {
      co_return error(Errc::timed_out, "this node did not register itself in the new cluster");
    }
  }

  if (const auto pause = fail_points::pause_at(fail_points::kClusterCreateRecords);
      pause.count() > 0) {
    spdlog::info("fail point {}: cluster '{}' made, its records wait {} ms",
                 fail_points::kClusterCreateRecords, name, pause.count());
    asio::steady_timer paused(co_await asio::this_coro::executor, pause);
    co_await paused.async_wait(asio::use_awaitable);
  }
  auto sealed_ca_key = cluster::seal(ca->private_key, created.token, created.identity.id);
  if (!sealed_ca_key.ok()) co_return sealed_ca_key.status();
  std::vector<cluster::Change> seed;
  seed.push_back(cluster::Change::create_object(
      std::string(kClusterKind), std::string(kIdentityName),
      identity_body(name, created.identity.id, sha256_hex(created.token), *sealed_ca_key)));
  seed.push_back(cluster::Change::create_object(std::string(kClusterKind), std::string(kCaName),
                                                ca_body(ca->certificate)));
  store::NamespaceRecord namespace_record = store::new_namespace(config_.node_id, config_.namespace_shards);
  if (RAND_bytes(namespace_record.handle_key.data(),
                 static_cast<int>(namespace_record.handle_key.size())) != 1) {
    co_return error(Errc::internal, "no randomness for the file handle key");
  }
  seed.push_back(store::namespace_creation(namespace_record));
  // New files' data goes over the nodes of this node's pool: spread from the start, rather than
  // kept with their shard until a policy names a pool.
  policy::PolicySet policies;
  policies.defaults.storage_target = config_.pool;
  seed.push_back(policies_update(StoredPolicies{}, policies));
  std::uint32_t export_id = 1;
  for (const ExportConfig& entry : config_.exports) {
    seed.push_back(cluster::Change::create_object(std::string(kExportKind),
                                                  std::to_string(export_id),
                                                  encode_export(entry)));
    ++export_id;
  }
  for (const cluster::Change& change : seed) {
    cluster::GroupClient* client = client_.get();
    auto proposing = await_callback<Status>(
        [client, change](auto done) { client->propose(change, kChangeDeadline, done); });
    Status applied = co_await std::move(proposing);
    if (!applied.ok()) co_return applied;
  }
  // Only now does a restart keep the cluster rather than roll it back.
  if (Status kept = write_file(dir_ + "/" + kIdentityFile,
                               identity_text(created.identity, config_.node_id, false), 0644);
      !kept.ok()) {
    co_return kept;
  }
  spdlog::info("created cluster '{}' ({})", name, created.identity.id);
  co_return created;
}

Status Membership::join(const JoinPackage& package) { return install(package, false); }

Status Membership::roll_back_half_made_cluster() {
  TP_ASSIGN_OR_RETURN(std::string text, read_file(dir_ + "/" + kIdentityFile));
  const json identity = json::parse(text, nullptr, false);
  // json::value() throws for a key of another type: a damaged file must not stop the start.
  const json creating = identity.is_object() ? identity.value("creating", json()) : json();
  if (!creating.is_boolean() || !creating.get<bool>()) return {};
  const json name = identity.value("cluster", json());
  spdlog::warn(
      "the creation of cluster '{}' was cut short (this node stopped before its records "
      "were written): it is undone, and this node is in no cluster; run 'tide cluster "
      "create' again",
      name.is_string() ? name.get<std::string>() : std::string("?"));
  // The identity goes last: a crash meanwhile rolls back again at the next start.
  for (const char* file : {"raft.db", "config.db", "node.pem", "ca.pem", kIdentityFile}) {
    std::error_code failed;
    fs::remove(dir_ + "/" + file, failed);
    if (failed) {
      return error(Errc::io_error, "cannot remove " + dir_ + "/" + file +
                                       " of a cluster's creation cut short: " + failed.message());
    }
  }
  return {};
}

Status Membership::install(const JoinPackage& package, bool bootstrap) {
  if (identity_) {
    return error(Errc::already_exists, "this node is already in cluster '" + identity_->name + "'");
  }
  if (!config_.cluster_name.empty() && config_.cluster_name != package.identity.name) {
    return error(Errc::invalid_argument, "this node is configured for cluster '" +
                                             config_.cluster_name + "', not '" +
                                             package.identity.name + "'");
  }
  TP_RETURN_IF_ERROR(cluster::check_key_matches(package.certificate, self_signed_.private_key));
  TP_ASSIGN_OR_RETURN(std::string fingerprint,
                      cluster::certificate_fingerprint(package.certificate));
  // Left by an attempt that failed before the identity was written.
  std::error_code ignored;
  fs::remove(dir_ + "/raft.db", ignored);
  fs::remove(dir_ + "/config.db", ignored);
  TP_RETURN_IF_ERROR(write_file(dir_ + "/ca.pem", package.ca_certificate, 0644));
  TP_RETURN_IF_ERROR(write_file(dir_ + "/node.pem", package.certificate, 0644));
  identity_ = package.identity;
  certificate_ = package.certificate;
  certificate_fingerprint_ = std::move(fingerprint);
  ca_certificate_ = package.ca_certificate;
  Status started = start_member(bootstrap);
  if (started.ok()) {
    started = write_file(dir_ + "/" + kIdentityFile,
                         identity_text(package.identity, config_.node_id, bootstrap), 0644);
  }
  if (!started.ok()) {
    stop_member();
    identity_.reset();
    certificate_.clear();
    certificate_fingerprint_.clear();
    ca_certificate_.clear();
  }
  return started;
}

void Membership::stop_member() {
  if (hooks_.lease) hooks_.lease(nullptr);
  if (advisory_locks_) {
    if (hooks_.advisory_locks) hooks_.advisory_locks(nullptr);
    advisory_locks_->close();
    advisory_locks_.reset();
  }
  if (lock_manager_ && hooks_.lock_manager) hooks_.lock_manager(nullptr, nullptr);
  lock_manager_.reset();
  client_.reset();
  rpc_.reset();
  group_.reset();
  transport_.reset();
  peer_certificates_ = {};
  loop_.reset();
}

void Membership::leave_removed(cluster::NodeId by, const std::string& why) {
  if (removed_ || !identity_) return;
  removed_ = "this node was removed from cluster '" + identity_->name + "': node " +
             std::to_string(by) + " refused it (" + why + ")";
  spdlog::error("{}. It stops serving NFS, its admin API (but /health) and the backend", *removed_);
  // Kept, so that a restart does not serve for the moment until a member refuses it again.
  const json note{{"cluster", identity_->name}, {"by", by}, {"reason", *removed_}};
  if (Status kept = write_file(dir_ + "/" + kRemovedFile, note.dump(2) + "\n", 0644); !kept.ok()) {
    spdlog::error("cannot note the removal on disk: {}", kept.message());
  }
  if (hooks_.removed) hooks_.removed(*removed_);
  // Stopped in place, not destroyed: what the group and the lock manager have posted to the
  // strand may still run, and finds them whole (and deaf).
  transport_->stop();
}

Result<std::string> Membership::sign_node_certificate(cluster::NodeId node,
                                                      const std::string& subject_certificate,
                                                      const std::string& admin_address,
                                                      std::string_view token) const {
  if (!group_) return error(Errc::unavailable, "this node is not in a cluster");
  const cluster::ConfigObject* ca = group_->view().object(kClusterKind, kCaName);
  const cluster::ConfigObject* identity = group_->view().object(kClusterKind, kIdentityName);
  if (ca == nullptr || identity == nullptr) {
    return error(Errc::unavailable, "the cluster CA is not known here yet");
  }
  const json body = json::parse(ca->body, nullptr, false);
  if (!body.is_object() || !body.value("certificate", json()).is_string()) {
    return error(Errc::corrupt, "the cluster CA in the configuration is malformed");
  }
  TP_ASSIGN_OR_RETURN(StoredIdentity stored, stored_identity(identity->body));
  Result<std::string> key = cluster::unseal(stored.sealed_ca_key, token, stored.id);
  if (key.code() == Errc::access_denied) {
    return error(Errc::access_denied,
                 "the CA's key does not open under this token: it was rotated meanwhile");
  }
  if (!key.ok()) return key.status();
  TP_ASSIGN_OR_RETURN(auto admin, cluster::split_host_port(admin_address));
  return cluster::sign_certificate(cluster::PemPair{body["certificate"], *key},
                                   cluster::node_common_name(node), subject_certificate,
                                   admin.first);
}

asio::awaitable<Result<NodeStats>> Membership::stats_of(cluster::NodeId node,
                                                       std::chrono::milliseconds deadline) {
  if (node == config_.node_id || !rpc_) co_return hooks_.local_stats();
  cluster::RpcEndpoint* rpc = rpc_.get();
  auto calling = await_callback<Result<xdr::Buffer>>(
      [rpc, node, deadline](auto done) { rpc->call(node, kStatsMethod, {}, deadline, done); });
  Result<xdr::Buffer> reply = co_await std::move(calling);
  if (!reply.ok()) co_return reply.status();
  xdr::Decoder in(*reply);
  NodeStats stats;
  stats.in_bytes_per_second = in.u64();
  stats.out_bytes_per_second = in.u64();
  stats.used_bytes = in.u64();
  stats.size_bytes = in.u64();
  if (!in.ok()) co_return error(Errc::internal, "malformed stats reply");
  co_return stats;
}

void Membership::local_report(NodeReport report, const json& parameters,
                              std::function<void(Result<json>)> done) {
  const cluster::NodeId self = config_.node_id;
  switch (report) {
    case NodeReport::locks: {
      if (!lock_manager_) return done(error(Errc::unavailable, "this node is not in a cluster"));
      auto filter = LocksFilter::from_json(parameters);
      if (!filter.ok()) return done(filter.status());
      return done(locks_report(self, lock_manager_->held(), loop_->now_ms(), *filter));
    }
    case NodeReport::lock_statistics:
      if (!lock_manager_) return done(error(Errc::unavailable, "this node is not in a cluster"));
      return done(lock_statistics_report(self, lock_manager_->statistics()));
    case NodeReport::nlm_sessions:
      if (!hooks_.nlm_sessions) return done(nlm_sessions_report(self, {}));
      // The sessions come from another thread: back to the strand, unless the node is gone.
      hooks_.nlm_sessions([strand = strand_, alive = std::weak_ptr<bool>(alive_), self,
                           done = std::move(done)](std::vector<nfsd::NlmSession> sessions) {
        asio::post(strand, [alive, self, done, sessions = std::move(sessions)] {
          if (!alive.expired()) done(nlm_sessions_report(self, sessions));
        });
      });
      return;
    case NodeReport::cache_statistics:
      if (!hooks_.cache_statistics) return done(error(Errc::unavailable, "this node has no cache"));
      return done(hooks_.cache_statistics());
    case NodeReport::system_statistics:
      if (!hooks_.system_statistics) return done(error(Errc::unavailable, "no statistics here"));
      return done(hooks_.system_statistics());
    case NodeReport::client_statistics:
      if (!hooks_.client_statistics) return done(error(Errc::unavailable, "no statistics here"));
      return done(hooks_.client_statistics());
    case NodeReport::cache_flush: {
      // value() throws on anything but an object.
      const json l1 = parameters.is_object() ? parameters.value("l1", json(false)) : json();
      const json l2 = parameters.is_object() ? parameters.value("l2", json(false)) : json();
      if (!l1.is_boolean() || !l2.is_boolean()) {
        return done(error(Errc::invalid_argument,
                          "a flush names its levels: {\"l1\": bool, \"l2\": bool}"));
      }
      if (!hooks_.flush_cache) return done(error(Errc::unavailable, "this node has no cache"));
      hooks_.flush_cache(l1.get<bool>(), l2.get<bool>(),
                         [strand = strand_, alive = std::weak_ptr<bool>(alive_), self, l1, l2,
                          done = std::move(done)](Status flushed) {
                           asio::post(strand, [alive, self, l1, l2, done, flushed] {
                             if (alive.expired()) return;
                             if (!flushed.ok()) return done(flushed);
                             done(json{{"flushed", {{"node", self}, {"l1", l1}, {"l2", l2}}}});
                           });
                         });
      return;
    }
  }
  done(error(Errc::invalid_argument, "no such report"));
}

asio::awaitable<Result<json>> Membership::report_of(cluster::NodeId node, NodeReport report,
                                                    json parameters,
                                                    std::chrono::milliseconds deadline) {
  if (node == config_.node_id || !rpc_) {
    auto reporting = await_callback<Result<json>>(
        [this, report, &parameters](auto done) { local_report(report, parameters, done); });
    co_return co_await std::move(reporting);
  }
  xdr::Buffer request;
  xdr::Encoder out(request);
  out.u32(static_cast<std::uint32_t>(report));
  out.string(parameters.dump());
  cluster::RpcEndpoint* rpc = rpc_.get();
  auto calling = await_callback<Result<xdr::Buffer>>([rpc, node, &request, deadline](auto done) {
    rpc->call(node, kReportMethod, request, deadline, done);
  });
  Result<xdr::Buffer> reply = co_await std::move(calling);
  if (!reply.ok()) co_return reply.status();
  xdr::Decoder in(*reply);
  const std::string text(in.string(kMaxReportBytes));
  json parsed = json::parse(text, nullptr, false);
  if (!in.ok() || parsed.is_discarded() || !parsed.is_object()) {
    co_return error(Errc::internal, "malformed report from node " + std::to_string(node));
  }
  co_return parsed;
}

}  // namespace tidepool::daemon
