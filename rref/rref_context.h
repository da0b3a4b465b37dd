// A node's RRef context: everything about remote references on one worker
// or client.
//
// As a user it holds copies (forks): it creates RRefs with remote(), sends
// and receives them inside call values (its CodecFactory), releases copies
// when their last Value goes, and renews its lease with every owner it
// holds copies on. On a worker it is also an owner: the owner table, the
// RRefs service, the remote() handler, and the built-ins to_here and
// ferry.rref_call.
//
// Time: leases renew every lease/4 and the owner table is swept every
// lease/8 on the node's timers, against their clock (deadlines, leases).
//
// The fork protocol's orderings (docs/DESIGN.md "RRefs"):
//   - G2: a copy sent to a third node pins its parent until the owner
//     acknowledged the child's AddFork, so the parent's delete cannot
//     overtake it;
//   - forks registered for a call stay "in transit" until the call ends,
//     and every renewal vouches for them, so they live as long as the call;
//   - renewals go out in bounded chunks (rref/lease_chunks.h), numbered by
//     round, and each confirm names the first round that will list its
//     fork, so owners can reconcile (rref/owner_table.h).
#ifndef FERRY_RREF_RREF_CONTEXT_H_
#define FERRY_RREF_RREF_CONTEXT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "rpc/agent.h"
#include "rpc/auth/authenticator.h"
#include "rpc/base/limits.h"
#include "rpc/client.h"
#include "rpc/value/rref_base.h"
#include "rpc/wire/bounded_service.h"
#include "rref/lease_chunks.h"
#include "rref/owner_requests.h"
#include "rref/owner_table.h"
#include "rref/rref.h"
#include "rref/rref_state.h"

