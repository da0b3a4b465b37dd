// Membership kept in etcd (see etcd_job_keys.h for the keys): no process
// is special, so the job outlives any one of them.
// - A worker's liveness is an etcd lease whose TTL is the heartbeat
//   timeout, renewed on the node's timers; when it is lost (etcd
//   unreachable longer than the TTL, or the lease expired) the worker is
//   fenced.
// - A rank is taken by a transaction (the key must be absent), so a rank
//   held by a live process cannot be taken: ALREADY_EXISTS naming it.
//   Rank -1 takes the first free one; ReserveRank takes it before the
//   worker serves (Join publishes the address later).
// - The same transaction records the holder in the rank's history (no
//   lease), numbering its incarnations (WorkerInfo.generation): a
//   replacement of a dead rank is the next generation, on every node.
// - Once the job formed, a joiner waits for nobody (a replacement), and
//   the ranks nobody serves then are dead: Follow publishes them, and the
//   directory names them after their latest holder.
// - Membership is followed by one watch on the job's prefix: a rank or
//   client key deleted is that node's death (or departure, if its record
//   said it was leaving).
// - Clients read the ranks the same way and register under their own lease.
// - Identities: each node publishes the public key of its key pair
//   (rpc/auth/node_key.h) in its record (RankRecord.worker, ClientRecord); the
//   directory carries the workers', Follow reports the clients' (the first
//   key seen for a client node; a later different one is ignored, so a
//   rewritten record cannot take over a client's identity).
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_BACKEND_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_BACKEND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/membership/etcd/etcd_client.h"
#include "rpc/membership/etcd_job_keys.h"
#include "rpc/membership/membership_backend.h"

namespace ferry {

struct EtcdBackendOptions {
  // Endpoints, TLS, user; timers and clock (the node's).
  EtcdOptions etcd;
  std::string job;  // IsValidJobName.
  // The lease's TTL: how long a silent node stays alive (etcd rounds it
  // up to whole seconds).
  absl::Duration ttl = absl::Seconds(30);
};

class EtcdBackend final : public MembershipBackend {
 public:
  // Connects to etcd within options.etcd.connect_timeout: UNAVAILABLE
  // naming every endpoint; INVALID_ARGUMENT for bad options or job name.
  static absl::StatusOr<std::unique_ptr<EtcdBackend>> Connect(
      EtcdBackendOptions options);
  ~EtcdBackend() override;

