// Keeps one etcd lease alive on its own: a LeaseKeepAlive stream that
// renews the lease every TTL/3 and is reopened (on the next endpoint)
// whenever it breaks, until the lease is lost or Stop() is called.
//
// Lease loss is reported once through `on_lost`:
// - NOT_FOUND: etcd says the lease no longer exists (it expired, or someone
//   revoked it);
// - DEADLINE_EXCEEDED: no renewal got through before the lease's TTL ran
//   out on the client's clock (counted from when the last answered renewal
//   was sent, so etcd's own expiry is never earlier). The lease must then be
//   taken as lost, even if etcd has not yet acted on it.
// After a loss nothing is renewed any more.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_KEEPALIVE_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_KEEPALIVE_H_

#include <cstdint>
#include <memory>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rpc/membership/etcd/etcd_types.h"

namespace ferry {

class EtcdConnection;
class LeaseKeeper;

// Runs at most once, on a gRPC or timer thread, never under the client's
// locks. Keep it short; it may call Stop() on its own handle.
using EtcdLeaseLostCallback = absl::AnyInvocable<void(const absl::Status&) &&>;

class EtcdKeepAlive {
 public:
  // Starts renewing `lease` at once. If the client is stopping, nothing is
  // renewed and `on_lost` is never called.
  static std::unique_ptr<EtcdKeepAlive> Start(
      std::shared_ptr<EtcdConnection> connection, EtcdLease lease,
      EtcdLeaseLostCallback on_lost);

  // Stop().
  ~EtcdKeepAlive();
  EtcdKeepAlive(const EtcdKeepAlive&) = delete;
  EtcdKeepAlive& operator=(const EtcdKeepAlive&) = delete;

  // Ends the renewals (the lease is left to expire by its TTL: revoke it to
  // end it at once) and waits, bounded, for a running `on_lost` on another
  // thread. Once it returns, `on_lost` is never called. Idempotent.
  void Stop();

  int64_t lease_id() const { return lease_id_; }
  // The earliest time, on the client's clock, at which the lease may
  // expire unless renewed again.
  absl::Time expires_at() const;
  // Whether the loss was reported.
  bool lost() const;

 private:
  EtcdKeepAlive(int64_t lease_id, std::shared_ptr<LeaseKeeper> keeper);

  const int64_t lease_id_;
  const std::shared_ptr<LeaseKeeper> keeper_;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_KEEPALIVE_H_
