// A worker's collectives: the transport (Exchange + Mailbox), its process
// groups, and what keeps every collective bounded — the ops in flight, so
// a peer's death aborts those it takes part in, and the ops this worker
// joined, so a rank that times out can ask who never came.
#ifndef FERRY_COLLECTIVES_OP_COLLECTIVE_CONTEXT_H_
#define FERRY_COLLECTIVES_OP_COLLECTIVE_CONTEXT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "collectives/op/collective_host.h"
#include "collectives/op/process_group.h"
#include "collectives/op/vote_book.h"
#include "collectives/recorder/flight_dumps.h"
#include "collectives/recorder/flight_recorder.h"
#include "collectives/transport/config.h"
#include "collectives/transport/mailbox.h"
#include "collectives/transport/transport.h"
#include "proto/worker.pb.h"
#include "rpc/base/clock.h"
#include "rpc/base/timers.h"
#include "rpc/membership/store_client.h"

namespace ferry {

// What a running op tells status and stacks (op.h's Op is one).
class RunningOp {
 public:
  virtual ~RunningOp() = default;
  virtual const std::string& op_name() const = 0;  // "all_reduce"
  // The group ranks whose messages it waits for now.
  virtual std::vector<int> WaitingFor() const = 0;
};

class CollectiveContext final
    : public std::enable_shared_from_this<CollectiveContext> {
 public:
  // The collectives of the worker `host` stands for (a worker's:
  // collectives/host/agent_host.h's CollectivesForAgent). Then
  // RegisterFunctions, and NodeDown for every death the worker learns.
  static std::shared_ptr<CollectiveContext> Create(
      std::unique_ptr<CollectiveHost> host, CollectiveConfig config);
  CollectiveContext(std::unique_ptr<CollectiveHost> host,
                    CollectiveConfig config);
  ~CollectiveContext();

  // Registers the functions peers call here (which op a rank began, the
  // flight recorder) in host().registry().
  absl::Status RegisterFunctions();
  // Failed ops write their flight dumps with `dumps` (set once, before ops).
  void WriteDumpsWith(std::shared_ptr<FlightDumps> dumps) {
    dumps_ = std::move(dumps);
  }
  // Node `node` (rpc/membership's ids) died or left, for `reason`: the ops
  // it takes part in fail now, naming it.
  void NodeDown(uint64_t node, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  // All ranks of the job (after the worker started).
  ProcessGroup& world() ABSL_LOCKS_EXCLUDED(mu_);
  // A subgroup of the global ranks `ranks` (distinct, in group order).
  // INVALID_ARGUMENT for bad ranks; FAILED_PRECONDITION if this worker is
  // not among them.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(std::vector<int> ranks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The group of `ranks` named "g<ranks>#<n>" (op_key.h), counting nothing:
  // for groups every member names alike from an agreement (elastic.h's
  // Shrink and Grow), `pinned` and `origin` as ProcessGroup's. Errors as
  // NewGroup.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NamedGroup(
      std::vector<int> ranks, uint64_t n, bool pinned,
      std::vector<int> origin = {});
  // The group of a client's op on `ranks` (errors as NewGroup): named after
  // its ranks, not counted, as clients name their ops by tags anyway.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> ClientGroup(
      std::vector<int> ranks);