namespace ferry {

struct RRefOptions {
  // How long an owner keeps the copies of a silent holder (--rref_lease_ms).
  absl::Duration lease = absl::Seconds(10);
  // Most live copies this node holds, and holders may have on an owner.
  int64_t max_live_rrefs = 1 << 20;
  // Most forks one lease renewal message lists (rref/lease_chunks.h).
  int lease_chunk_handles = kLeaseChunkHandles;
};

class RRefService;

class RRefContext final : public RRefCore,
                          public CodecFactory,
                          public RemoteHandler,
                          public AgentExtension,
                          public std::enable_shared_from_this<RRefContext> {
 public:
  // A worker's context, plugged into `agent` (before its Start).
  static std::shared_ptr<RRefContext> ForWorker(RpcAgent* agent,
                                                RRefOptions options);
  // A client's context (after Connect).
  static std::shared_ptr<RRefContext> ForClient(RpcClient* client,
                                                RRefOptions options);
  ~RRefContext() override;

  // remote(): runs `fn(args…, kwargs…)` on `to`, which keeps the result as
  // the owner; returns at once. The creation's errors (including the
  // timeout) surface on the RRef's ToHere.
  absl::StatusOr<RRef> Remote(
      const std::string& to, const std::string& fn, std::vector<Value> args,
      std::optional<absl::Duration> timeout = std::nullopt,
      Value::Map kwargs = {});
  // An owner RRef of a local value (workers only).
  absl::StatusOr<RRef> Wrap(Value value);

  // A worker's owner table, for introspection.
  Future<std::vector<proto::OwnedRRef>> ListOwned(int worker,
                                                  absl::Duration timeout);

  OwnerStats owner_stats() const;
  int64_t live_user_rrefs() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t pending_messages() const;

  // ---- RRefCore ----
  void Released(const RRefDescriptor& descriptor) override;
  bool IsOwner(const RRefState& rref) const override;
  Future<Value> ToHere(const std::shared_ptr<const RRefState>& rref,
                       std::optional<absl::Duration> timeout) override;
  absl::StatusOr<Value> LocalValue(const RRefState& rref) override;
  Future<Value> CallOnOwner(const std::shared_ptr<const RRefState>& rref,
                            const std::string& fn, std::vector<Value> args,
                            std::optional<absl::Duration> timeout) override;
  absl::StatusOr<Value> RemoteOnOwner(
      const std::shared_ptr<const RRefState>& rref, const std::string& fn,
      std::vector<Value> args, std::optional<absl::Duration> timeout) override;

  // ---- CodecFactory ----
  std::unique_ptr<RRefCodec> ForPeer(uint64_t peer) override;

  // ---- RemoteHandler ----
  absl::Status Begin(const proto::RRefHandle& rref, uint64_t caller) override;
  absl::Status Finish(const proto::RRefHandle& rref,
                      absl::StatusOr<Value> result) override;
  void Abandon(const proto::RRefHandle& rref) override;

  // ---- AgentExtension ----
  absl::Status Drain(absl::Time deadline) override;
  void Stop() override;
  void FillStatus(proto::WorkerStatus* status) const override;

  // ---- For the codec and the service ----
  struct Host {
    uint64_t node = 0;
    int rank = -1;  // -1 for a client.
    std::string name;
    const Directory* directory = nullptr;
    ChannelPool* channels = nullptr;
    Membership* membership = nullptr;
    Timers* timers = nullptr;
    CallSender* caller = nullptr;  // Workers: the agent's Caller.
    Registry* registry = nullptr;  // Workers only.
    absl::Duration default_timeout = absl::Seconds(60);
    std::function<void(absl::string_view, absl::string_view)> log;
    // Owners only, optional: who each request is (its credential), so the
    // service can hold it to the rules of rref_service.h.
    const Authenticator* authenticator = nullptr;
    // Owners: what one request may make the service build (--max_items …),
    // and the bytes of values each creator may keep here
    // (--max_rref_mb_per_peer, --max_rref_mb).
    Limits limits;
    // Where requests to owners go; null: an OwnerClient over `channels`
    // (tests pass tests/testing/fake_owners.h's).
    std::shared_ptr<OwnerRequests> owners;
  };
  RRefContext(Host host, RRefOptions options);

  // The pieces ForWorker and ForClient are made of, for a node without an agent
  // or client (tests step them on manual timers): an owner's context (owner
  // table and service(), which the caller serves) and a user-only one.
  // `host` needs no caller unless Remote() is used, no registry.
  static std::shared_ptr<RRefContext> ForOwner(Host host, RRefOptions options);
  static std::shared_ptr<RRefContext> ForUser(Host host, RRefOptions options);
  // The RRefs gRPC service of an owner's context; null on a user's.
  grpc::Service* service();
  BoundedServiceBase* bounded_service();

  GlobalId NewId() { return GlobalId{host_.node, ++counter_}; }
  Clock* clock() const { return host_.timers->clock(); }
  const Host& host() const { return host_; }
  OwnerTable* owner_table() { return owner_table_.get(); }  // Null on clients.
  OwnerRequests& owners() { return *owners_; }
  bool owns(int rank) const { return host_.rank >= 0 && rank == host_.rank; }
  // UNAVAILABLE "owner <name> died (…)" if `rref`'s owner died or left, or
  // a new incarnation holds its rank now (which never has the value).
  std::optional<absl::Status> OwnerGone(const RRefState& rref) const;
  absl::Duration Timeout(std::optional<absl::Duration> t) const;
  std::string NodeName(uint64_t node) const;
  // Bounds every number a peer's handle carries before anything uses it:
  // the owner a worker of this job (rank in range, its name matching), the
  // creators' nodes either workers of this job or clients.
  // INVALID_ARGUMENT naming the rref and the field otherwise.
  absl::Status CheckHandle(const proto::RRefHandle& handle) const;
  // A state for a copy received or created here (counted against the limit
  // if this node is not its owner).
  absl::StatusOr<std::shared_ptr<const RRefState>> Adopt(
      RRefDescriptor descriptor, Future<Done> created) ABSL_LOCKS_EXCLUDED(mu_);
  // The first lease round that will list a copy adopted before this call.
  uint64_t NextLeaseRound() const ABSL_LOCKS_EXCLUDED(mu_);
  // A fork this node registered for `rref` (owned by rank `owner`) travels
  // in a call; renewals vouch for it until EndTransit.
  void BeginTransit(GlobalId rref, GlobalId fork, int owner)
      ABSL_LOCKS_EXCLUDED(mu_);
  void EndTransit(GlobalId fork) ABSL_LOCKS_EXCLUDED(mu_);

  // Tests: every AddFork, ConfirmFork, DeleteFork (a proto::ForkRequest)
  // and RenewLease (a proto::LeaseRequest) this owner receives goes through
  // `hook`, which runs `proceed` (now, later, or after another message) to
  // apply and answer it. Called outside any lock.
  using OwnerHook = std::function<void(absl::string_view method,
                                       const google::protobuf::Message& request,
                                       absl::AnyInvocable<void() &&> proceed)>;
  void SetOwnerHookForTesting(OwnerHook hook) ABSL_LOCKS_EXCLUDED(mu_);
  OwnerHook owner_hook() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Attach();  // Timers, membership listener.
  // What one renewal round tells one owner.
  struct OwnerListing {
    std::vector<LeaseFork> held;        // Copies held here.
    std::vector<LeaseFork> in_transit;  // Forks in calls still in flight.
    uint64_t epoch = 0;                 // The owner's, as last answered.
  };
  struct LeaseSnapshot {
    uint64_t round = 0;  // 0: stopped, nothing to send.
    absl::flat_hash_map<int, OwnerListing> by_owner;
    std::vector<LeaseFork> own_sends;  // In transit, owned here.
  };
  LeaseSnapshot SnapshotLeases() ABSL_LOCKS_EXCLUDED(mu_);
  void SendRenewal(int owner, uint64_t round, const OwnerListing& listing);
  void RenewLeases() ABSL_LOCKS_EXCLUDED(mu_);
  void LearnEpoch(int owner, uint64_t epoch) ABSL_LOCKS_EXCLUDED(mu_);
  // Every lease/4 of the shortest lease known (ours or an owner's).
  absl::Duration RenewPeriod() const;
  void LearnLease(absl::Duration lease);
  void SweepOwned();
  void OnNodeDown(uint64_t node);
  // Worker `owner` died: drops what this node kept for its values.
  void ForgetOwner(int owner) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RegisterBuiltins(Registry* registry);
  // ferry.rref_call: fn(value, args…) on this owner.
  Future<Value> InvokeOnValue(const CallContext& ctx, std::vector<Value> args);

  const Host host_;
  const RRefOptions options_;
  // Local ids: from a random start (rref_context.cc says why).
  std::atomic<uint64_t> counter_;
  std::atomic<int64_t> learned_lease_ms_{0};  // Shortest owner lease seen.
  std::unique_ptr<OwnerTable> owner_table_;
  std::shared_ptr<OwnerRequests> owners_;
  std::unique_ptr<RRefService> service_;

  mutable absl::Mutex mu_;
  struct Held {
    GlobalId rref;
    int owner = -1;
  };
  // Live copies held here whose owner is another node, by fork id.
  absl::flat_hash_map<GlobalId, Held> held_ ABSL_GUARDED_BY(mu_);
  // Forks this node registered for calls still in flight, by fork id.
  absl::flat_hash_map<GlobalId, Held> in_transit_ ABSL_GUARDED_BY(mu_);
  // Renewal rounds sent so far; the last epoch each owner answered.
  uint64_t lease_round_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<int, uint64_t> owner_epoch_ ABSL_GUARDED_BY(mu_);
  OwnerHook owner_hook_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  Timers::TimerId lease_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId sweep_timer_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_RREF_RREF_CONTEXT_H_
