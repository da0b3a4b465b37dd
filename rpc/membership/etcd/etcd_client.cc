#include "rpc/membership/etcd/etcd_client.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "rpc/membership/etcd/etcd_call.h"
#include "rpc/membership/etcd/etcd_connection.h"
#include "rpc/membership/etcd/etcd_convert.h"

namespace ferry {
namespace {

namespace pb = etcdserverpb;

// How long Stop() waits for calls and streams to end.
constexpr absl::Duration kStopWait = absl::Seconds(5);
// One round of Connect's health probes waits at most this long for an
// endpoint, so one silent endpoint does not hide a healthy one for long.
constexpr absl::Duration kProbeRound = absl::Seconds(1);
// Beyond a call's own deadline, how long a Wait on it may take: the call
// settles by its deadline, this only absorbs scheduling delays.
constexpr absl::Duration kWaitSlack = absl::Seconds(1);

// The stub method an RPC starts with, as EtcdCall wants it.
#define FERRY_ETCD_START(Service, Method, Req, Resp)               \
  [](const EtcdStubs& s, grpc::ClientContext* c, const pb::Req* q, \
     pb::Resp* a, std::function<void(grpc::Status)> done) {        \
    s.Service->async()->Method(c, q, a, std::move(done));          \
  }

template <typename Resp>
Future<Done> Ignore(const Future<Resp>& f) {
  return f.Map([](const absl::StatusOr<Resp>& r) -> absl::StatusOr<Done> {
    if (!r.ok()) return r.status();
    return Done();
  });
}

std::string Quoted(const std::string& s) { return absl::StrCat("'", s, "'"); }

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(
    EtcdOptions options) {
  absl::StatusOr<std::shared_ptr<EtcdConnection>> connection =
      EtcdConnection::Create(options);
  if (!connection.ok()) return connection.status();
  std::unique_ptr<EtcdClient> client(new EtcdClient(*std::move(connection)));
  const absl::Time deadline =
      client->connection_->Now() + options.connect_timeout;
  absl::Status healthy = client->FindHealthyEndpoint(deadline);
  if (!healthy.ok()) return healthy;
  if (client->connection_->authenticates()) {
    absl::StatusOr<Done> token =
        client->connection_->RenewToken(0, deadline)
            .Wait(options.connect_timeout + kWaitSlack);
    if (!token.ok()) return token.status();
  }
  return client;
}

EtcdClient::EtcdClient(std::shared_ptr<EtcdConnection> connection)
    : connection_(std::move(connection)) {}

EtcdClient::~EtcdClient() { Stop(); }

void EtcdClient::Stop() {
  connection_->Stop(kStopWait);
  connection_->StopOwnTimers();
  connection_->ReleaseChannels(kStopWait);
}

absl::Time EtcdClient::Deadline() const {
  return connection_->Now() + connection_->options().call_timeout;
}

// Probes every endpoint at once, in rounds, until one answers and knows a
// leader; the first such in the endpoints' order becomes the one in use.
absl::Status EtcdClient::FindHealthyEndpoint(absl::Time deadline) {
  std::vector<std::string> errors(connection_->size(), "not tried");
  for (int round = 0;; ++round) {
    const absl::Time round_end =
        std::min(deadline, connection_->Now() + kProbeRound);
    if (ProbeRound(round_end, &errors)) return absl::OkStatus();
    const absl::Duration left = deadline - connection_->Now();
    if (left <= absl::ZeroDuration()) break;
    absl::SleepFor(std::min(connection_->Backoff(round), left));
  }
  return absl::UnavailableError(absl::StrCat(
      "no healthy etcd endpoint among ", connection_->all_endpoints(),
      " within ", absl::FormatDuration(connection_->options().connect_timeout),
      ": ", absl::StrJoin(errors, "; ")));
}

// One round of probes; true once an endpoint was chosen, else each
// endpoint's reason in `errors`.
bool EtcdClient::ProbeRound(absl::Time round_end,
                            std::vector<std::string>* errors) {
  const int n = connection_->size();
  std::vector<Future<pb::StatusResponse>> probes;
  for (int i = 0; i < n; ++i) {
    EtcdCallSpec spec{.what = "Status",
                      .read_only = true,
                      .authenticated = false,
                      .pinned_endpoint = i};
    probes.push_back(EtcdCall<pb::StatusRequest, pb::StatusResponse>(
        connection_, std::move(spec), pb::StatusRequest(),
        FERRY_ETCD_START(maintenance, Status, StatusRequest, StatusResponse),
        round_end));
  }
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<pb::StatusResponse> status =
        probes[i].Wait(round_end - connection_->Now() + kWaitSlack);
    if (status.ok() && status->leader() != 0) {
      connection_->SetCurrent(i);
      return true;
    }
    (*errors)[i] = status.ok() ? absl::StrCat("etcd ", connection_->address(i),
                                              ": answers but knows no leader")
                               : std::string(status.status().message());
  }
  return false;
}

// ---- KV ----

Future<EtcdRange> EtcdClient::Get(std::string key) {
  return Range(std::move(key), /*prefix=*/false);
}

Future<EtcdRange> EtcdClient::GetPrefix(std::string prefix) {
  return Range(std::move(prefix), /*prefix=*/true);
}

Future<EtcdRange> EtcdClient::Range(std::string key, bool prefix) {
  EtcdCallSpec spec{
      .what = absl::StrCat("Range ", Quoted(key), prefix ? " (prefix)" : ""),
      .read_only = true};
  return EtcdCall<pb::RangeRequest, pb::RangeResponse>(
             connection_, std::move(spec), RangeRequestFor(key, prefix),
             FERRY_ETCD_START(kv, Range, RangeRequest, RangeResponse),
             Deadline())
      .Map([](const absl::StatusOr<pb::RangeResponse>& r)
               -> absl::StatusOr<EtcdRange> {
        if (!r.ok()) return r.status();
        return FromProto(*r);
      });
}

Future<int64_t> EtcdClient::Put(std::string key, std::string value,
                                int64_t lease) {
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(std::move(value));
  request.set_lease(lease);
  EtcdCallSpec spec{.what = absl::StrCat("Put ", Quoted(key))};
  return EtcdCall<pb::PutRequest, pb::PutResponse>(
             connection_, std::move(spec), std::move(request),
             FERRY_ETCD_START(kv, Put, PutRequest, PutResponse), Deadline())
      .Map([](const absl::StatusOr<pb::PutResponse>& r)
               -> absl::StatusOr<int64_t> {
        if (!r.ok()) return r.status();
        return r->header().revision();
      });
}

Future<int64_t> EtcdClient::Delete(std::string key) {
  return DeleteRange(std::move(key), /*prefix=*/false);
}

Future<int64_t> EtcdClient::DeletePrefix(std::string prefix) {
  return DeleteRange(std::move(prefix), /*prefix=*/true);
}

Future<int64_t> EtcdClient::DeleteRange(std::string key, bool prefix) {
  EtcdCallSpec spec{.what = absl::StrCat("DeleteRange ", Quoted(key),
                                         prefix ? " (prefix)" : "")};
  return EtcdCall<pb::DeleteRangeRequest, pb::DeleteRangeResponse>(
             connection_, std::move(spec), DeleteRequestFor(key, prefix),
             FERRY_ETCD_START(kv, DeleteRange, DeleteRangeRequest,
                              DeleteRangeResponse),
             Deadline())
      .Map([](const absl::StatusOr<pb::DeleteRangeResponse>& r)
               -> absl::StatusOr<int64_t> {
        if (!r.ok()) return r.status();
        return r->deleted();
      });
}

Future<EtcdTxnResult> EtcdClient::Txn(EtcdTxn txn) {
  absl::StatusOr<pb::TxnRequest> request = ToProto(txn);
  if (!request.ok()) return Future<EtcdTxnResult>::Ready(request.status());
  std::string keys;
  for (const EtcdCompare& c : txn.compares) {
    absl::StrAppend(&keys, keys.empty() ? "" : ",", Quoted(c.key));
  }
  EtcdCallSpec spec{.what = absl::StrCat("Txn on ", keys.empty() ? "-" : keys)};
  return EtcdCall<pb::TxnRequest, pb::TxnResponse>(
             connection_, std::move(spec), *std::move(request),
             FERRY_ETCD_START(kv, Txn, TxnRequest, TxnResponse), Deadline())
      .Map([](const absl::StatusOr<pb::TxnResponse>& r)
               -> absl::StatusOr<EtcdTxnResult> {
        if (!r.ok()) return r.status();
        return FromProto(*r);
      });
}

Future<Done> EtcdClient::Compact(int64_t revision) {
  pb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(true);
  EtcdCallSpec spec{.what = absl::StrCat("Compact to revision ", revision),
                    .read_only = true};  // Compacting twice changes nothing.
  return Ignore(EtcdCall<pb::CompactionRequest, pb::CompactionResponse>(
      connection_, std::move(spec), std::move(request),
      FERRY_ETCD_START(kv, Compact, CompactionRequest, CompactionResponse),
      Deadline()));
}

// ---- Leases ----

Future<EtcdLease> EtcdClient::GrantLease(absl::Duration ttl) {
  const int64_t seconds = std::max<int64_t>(
      1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1))));
  pb::LeaseGrantRequest request;
  request.set_ttl(seconds);
  EtcdCallSpec spec{.what = absl::StrCat("LeaseGrant TTL ", seconds, " s")};
  const absl::Time asked = connection_->Now();
  return EtcdCall<pb::LeaseGrantRequest, pb::LeaseGrantResponse>(
             connection_, std::move(spec), std::move(request),
             FERRY_ETCD_START(lease, LeaseGrant, LeaseGrantRequest,
                              LeaseGrantResponse),
             Deadline())
      .Map([asked](const absl::StatusOr<pb::LeaseGrantResponse>& r)
               -> absl::StatusOr<EtcdLease> {
        if (!r.ok()) return r.status();
        if (!r->error().empty() || r->ttl() <= 0) {
          return absl::InternalError(
              absl::StrCat("etcd LeaseGrant: no lease granted (TTL ", r->ttl(),
                           "): ", r->error()));
        }
        return EtcdLease{r->id(), absl::Seconds(r->ttl()), asked};
      });
}

