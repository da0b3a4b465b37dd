// A client of etcd's v3 API over etcd's own gRPC services (KV, Lease,
// Watch, Auth, Maintenance), for membership kept in etcd:
//
//   EtcdOptions options;
//   options.endpoints = {"10.0.0.1:2379", "10.0.0.2:2379"};
//   auto etcd = EtcdClient::Connect(options);          // bounded
//   if (!etcd.ok()) return etcd.status();
//   EtcdLease lease = (*etcd)->GrantLease(absl::Seconds(10))
//                         .Wait(absl::Seconds(10)).value();
//   auto keep = (*etcd)->KeepAlive(lease, [](const absl::Status& why) {
//     // Lost: etcd has dropped, or will drop, every key under the lease.
//   });
//   EtcdTxn take;                                       // rank 3 if free
//   take.compares = {EtcdCompare::Absent("/job/rank/3")};
//   take.success = {EtcdOp::Put("/job/rank/3", "10.0.0.5:4000", lease.id)};
//   bool mine = (*etcd)->Txn(take).Wait(absl::Seconds(10))->succeeded;
//   EtcdRange now = (*etcd)->GetPrefix("/job/").Wait(...).value();
//   auto watch = (*etcd)->WatchPrefix("/job/", now.revision + 1,
//                                     {.on_events = …, .on_end = …});
//
// Contracts:
// - Every call is asynchronous (a Future), has a deadline (the options'
//   call_timeout, retries and failovers included) and reports errors as
//   absl::Status reading "etcd ENDPOINT: OPERATION KEY: reason", with etcd's
//   codes (NOT_FOUND for a missing lease, OUT_OF_RANGE for compacted
//   revisions, UNAVAILABLE when no endpoint answered, UNAUTHENTICATED for bad
//   credentials, CANCELLED once the client is stopping).
// - One endpoint is used at a time; when it fails the client moves to the
//   next. Reads are retried there at once; writes only when etcd surely did
//   not apply them (otherwise UNAVAILABLE: check and retry).
// - Futures' callbacks, watch events and lease loss run on gRPC or timer
//   threads, never under the client's locks.
// - Stop() (or destruction) ends every call, keep-alive and watch, bounded.
//   Keep-alive and watch handles may outlive the client; they do nothing
//   once it stopped.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CLIENT_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"
#include "rpc/membership/etcd/etcd_keepalive.h"
#include "rpc/membership/etcd/etcd_options.h"
#include "rpc/membership/etcd/etcd_types.h"
#include "rpc/membership/etcd/etcd_watch.h"

namespace ferry {

class EtcdConnection;

class EtcdClient {
 public:
  // Finds a healthy endpoint (one that answers and knows a leader; the
  // first in `endpoints` order among those that answer), then
  // authenticates if a user is set. Within options.connect_timeout:
  // UNAVAILABLE naming every endpoint and why it failed; UNAUTHENTICATED
  // for a wrong user or password; INVALID_ARGUMENT for bad options.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(
      EtcdOptions options);

  // Stop().
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // ---- KV ----
  // Reads are linearizable (they reflect every write acknowledged before).
  Future<EtcdRange> Get(std::string key);
  Future<EtcdRange> GetPrefix(std::string prefix);
  // Writes `key`, attached to `lease` (0: none). The store's new revision.
  Future<int64_t> Put(std::string key, std::string value, int64_t lease = 0);
  // How many keys were deleted.
  Future<int64_t> Delete(std::string key);
  Future<int64_t> DeletePrefix(std::string prefix);
  // INVALID_ARGUMENT for an empty key in the transaction.
  Future<EtcdTxnResult> Txn(EtcdTxn txn);
  // Drops the history before `revision` (watches from earlier revisions
  // end with OUT_OF_RANGE). Waits until it is applied.
  Future<Done> Compact(int64_t revision);

  // ---- Leases ----
  // A lease of `ttl`, rounded up to whole seconds (etcd's unit), at least 1
  // s; etcd may grant a longer one (its minimum is about 1.5 × its election
  // timeout), which the result says.
  Future<EtcdLease> GrantLease(absl::Duration ttl);
  // Ends the lease and deletes its keys. NOT_FOUND if it is already gone.
  Future<Done> RevokeLease(int64_t id);
  // The time the lease has left; NOT_FOUND if it expired or was revoked.
  Future<absl::Duration> LeaseTimeToLive(int64_t id);
  // Renews `lease` every TTL/3 until the handle is stopped or the lease is
  // lost (see etcd_keepalive.h).
  std::unique_ptr<EtcdKeepAlive> KeepAlive(const EtcdLease& lease,
                                           EtcdLeaseLostCallback on_lost);

  // ---- Watch ----
  // Every change to keys starting with `prefix`, from `start_revision`
  // (0: from now on), in order, across reconnections (see etcd_watch.h).
  std::unique_ptr<EtcdWatch> WatchPrefix(std::string prefix,
                                         int64_t start_revision,
                                         EtcdWatchCallbacks callbacks);

  // ---- Auth administration ----
  Future<Done> AddUser(std::string user, std::string password);
  Future<Done> AddRole(std::string role);
  Future<Done> GrantRole(std::string user, std::string role);
  // Lets `role` read and write every key starting with `prefix`.
  Future<Done> GrantPrefix(std::string role, std::string prefix);
  // Turns authentication on (needs user "root" with role "root").
  Future<Done> EnableAuth();
  Future<Done> DisableAuth();

  // ---- Cluster ----
  // The endpoint in use's view of itself.
  Future<EtcdMemberStatus> Status();
  // The endpoint calls go to now.
  std::string endpoint() const;
  const std::vector<std::string>& endpoints() const;

  // Ends every call (CANCELLED), keep-alive and watch, and waits for them,
  // bounded. Must not be called from the client's callbacks. Idempotent.
  void Stop();

 private:
  explicit EtcdClient(std::shared_ptr<EtcdConnection> connection);
  absl::Status FindHealthyEndpoint(absl::Time deadline);
  bool ProbeRound(absl::Time round_end, std::vector<std::string>* errors);
  Future<EtcdRange> Range(std::string key, bool prefix);
  Future<int64_t> DeleteRange(std::string key, bool prefix);
  // A call's deadline from now.
  absl::Time Deadline() const;

  const std::shared_ptr<EtcdConnection> connection_;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CLIENT_H_
