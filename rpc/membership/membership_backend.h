// Where a job's membership is kept: who holds which rank at which address,
// who is alive, who died or left. Workers and clients reach it only through
// this interface; two implementations exist:
// - the embedded master (embedded_backend.h): rank 0 hosts the rendezvous,
//   the others join and long-poll it; the master's death ends the job;
// - etcd (etcd_backend.h): ranks are keys under leases, membership is a
//   watch; no rank is special.
//
//   std::unique_ptr<MembershipBackend> backend = …;
//   FERRY_ASSIGN_OR_RETURN(Directory dir, backend->Join(me, timeout));
//   backend->Follow(&membership, [](const absl::Status& why) { … fenced … });
//   …
//   backend->Leave(absl::Seconds(2));   // or Stop() alone for a crash-like end
#ifndef FERRY_RPC_MEMBERSHIP_MEMBERSHIP_BACKEND_H_
#define FERRY_RPC_MEMBERSHIP_MEMBERSHIP_BACKEND_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "rpc/auth/node_key.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership.h"
#include "rpc/membership/store_client.h"

namespace ferry {

// A worker joining: who it is, what it expects of the job.
struct JoinSpec {
  // name, address, local_address, host, pid, public_key (its key pair's,
  // rpc/auth/node_key.h: published for peers); rank: the rank wanted, or -1
  // for the first free one (only backends with rank_is_assignable()).
  WorkerInfo self;
  int world_size = 1;
  // Distinguishes this process from earlier holders of the same rank.
  uint64_t incarnation = 0;
};

// A client registered: its node id and the job's workers.
struct ClientRegistration {
  uint64_t node = 0;
  Directory directory;
  // No membership is kept for this client (it learns of deaths only by
  // failed calls): Follow() must not be called.
  bool read_only = false;
  // What the node that registered it vouches for it to each worker, until
  // that worker heard of it (the embedded master, a worker for its
  // read-only clients; none on etcd, whose workers read client records).
  std::vector<Voucher> vouchers;
};

class MembershipBackend {
 public:
  // Called once when this node is declared dead by the others (fenced):
  // the job goes on without it.
  using FencedCallback = std::function<void(const absl::Status&)>;
  // Called when a new incarnation took the rank of a worker that died or
  // left (a replacement): `worker` is its entry (address). The rank is
  // revived in the Membership right after.
  using RejoinedCallback =
      std::function<void(const WorkerInfo& worker, uint64_t incarnation)>;
  // Called with the public key of a client (rpc/auth/node_key.h): one live
  // when this node joined, or one that registered since (the embedded
  // master's announcements, etcd's client records; a client's first key
  // only). Calls whose credential it checks are that client's. Workers'
  // keys come in the directory and in `on_rejoined`'s entry.
  using ClientCallback =
      std::function<void(uint64_t node, const std::string& public_key)>;
  // Called (the embedded master) with one past the last client id the
  // master had issued when this node joined: the clients below it not
  // given to on_client left.
  using ClientsEndCallback = std::function<void(uint64_t end)>;
  struct FollowCallbacks {
    FencedCallback on_fenced;
    RejoinedCallback on_rejoined;       // May be empty.
    ClientCallback on_client;           // May be empty.
    ClientsEndCallback on_clients_end;  // May be empty.
  };

  virtual ~MembershipBackend() = default;

  // Takes the rank, publishes the address, and waits until all
  // world_size workers joined; returns the directory (the joiner's rank is
  // decided there when it asked for -1). Once the job formed, a joiner for
  // a rank whose holder died or left is a replacement: it waits for
  // nobody, and the workers gone then are published by Follow. Within
  // `timeout`:
  // DEADLINE_EXCEEDED naming the missing ranks or the unreachable store;
  // ALREADY_EXISTS naming the rank when a live worker holds it;
  // INVALID_ARGUMENT for a world_size or rank clash.
  virtual absl::StatusOr<Directory> Join(const JoinSpec& spec,
                                         absl::Duration timeout) = 0;

  // Takes the first free rank for a worker that is not serving yet, so it
  // can be built for that rank (spec.self: its rank -1, no address); its
  // Join with that rank then publishes its address. Only where
  // rank_is_assignable(), else INVALID_ARGUMENT. ALREADY_EXISTS when every
  // rank is held; DEADLINE_EXCEEDED naming the unreachable store.
  virtual absl::StatusOr<int> ReserveRank(const JoinSpec& spec,
                                          absl::Duration timeout) {
    (void)spec;
    (void)timeout;
    return absl::InvalidArgumentError(
        absl::StrCat(description(), " cannot pick a rank: set --rank"));
  }

  // Registers a client (no rank) holding `public_key` (its key pair's)
  // once the job is formed, within `timeout`.
  virtual absl::StatusOr<ClientRegistration> RegisterClient(
      const std::string& description, const std::string& public_key,
      absl::Duration timeout) = 0;

  // After Join or RegisterClient: keeps this node alive and publishes every
  // other node's death or departure to `membership` (once each; first the
  // workers already gone when this node joined), replacements' arrival
  // (on_rejoined, then Membership::Revive) and clients' keys (first those
  // live when it joined), until Stop(). Callbacks run on a backend thread,
  // never under its locks.
  virtual void Follow(Membership* membership, FollowCallbacks callbacks) = 0;

  // Waits until every live worker reached barrier `name`.
  virtual absl::Status Barrier(const std::string& name,
                               absl::Duration timeout) = 0;

  // Tells the others this node leaves (peers see "left", not "died"),
  // then Stop()s.
  virtual absl::Status Leave(absl::Duration timeout) = 0;

  // The job's key-value store (store_client.h): the master's, or etcd's.
  // Where something must be decided once for the whole job, whoever asks
  // (collectives/elastic/elastic.cc: its CompareSet picks one proposal), this
  // is the arbiter. INVALID_ARGUMENT where the backend keeps none.
  virtual absl::StatusOr<std::unique_ptr<KeyValueStore>> OpenStore() {
    return absl::InvalidArgumentError(
        absl::StrCat(description(), " keeps no store"));
  }

  // When this node's lease expires unless renewed again, on the node's
  // clock, where the backend keeps one (etcd's), while it is kept alive;
  // nullopt elsewhere. For status (proto::WorkerStatus.membership_lease_ms).
  virtual std::optional<absl::Time> lease_expires_at() const {
    return std::nullopt;
  }

  // Stops keeping this node alive and following; bounded; idempotent.
  // After it returns no callback runs.
  virtual void Stop() = 0;

  // Whether rank 0 hosts the membership itself, so that its death ends the
  // job for everyone (the embedded master).
  virtual bool rank0_is_master() const = 0;
  // Whether Join accepts rank -1 (first free rank).
  virtual bool rank_is_assignable() const = 0;
  // Where the membership is kept, for messages and logs.
  virtual std::string description() const = 0;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_MEMBERSHIP_BACKEND_H_