Future<Done> EtcdClient::RevokeLease(int64_t id) {
  pb::LeaseRevokeRequest request;
  request.set_id(id);
  EtcdCallSpec spec{.what = absl::StrCat("LeaseRevoke ", id),
                    .read_only = true};  // A repeat is NOT_FOUND, no harm.
  return Ignore(EtcdCall<pb::LeaseRevokeRequest, pb::LeaseRevokeResponse>(
      connection_, std::move(spec), std::move(request),
      FERRY_ETCD_START(lease, LeaseRevoke, LeaseRevokeRequest,
                       LeaseRevokeResponse),
      Deadline()));
}

Future<absl::Duration> EtcdClient::LeaseTimeToLive(int64_t id) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(id);
  EtcdCallSpec spec{.what = absl::StrCat("LeaseTimeToLive ", id),
                    .read_only = true};
  const std::string endpoints = connection_->all_endpoints();
  return EtcdCall<pb::LeaseTimeToLiveRequest, pb::LeaseTimeToLiveResponse>(
             connection_, std::move(spec), std::move(request),
             FERRY_ETCD_START(lease, LeaseTimeToLive, LeaseTimeToLiveRequest,
                              LeaseTimeToLiveResponse),
             Deadline())
      .Map([id, endpoints](const absl::StatusOr<pb::LeaseTimeToLiveResponse>& r)
               -> absl::StatusOr<absl::Duration> {
        if (!r.ok()) return r.status();
        // etcd answers -1 for a lease it does not have.
        if (r->ttl() < 0) {
          return absl::NotFoundError(
              absl::StrCat("etcd ", endpoints, ": LeaseTimeToLive ", id,
                           ": no such lease (expired or revoked)"));
        }
        return absl::Seconds(r->ttl());
      });
}

