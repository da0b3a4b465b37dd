// A worker's collectives: the transport (Exchange + Mailbox), its process
// groups, and what keeps every collective bounded — the ops in flight, so
// a peer's death aborts those it takes part in, and the ops this worker
// joined, so a rank that times out can ask who never came.
#ifndef FERRY_COLLECTIVES_COLLECTIVE_CONTEXT_H_
#define FERRY_COLLECTIVES_COLLECTIVE_CONTEXT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "collectives/config.h"
#include "collectives/exchange.h"
#include "collectives/mailbox.h"
#include "collectives/process_group.h"
#include "rpc/agent.h"
#include "rpc/base/clock.h"
#include "rpc/base/timers.h"

namespace ferry {

class CollectiveContext final
    : public AgentExtension,
      public std::enable_shared_from_this<CollectiveContext> {
 public:
  // Plugs into `agent` (before its Start).
  static std::shared_ptr<CollectiveContext> ForWorker(RpcAgent* agent,
                                                      CollectiveConfig config);
  CollectiveContext(RpcAgent* agent, CollectiveConfig config);
  ~CollectiveContext() override;

  // All ranks of the job (after the worker started).
  ProcessGroup& world() ABSL_LOCKS_EXCLUDED(mu_);
  // A subgroup of the global ranks `ranks` (distinct, in group order).
  // INVALID_ARGUMENT for bad ranks; FAILED_PRECONDITION if this worker is
  // not among them.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> NewGroup(std::vector<int> ranks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The group of a client's op on `ranks` (errors as NewGroup): named after
  // its ranks, not counted, as clients name their ops by tags anyway.
  absl::StatusOr<std::shared_ptr<ProcessGroup>> ClientGroup(
      std::vector<int> ranks);

  // ---- For ops ----
  RpcAgent& agent() { return *agent_; }
  Exchange& exchange() { return *exchange_; }
  Mailbox& mailbox() { return mailbox_; }
  const CollectiveConfig& config() const { return config_; }
  int rank() const { return agent_->rank(); }
  // The membership epoch of a group of `members` (global ranks): the sum of
  // their generations in the directory (op_key.h).
  uint64_t Epoch(const std::vector<int>& members) const;
  // Op `key` (members: global ranks) runs here from now until Ended. It
  // fails at once (UNAVAILABLE) if a member is gone, or if it is named
  // after an epoch already past (a member was replaced meanwhile).
  void Began(const std::string& key, std::string label,
             std::vector<int> members) ABSL_LOCKS_EXCLUDED(mu_);
  void Ended(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether Stop was called (ops fail at once from then on).
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether this worker began op `key` (recently).
  bool Joined(const std::string& key) const ABSL_LOCKS_EXCLUDED(mu_);

  // Drops what outlived --mailbox_ttl_ms: messages of ops that never
  // began here, and messages still arriving. Runs periodically by itself.
  void ExpireStale();

  // ---- AgentExtension ----
  void Stop() override;
  void FillStatus(proto::WorkerStatus* status) const override;

 private:
  struct Running {
    std::string label;  // "all_reduce op 17"
    std::vector<int> members;
  };
  void OnNodeDown(uint64_t node, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  // UNAVAILABLE: op `label`'s group rank `group_rank` (global rank `dead`)
  // died, for `reason`.
  absl::Status Died(const std::string& label, int group_rank, int dead,
                    const absl::Status& reason);
  // UNAVAILABLE: this worker is stopping.
  absl::Status Stopping() const;
  // This worker's index in `ranks`, after checking them.
  absl::StatusOr<int> IndexIn(const std::vector<int>& ranks) const;
  // Runs ExpireStale every so often until Stop.
  void ScheduleSweep() ABSL_LOCKS_EXCLUDED(mu_);

  RpcAgent* const agent_;
  const CollectiveConfig config_;
  Clock* const clock_;
  Mailbox mailbox_;
  std::unique_ptr<Exchange> exchange_;

  mutable absl::Mutex mu_;
  std::shared_ptr<ProcessGroup> world_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> groups_made_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Running> running_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> joined_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::string> joined_order_ ABSL_GUARDED_BY(mu_);
  Timers::TimerId sweep_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_COLLECTIVE_CONTEXT_H_
