// A node's side of rendezvous and membership: join (or register as a
// client), then keep one long poll open at the master. The poll is the
// heartbeat and brings news of nodes that died or left, which is published
// to a Membership so pending work on those nodes fails at once, and of
// replacements (a new incarnation took a gone worker's rank), which are
// handed to a callback and then revived in the Membership. When no
// poll succeeded for master_timeout, the master itself is published as
// dead (node 0, UNAVAILABLE naming worker0) — at once if its host says its
// process is gone (MembershipOptions::master_address).
//
// Give it a channel of its own (ChannelPool::ForMembership), so heartbeats
// never queue behind data-plane calls to the master.
#ifndef FERRY_RPC_MEMBERSHIP_MEMBERSHIP_CLIENT_H_
#define FERRY_RPC_MEMBERSHIP_MEMBERSHIP_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "proto/rendezvous.grpc.pb.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/timers.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/listener_probe.h"
#include "rpc/membership/membership.h"

namespace ferry {

struct MembershipOptions {
  // How long the master may hold a poll (also the heartbeat period).
  absl::Duration poll_hold = absl::Milliseconds(1000);
  // Without a successful poll for this long, the master (worker0) is
  // declared dead: a failed or cancelled poll alone is only a suspicion,
  // retried. Workers set it to --heartbeat_timeout_ms; the master's own
  // client uses InfiniteDuration() (it does not watch itself).
  absl::Duration master_timeout = absl::Seconds(30);
  // Where the master serves ("ip:port"): once a poll fails, its host is
  // asked whether the master's process is gone (listener_probe.h), and a
  // refusal declares it dead at once, naming how that is known. Empty (the
  // master's own client): only master_timeout decides.
  std::string master_address;
};

// What a worker learns when the job forms (nothing secret).
struct JoinedJob {
  std::vector<WorkerInfo> workers;  // Indexed by rank.
  // A replacement's: the workers gone now (node, why), and the first
  // event its polls ask for.
  std::vector<std::pair<uint64_t, absl::Status>> gone;
  int64_t events_end = 0;
  // The live clients (node, public key), and one past the last client id
  // the master issued.
  std::vector<std::pair<uint64_t, std::string>> clients;
  uint64_t clients_end = 0;
};

// The workers a join or registration answer says are gone, as statuses.
std::vector<std::pair<uint64_t, absl::Status>> GoneNodes(
    const google::protobuf::RepeatedPtrField<proto::NodeEvent>& events);

// Joins the job as a worker: retried while the master is unreachable, until
// `timeout` (on the timers' clock, which also times the retries' backoff).
// The master answers once all workers joined; DEADLINE_EXCEEDED (naming
// the missing ranks, or the unreachable master) otherwise.
absl::StatusOr<JoinedJob> JoinJob(const std::shared_ptr<grpc::Channel>& master,
                                  const std::string& master_address,
                                  const proto::JoinRequest& request,
                                  absl::Duration timeout, Timers& timers);

// Registers a client (not a rank) holding `public_key`: its node id and
// the directory. Retried until the job is formed or `timeout` passes (as
// JoinJob).
absl::StatusOr<proto::RegisterClientResponse> RegisterClient(
    const std::shared_ptr<grpc::Channel>& master,
    const std::string& master_address, const std::string& description,
    const std::string& public_key, absl::Duration timeout, Timers& timers);

// The vouchers of a registration answer, each with the key of the worker
// it was made for.
std::vector<Voucher> VouchersOf(const proto::RegisterClientResponse& r);

class MembershipClient : public std::enable_shared_from_this<MembershipClient> {
 public:
  // Called when the master says this node was declared dead (fenced).
  using FencedCallback = std::function<void(const absl::Status&)>;
  // Called when a new incarnation took worker.rank (its entry); the rank
  // is revived in the Membership right after.
  using RejoinedCallback =
      std::function<void(const WorkerInfo& worker, uint64_t incarnation)>;
  // Called when a client registered (its node and public key).
  using RegisteredCallback =
      std::function<void(uint64_t node, const std::string& public_key)>;
  struct Callbacks {
    FencedCallback on_fenced;
    RejoinedCallback on_rejoined;      // May be empty.
    RegisteredCallback on_registered;  // May be empty.
  };

  static std::shared_ptr<MembershipClient> Create(
      std::shared_ptr<grpc::Channel> master, Membership* membership,
      Timers* timers, MembershipOptions options);

  // Starts polling as (node, incarnation), for the events from number
  // `since` on (the join or registration answer's events_end).
  void Start(uint64_t node, uint64_t incarnation, int64_t since,
             Callbacks callbacks) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until all live workers reached barrier `name`.
  absl::Status Barrier(const std::string& name, absl::Duration timeout);

  // Tells the master this node leaves (not a death), then stops polling.
  absl::Status Leave(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops polling; waits (bounded) until the poll in flight has called back.
  // Call before destroying the client.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The event for `node` as a status: UNAVAILABLE "<name> died (…)".
  static absl::Status EventStatus(const proto::NodeEvent& event);

  MembershipClient(std::shared_ptr<grpc::Channel> master,
                   Membership* membership, Timers* timers,
                   MembershipOptions options);

 private:
  struct PollCall;

  void IssuePoll() ABSL_LOCKS_EXCLUDED(mu_);
  void OnPollDone(const std::shared_ptr<PollCall>& call,
                  const grpc::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void Retry() ABSL_LOCKS_EXCLUDED(mu_);
  // Publishes one event of a poll's answer to node `self`.
  void Apply(const proto::NodeEvent& event, uint64_t self,
             const Callbacks& callbacks);
  // Arms the check that the master answered within master_timeout.
  void WatchMasterLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ArmWatchLocked(absl::Time due) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckMaster() ABSL_LOCKS_EXCLUDED(mu_);
  // A poll failed: asks the master's host whether its process is gone
  // (at most every kAskAgain: a poll breaks while the master's process is
  // exiting, when its host may still accept). `since`: the last poll
  // answered; a later answer makes the question moot.
  static constexpr absl::Duration kAskAgain = absl::Milliseconds(250);
  void AskIfMasterGone(absl::Time since) ABSL_LOCKS_EXCLUDED(mu_);
  void MasterAnswered(absl::Time since, Listener answer)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Stops polling (mu_ held by the caller, who then calls GiveUp outside
  // it): the poll to cancel.
  std::shared_ptr<PollCall> StopForMasterLocked()
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GiveUpOnMaster(const std::shared_ptr<PollCall>& current,
                      const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  Clock& clock() const { return *timers_->clock(); }

  const std::shared_ptr<grpc::Channel> master_;
  const std::unique_ptr<proto::Rendezvous::Stub> stub_;
  Membership* const membership_;
  Timers* const timers_;
  const MembershipOptions options_;
  TcpListenerProbe probe_;

  absl::Mutex mu_;
  uint64_t node_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t since_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = true;
  absl::Time last_ok_ ABSL_GUARDED_BY(mu_);
  // When the master watch is due next.
  absl::Time watch_due_ ABSL_GUARDED_BY(mu_);
  // When this process last resumed from a pause the watch noticed (its
  // timer ran late): the master is blamed only after a whole master_timeout
  // of this process running since.
  absl::Time resumed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::shared_ptr<PollCall> current_ ABSL_GUARDED_BY(mu_);
  int polls_active_ ABSL_GUARDED_BY(mu_) = 0;  // Until their callback ends.
  Timers::TimerId retry_timer_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId watch_timer_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);  // Of the last failed poll.
  // When the master's host was last asked about it.
  absl::Time asked_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  Callbacks callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_MEMBERSHIP_CLIENT_H_