std::unique_ptr<EtcdKeepAlive> EtcdClient::KeepAlive(
    const EtcdLease& lease, EtcdLeaseLostCallback on_lost) {
  return EtcdKeepAlive::Start(connection_, lease, std::move(on_lost));
}

// ---- Watch ----

std::unique_ptr<EtcdWatch> EtcdClient::WatchPrefix(
    std::string prefix, int64_t start_revision, EtcdWatchCallbacks callbacks) {
  return EtcdWatch::Start(connection_, std::move(prefix), start_revision,
                          std::move(callbacks));
}

// ---- Auth administration ----

Future<Done> EtcdClient::AddUser(std::string user, std::string password) {
  pb::AuthUserAddRequest request;
  request.set_name(user);
  request.set_password(std::move(password));
  EtcdCallSpec spec{.what = absl::StrCat("UserAdd ", Quoted(user))};
  return Ignore(EtcdCall<pb::AuthUserAddRequest, pb::AuthUserAddResponse>(
      connection_, std::move(spec), std::move(request),
      FERRY_ETCD_START(auth, UserAdd, AuthUserAddRequest, AuthUserAddResponse),
      Deadline()));
}

Future<Done> EtcdClient::AddRole(std::string role) {
  pb::AuthRoleAddRequest request;
  request.set_name(role);
  EtcdCallSpec spec{.what = absl::StrCat("RoleAdd ", Quoted(role))};
  return Ignore(EtcdCall<pb::AuthRoleAddRequest, pb::AuthRoleAddResponse>(
      connection_, std::move(spec), std::move(request),
      FERRY_ETCD_START(auth, RoleAdd, AuthRoleAddRequest, AuthRoleAddResponse),
      Deadline()));
}