  // ---- For ops ----
  CollectiveHost& host() { return *host_; }
  CollectiveTransport& transport() { return *transport_; }
  Mailbox& mailbox() { return mailbox_; }
  const CollectiveConfig& config() const { return config_; }
  int rank() const { return host_->rank(); }
  // The membership epoch of a group of `members` (global ranks): the sum of
  // their generations in the directory (op_key.h).
  uint64_t Epoch(const std::vector<int>& members) const;
  // Each member's generation in the directory now.
  std::vector<uint64_t> Generations(const std::vector<int>& members) const;
  // Op `key` (members: global ranks) runs here from now until Ended. It
  // fails at once (UNAVAILABLE) if a member is gone, or if it is named
  // after an epoch already past (a member was replaced meanwhile). `op`
  // (optional) must stay valid until Ended: status reads what it waits for.
  void Began(const std::string& key, std::string label,
             std::vector<int> members, const RunningOp* op = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Ended(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // The ops and point-to-point ops of this worker (flight_recorder.h).
  FlightRecorder& recorder() { return recorder_; }
  // Flight record `id` ended with `status`; a failure writes a dump into
  // CollectiveConfig::dump_dir (if set).
  void OpEnded(uint64_t id, const absl::Status& status);
  // The flight recorder's dump now (flight_recorder.h's DumpValue).
  Value FlightDump(const std::string& reason) const;
  // The op this worker began under `key` ("" if none, or forgotten).
  std::string OpAt(const std::string& key) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether Stop was called (ops fail at once from then on).
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether this worker began op `key` (recently).
  bool Joined(const std::string& key) const ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Elastic groups (elastic.h) ----
  // The votes of this worker's agreements.
  VoteBook& votes() { return *votes_; }
  // The job's store, which decides each agreement once (opened at the
  // first use; the membership backend's, membership_backend.h).
  absl::StatusOr<KeyValueStore*> Arbiter() ABSL_LOCKS_EXCLUDED(mu_);
  // Group `group` (a group name, op_key.h) was revoked, `why` (ABORTED,
  // naming who and why), in membership epoch `epoch` (Epoch of its members
  // where the revoke was made): its running ops fail with it at once, and
  // every op of that epoch or an earlier one that begins later. A
  // replacement starts a new epoch, where the group works again
  // (elastic.h's Grow). False if it was revoked in this epoch already (the
  // first reason stays). At most kMaxRevoked groups are remembered.
  bool Revoke(const std::string& group, uint64_t epoch, absl::Status why)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Why group `group` was revoked last, if it was.
  std::optional<absl::Status> Revoked(const std::string& group) const
      ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr size_t kMaxRevoked = 4096;
  // Why op `key` must fail at once: its group was revoked in its epoch or
  // a later one.
  std::optional<absl::Status> RevokedFor(const std::string& key) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The membership epoch op `key` belongs to: the one its key names, else
  // its group's now; none if the key names no group.
  std::optional<uint64_t> OpEpoch(const std::string& key) const;

  // Drops what outlived --mailbox_ttl_ms: messages of ops that never
  // began here, and messages still arriving. Runs periodically by itself.
  void ExpireStale();

  // Ops fail at once from now on (UNAVAILABLE); the transport stops.
  void Stop();
  // This worker's groups and the ops they wait in, for `ferryctl status`.
  void FillStatus(proto::WorkerStatus* status) const;

 private:
  struct Running {
    std::string label;  // "all_reduce op 17"
    std::vector<int> members;
    const RunningOp* op = nullptr;
    absl::Time began;
  };
  // UNAVAILABLE: op `label`'s group rank `group_rank` (global rank `dead`)
  // died, for `reason`.
  absl::Status Died(const std::string& label, int group_rank, int dead,
                    const absl::Status& reason);
  // UNAVAILABLE: this worker is stopping.
  absl::Status Stopping() const;
  // This worker's index in `ranks`, after checking them.
  absl::StatusOr<int> IndexIn(const std::vector<int>& ranks) const;
  // Each group's oldest running op and whom it waits for, into `groups`.
  void FillWaits(
      const absl::flat_hash_map<std::string, proto::GroupProgress*>& groups,
      proto::WorkerStatus* status) const ABSL_LOCKS_EXCLUDED(mu_);
  // Runs ExpireStale every so often until Stop.
  void ScheduleSweep() ABSL_LOCKS_EXCLUDED(mu_);

  const std::unique_ptr<CollectiveHost> host_;
  const CollectiveConfig config_;
  Clock* const clock_;
  Mailbox mailbox_;
  std::unique_ptr<CollectiveTransport> transport_;
  FlightRecorder recorder_;
  std::shared_ptr<FlightDumps> dumps_;  // Null without a dump_dir.

  mutable absl::Mutex mu_;
  std::shared_ptr<ProcessGroup> world_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> groups_made_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Running> running_ ABSL_GUARDED_BY(mu_);
  // Ops begun here (recently): key → op name.
  absl::flat_hash_map<std::string, std::string> joined_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<VoteBook> votes_;
  std::unique_ptr<KeyValueStore> arbiter_ ABSL_GUARDED_BY(mu_);
  struct Revocation {
    uint64_t epoch = 0;
    absl::Status why;
  };
  // Revoked groups; the order they came in, to forget the oldest.
  absl::flat_hash_map<std::string, Revocation> revoked_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> revoked_order_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> joined_order_ ABSL_GUARDED_BY(mu_);
  Timers::TimerId sweep_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_COLLECTIVE_CONTEXT_H_