  absl::StatusOr<Directory> Join(const JoinSpec& spec,
                                 absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<int> ReserveRank(const JoinSpec& spec,
                                  absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ClientRegistration> RegisterClient(
      const std::string& description, const std::string& public_key,
      absl::Duration timeout) override ABSL_LOCKS_EXCLUDED(mu_);
  void Follow(Membership* membership, FollowCallbacks callbacks) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Barrier(const std::string& name, absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Leave(absl::Duration timeout) override ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);

  // The job's store in etcd (store_client.h's ConnectEtcdStore).
  absl::StatusOr<std::unique_ptr<KeyValueStore>> OpenStore() override;
  std::optional<absl::Time> lease_expires_at() const override
      ABSL_LOCKS_EXCLUDED(mu_);
  bool rank0_is_master() const override { return false; }
  bool rank_is_assignable() const override { return true; }
  std::string description() const override;

  // The lease keeping this node alive (0 before Join/RegisterClient).
  int64_t lease_id() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // What this backend knows of a rank's holder.
  struct Holder {
    uint64_t incarnation = 0;
    std::string name;
    bool leaving = false;
    bool serving = false;  // Not a reservation.
  };
  static Holder HolderOf(const proto::RankRecord& record);

  EtcdBackend(EtcdBackendOptions options, std::unique_ptr<EtcdClient> etcd);

  absl::Time Now() const;
  absl::Duration Left(absl::Time deadline) const;
  template <typename T>
  absl::StatusOr<T> Await(const Future<T>& f, absl::Time deadline) const;
  // For calls that may safely be made twice: makes them again while etcd
  // answers UNAVAILABLE or DEADLINE_EXCEEDED (each try has etcd's own call
  // timeout, shorter than a leader election on a loaded host can be),
  // until `deadline`.
  template <typename T>
  absl::StatusOr<T> AwaitRepeating(const std::function<Future<T>()>& call,
                                   absl::Time deadline) const;

  // Grants the lease and starts renewing it.
  absl::Status StartLease(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Revokes the lease (best effort) after a failed join or on leave.
  void EndLease(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<JobSnapshot> Read(absl::Time deadline) const;
  // Waits until a key under the job changed after `revision`; false at
  // the deadline.
  bool WaitForChange(int64_t revision, absl::Time deadline) const;
  // Takes spec.self.rank, or the first free rank if it is -1. A named rank
  // that is held is waited for until its holder's lease could have
  // expired (a TTL), then ALREADY_EXISTS naming the holder.
  absl::StatusOr<int> TakeRank(const JoinSpec& spec, absl::Time deadline);
  // One try of TakeRank: the rank taken, or nullopt if every wanted one is
  // held (`revision`: the job's as read).
  absl::StatusOr<std::optional<int>> TakeRankOnce(const JoinSpec& spec,
                                                  absl::Time deadline,
                                                  int64_t* revision);
  // INVALID_ARGUMENT if a formed job's rank spec.self.rank was held under
  // another name (names are fixed when the job forms).
  absl::Status CheckName(const JoinSpec& spec,
                         const JobSnapshot& snapshot) const;
  // The record a joiner takes `rank` with, numbered after its history.
  proto::RankRecord RecordFor(const JoinSpec& spec, int rank,
                              const JobSnapshot& snapshot) const;
  enum class Take { kTaken, kHeld, kRaced };
  // Takes `rank` if it is free and its history is still at `history_rev`
  // (0: none): kHeld if someone holds it, kRaced if its history moved.
  absl::StatusOr<Take> TryTake(int rank, const proto::RankRecord& record,
                               int64_t history_rev, absl::Time deadline);
  // Publishes the address of a rank this node reserved.
  absl::Status Publish(const JoinSpec& spec, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Marks this node's record formed (after it saw the job formed).
  void MarkFormed(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // The ranks nobody serves in a formed job, as gone (for Follow).
  void RememberGone(const JobSnapshot& snapshot, int world_size)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Numbers this client and publishes its record (its public key) under
  // the lease.
  absl::StatusOr<uint64_t> PublishClient(const std::string& description,
                                         const std::string& public_key,
                                         absl::Time deadline);
  absl::Status RankTaken(int rank, absl::Time deadline) const;
  // Until every rank of the job is held; world_size 0: learnt from the
  // holders.
  absl::StatusOr<JobSnapshot> WaitFormed(int world_size, absl::Time deadline,
                                         absl::Duration timeout) const;
  void Remember(const JobSnapshot& snapshot) ABSL_LOCKS_EXCLUDED(mu_);

  // What one event means for the others, in order.
  struct Change {
    uint64_t node = 0;
    std::optional<absl::Status> gone;    // It died or left, and why.
    std::optional<WorkerInfo> rejoined;  // A new incarnation holds it.
    uint64_t incarnation = 0;
    std::string public_key;  // A client's key, to admit.
  };
  void OnEvents(std::vector<EtcdEvent> events) ABSL_LOCKS_EXCLUDED(mu_);
  void Apply(const EtcdEvent& e, std::vector<Change>* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyRankPut(int rank, const EtcdKeyValue& kv,
                    std::vector<Change>* changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status GoneStatus(const Holder& holder) const;
  void OnWatchEnd(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  void Fence(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);

  const EtcdBackendOptions options_;
  const EtcdJobKeys keys_;
  const std::unique_ptr<EtcdClient> etcd_;

  mutable absl::Mutex mu_;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<EtcdKeepAlive> keepalive_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<EtcdWatch> watch_ ABSL_GUARDED_BY(mu_);
  // Watches that ended (replaced after a resync), stopped by Stop().
  std::vector<std::unique_ptr<EtcdWatch>> retired_ ABSL_GUARDED_BY(mu_);
  int self_rank_ ABSL_GUARDED_BY(mu_) = -1;     // -1: a client.
  bool reserved_ ABSL_GUARDED_BY(mu_) = false;  // By ReserveRank, unpublished.
  // The workers a formed job's snapshot had nobody serving, for Follow.
  std::vector<std::pair<uint64_t, absl::Status>> gone_ ABSL_GUARDED_BY(mu_);
  uint64_t self_node_ ABSL_GUARDED_BY(mu_) = 0;
  proto::RankRecord self_record_ ABSL_GUARDED_BY(mu_);
  int world_size_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;  // Of the last snapshot.
  std::map<int, Holder> holders_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, bool> clients_ ABSL_GUARDED_BY(mu_);  // → leaving.
  // Clients' keys read at Join, reported when Follow starts.
  std::map<uint64_t, std::string> client_keys_ ABSL_GUARDED_BY(mu_);
  // This client's public key (its record says it again when it leaves).
  std::string self_key_ ABSL_GUARDED_BY(mu_);
  Membership* membership_ ABSL_GUARDED_BY(mu_) = nullptr;
  FollowCallbacks callbacks_ ABSL_GUARDED_BY(mu_);
  // Set once the lease was lost before Follow gave a callback.
  std::optional<absl::Status> fenced_ ABSL_GUARDED_BY(mu_);
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_BACKEND_H_