Future<Done> EtcdClient::GrantRole(std::string user, std::string role) {
  pb::AuthUserGrantRoleRequest request;
  request.set_user(user);
  request.set_role(role);
  EtcdCallSpec spec{.what = absl::StrCat("UserGrantRole ", Quoted(role), " to ",
                                         Quoted(user))};
  return Ignore(
      EtcdCall<pb::AuthUserGrantRoleRequest, pb::AuthUserGrantRoleResponse>(
          connection_, std::move(spec), std::move(request),
          FERRY_ETCD_START(auth, UserGrantRole, AuthUserGrantRoleRequest,
                           AuthUserGrantRoleResponse),
          Deadline()));
}

Future<Done> EtcdClient::GrantPrefix(std::string role, std::string prefix) {
  pb::AuthRoleGrantPermissionRequest request;
  request.set_name(role);
  authpb::Permission* permission = request.mutable_perm();
  permission->set_permtype(authpb::Permission::READWRITE);
  permission->set_key(prefix);
  permission->set_range_end(EtcdPrefixEnd(prefix));
  EtcdCallSpec spec{.what = absl::StrCat("RoleGrantPermission ", Quoted(role),
                                         " on ", Quoted(prefix), " (prefix)")};
  return Ignore(EtcdCall<pb::AuthRoleGrantPermissionRequest,
                         pb::AuthRoleGrantPermissionResponse>(
      connection_, std::move(spec), std::move(request),
      FERRY_ETCD_START(auth, RoleGrantPermission,
                       AuthRoleGrantPermissionRequest,
                       AuthRoleGrantPermissionResponse),
      Deadline()));
}

Future<Done> EtcdClient::EnableAuth() {
  EtcdCallSpec spec{.what = "AuthEnable", .read_only = true};
  return Ignore(EtcdCall<pb::AuthEnableRequest, pb::AuthEnableResponse>(
      connection_, std::move(spec), pb::AuthEnableRequest(),
      FERRY_ETCD_START(auth, AuthEnable, AuthEnableRequest, AuthEnableResponse),
      Deadline()));
}

Future<Done> EtcdClient::DisableAuth() {
  EtcdCallSpec spec{.what = "AuthDisable", .read_only = true};
  return Ignore(EtcdCall<pb::AuthDisableRequest, pb::AuthDisableResponse>(
      connection_, std::move(spec), pb::AuthDisableRequest(),
      FERRY_ETCD_START(auth, AuthDisable, AuthDisableRequest,
                       AuthDisableResponse),
      Deadline()));
}

// ---- Cluster ----

Future<EtcdMemberStatus> EtcdClient::Status() {
  EtcdCallSpec spec{.what = "Status", .read_only = true};
  std::shared_ptr<EtcdConnection> connection = connection_;
  return EtcdCall<pb::StatusRequest, pb::StatusResponse>(
             connection_, std::move(spec), pb::StatusRequest(),
             FERRY_ETCD_START(maintenance, Status, StatusRequest,
                              StatusResponse),
             Deadline())
      .Map([connection](const absl::StatusOr<pb::StatusResponse>& r)
               -> absl::StatusOr<EtcdMemberStatus> {
        if (!r.ok()) return r.status();
        EtcdMemberStatus status;
        status.endpoint = connection->address(connection->current());
        status.version = r->version();
        status.member_id = r->header().member_id();
        status.leader = r->leader();
        status.revision = r->header().revision();
        return status;
      });
}

std::string EtcdClient::endpoint() const {
  return connection_->address(connection_->current());
}

const std::vector<std::string>& EtcdClient::endpoints() const {
  return connection_->options().endpoints;
}

#undef FERRY_ETCD_START

}  // namespace ferry
