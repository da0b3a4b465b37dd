// The master's side of rendezvous and membership (hosted by rank 0). One
// class whose shared state is one struct (State) under one mutex; its
// definitions are split by RPC, each an operation on that state: held calls,
// events and sweeps in rendezvous_service.cc, then rendezvous_join.cc,
// rendezvous_clients.cc, rendezvous_poll.cc, rendezvous_barrier.cc
// (rendezvous_internal.h: what they share).
//
// Joins, polls and barriers are unary calls the master may hold: a held
// call is answered when what it waits for happens or its time runs out.
// Every held call lives in exactly one table of the state; whoever removes it
// from its table (under mu_) is the one who finishes it (outside mu_), so
// each is finished exactly once even when timeouts, events and
// cancellations race.
//
// Liveness: a node (worker or client) proves it is alive by polling. It is
// declared dead only when it has not been in contact for
// `heartbeat_timeout`: contact is a poll arriving, or a held poll still
// open (answered no later than half the timeout). A broken connection or a
// cancelled poll is a suspicion, not a death: a node that polls again
// within the timeout goes on untouched. Except when the worker's host
// answers that its process is gone: when a worker's held poll breaks, the
// master connects to the address it serves at (listener_probe.h), and a
// refusal there (nothing listens: the process exited or was killed)
// declares it dead at once; a host that accepts, or does not answer,
// leaves it to the heartbeat. A dead node is fenced: its later
// polls get FAILED_PRECONDITION. Time is the timers' clock.
//
// What callers can make the master hold is bounded (Limits), each refusal
// RESOURCE_EXHAUSTED naming its flag:
//  - held joins and barriers at once: --max_held_calls (a poll is held
//    once per node, a newer one replacing it, so polls are bounded by the
//    nodes);
//  - clients known, live or departed but not yet forgotten: --max_clients
//    (a departed client is forgotten once every live node saw its event);
//    live clients registered over one connection: --max_clients_per_peer;
//  - barrier names: --max_barriers. A barrier nobody waits at is forgotten
//    when room is needed, finished ones first (so only then does a late
//    arrival at a finished barrier wait again instead of passing).
// Worker names and client descriptions are data (node_names.h): a Join
// or RegisterClient outside their alphabet and length is INVALID_ARGUMENT;
// barrier names are at most kMaxNameBytes; a hold lasts at most
// kMaxHoldMs whatever timeout the caller asks for.
//
// Replacements: once the job formed, a worker started for a rank whose
// holder was declared dead or left (never rank 0, the master itself) joins
// as a new incarnation of it, under the rank's name: the others hear of it
// as a REJOINED event carrying its entry (its generation one more, its
// public key), and its join is answered — with the directory, the workers
// gone now, the live clients and where its polls start — once every live
// worker has seen that event (its next poll asks past it), within the
// join's timeout. A rank whose holder is alive is ALREADY_EXISTS.
//
// Identities (rpc/auth/node_key.h, rpc/auth/authenticator.h): every node makes
// its own key pair; a worker's Join and a client's registration carry the
// public half. Nothing secret is ever in an answer. A rank's slot is held
// by one incarnation (its incarnation and key): a held join is answered
// only for the incarnation holding the slot, and when a held join gives
// the rank up (it expired or was cancelled before the job formed), every
// other join held for that rank is answered ABORTED — so a join that
// lingers cannot be answered as the rank's later holder. Rank 0 is the
// master itself: its join must carry the master's own key. Each client
// gets a random incarnation and node id; a REGISTERED event announces its
// key to every worker, and its answer carries a voucher for each worker
// (what it presents until that worker heard of it). Polls and barriers are
// accepted only from the node they name: a presented credential must be
// that node's, made for the master (PERMISSION_DENIED naming both), and
// with require_identity one must be presented. A worker's fencing is
// answered first: a poll of a worker incarnation that was declared dead or
// replaced gets FAILED_PRECONDITION saying so, whatever it presents. With
// cert_identity a worker's Join, polls and barriers must also come over a
// connection whose client certificate names that worker (PERMISSION_DENIED
// before the rank is taken: no squatting a rank before the job forms).
#ifndef FERRY_RPC_MEMBERSHIP_RENDEZVOUS_SERVICE_H_
#define FERRY_RPC_MEMBERSHIP_RENDEZVOUS_SERVICE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/rendezvous.grpc.pb.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/limits.h"
#include "rpc/base/timers.h"
#include "rpc/membership/listener_probe.h"
#include "rpc/wire/bounded_service.h"

namespace ferry {

struct RendezvousOptions {
  int world_size = 1;
  // A node out of contact for this long is declared dead (see above; the
  // default is --heartbeat_timeout_ms's, tools/ferryd/main.cc says why).
  absl::Duration heartbeat_timeout = absl::Seconds(30);
  // How often liveness is checked.
  absl::Duration sweep_interval = absl::Milliseconds(200);
  // max_held_calls, max_clients, max_barriers.
  Limits limits;
  // Polls and barriers must present the credential of the node they name
  // (the job has a token or TLS, so every node sends its credential).
  bool require_identity = false;
  // --tls_identity=san: a worker's Join, polls and barriers are accepted
  // only over a connection whose TLS client certificate names the worker
  // (rpc/auth/cert_identity.h).
  bool cert_identity = false;
  // The master's key pair: worker0's (rank 0's Join must carry its public
  // half). Null: a fresh one (tests).
  std::shared_ptr<const NodeKey> key;
  // Asks a worker's host whether its process still listens once its held
  // poll broke. Null: TCP connections (TcpListenerProbe) on the timers.
  // Must outlive the service.
  ListenerProbe* listener_probe = nullptr;
};

// Every request is parsed through BoundedParse within options.limits.
class RendezvousService final
    : public BoundedService<proto::Rendezvous::CallbackService> {
 public:
  static constexpr size_t kMaxNameBytes = 256;
  static constexpr int64_t kMaxHoldMs = int64_t{24} * 3600 * 1000;
  // A join for a rank whose holder's poll is older than this asks the
  // holder whether it is alive (NudgeContestedHolder).
  static constexpr absl::Duration kNudgeAfter = absl::Milliseconds(200);
  // A worker without a held poll for this long (a live one polls again at
  // once) gets its host asked whether its process is gone, as a broken
  // poll does (a process that died between two polls has no poll to
  // break), and again as often while it stays silent: a poll breaks while
  // its process is exiting, when its host may still accept a connection.
  static constexpr absl::Duration kAskAfter = absl::Milliseconds(250);

  // One call to the master, answered exactly once through Answer (maybe
  // later: held), on whichever thread decides it, never under the
  // master's lock. The gRPC methods make one per call; tests and the
  // fuzzer make their own and drive the same state machine through the
  // Handle* methods below.
  class Held {
   public:
    virtual ~Held() = default;
    virtual void Answer(const grpc::Status& status) = 0;

   private:
    friend class RendezvousService;
    enum class Kind { kJoin, kPoll, kBarrier, kOther };
    // Written under the service's mu_.
    Kind kind = Kind::kOther;
    uint64_t id = 0;  // While held; 0 if never held.
    Timers::TimerId timer = 0;
    int rank = -1;
    uint64_t node = 0;
    uint64_t incarnation = 0;
    std::string public_key;  // A join's.
    int64_t since = 0;       // Polls; a replacement's join: its event's number.
    int64_t timeout_ms = 0;
    // A join admitted as a replacement, held until every live worker has
    // seen it arrive.
    bool replacement = false;
    std::string barrier;
    proto::JoinResponse* join = nullptr;
    proto::PollResponse* poll = nullptr;
  };
  // What the master knows of a call besides its message.
  struct Caller {
    // The "ferry-credential" header, if the call presented one.
    std::optional<std::string> credential;
    // The names of its TLS client certificate (used with cert_identity).
    std::vector<std::string> cert_names;
    // Its connection (gRPC's peer URI): client registrations are counted
    // per connection (--max_clients_per_peer).
    std::string peer;
  };

  RendezvousService(RendezvousOptions options, Timers* timers);
  // Call Shutdown() first; the server must be shut down before destruction.
  ~RendezvousService() override;

  // The state machine without gRPC. `call` must live until answered;
  // responses are filled before Answer.
  void HandleJoin(Held* call, const proto::JoinRequest& request,
                  proto::JoinResponse* response, const Caller& caller)
      ABSL_LOCKS_EXCLUDED(mu_);
  void HandleRegisterClient(Held* call,
                            const proto::RegisterClientRequest& request,
                            proto::RegisterClientResponse* response,
                            const Caller& caller) ABSL_LOCKS_EXCLUDED(mu_);
  void HandlePoll(Held* call, const proto::PollRequest& request,
                  proto::PollResponse* response, const Caller& caller)
      ABSL_LOCKS_EXCLUDED(mu_);
  void HandleBarrier(Held* call, const proto::BarrierRequest& request,
                     const Caller& caller) ABSL_LOCKS_EXCLUDED(mu_);
  // The call's caller went away (gRPC's OnCancel).
  void Cancel(Held* call) ABSL_LOCKS_EXCLUDED(mu_);

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const proto::JoinRequest* request,
                                 proto::JoinResponse* response) override;
  grpc::ServerUnaryReactor* RegisterClient(
      grpc::CallbackServerContext* context,
      const proto::RegisterClientRequest* request,
      proto::RegisterClientResponse* response) override;
  grpc::ServerUnaryReactor* Poll(grpc::CallbackServerContext* context,
                                 const proto::PollRequest* request,
                                 proto::PollResponse* response) override;
  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* context,
                                    const proto::BarrierRequest* request,
                                    proto::BarrierResponse* response) override;

  // Answers every held call with UNAVAILABLE and stops liveness checks.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Joins and barriers held now.
  int64_t held_waits() const ABSL_LOCKS_EXCLUDED(mu_);
  // Polls held now (one per node at most).
  int64_t held_polls() const ABSL_LOCKS_EXCLUDED(mu_);
  // The master's public key (what rank 0's Join must carry).
  const std::string& public_key() const { return key_->public_key(); }

 private:
  class GrpcHeld;
  using Finishes = std::vector<std::pair<Held*, grpc::Status>>;

  struct Slot {
    bool joined = false;
    // info.generation numbers its incarnations; info.public_key is its key.
    proto::WorkerInfo info;
    uint64_t incarnation = 0;
    // Its pair secret with the master (rpc/auth/node_key.h).
    std::string secret;
  };
  struct Node {
    std::string name;
    uint64_t incarnation = 0;
    std::string public_key;
    // The token its calls to the master present (rpc/auth/credential.h).
    std::string expected;
    // A client's registering connection (Caller::peer).
    std::string peer;
    absl::Time last_seen;
    bool down = false;
    proto::NodeEvent::Kind down_kind = proto::NodeEvent::DEAD;
    std::string down_reason;
    uint64_t held_poll = 0;  // Id of the held poll, 0 if none.
    // When its host was last asked about it (AskIfGone).
    absl::Time asked_at = absl::InfinitePast();
    int64_t seen = 0;  // Events this node has acknowledged.
  };
  struct BarrierState {
    absl::flat_hash_set<uint64_t> arrived;
    std::vector<uint64_t> waiters;  // Held ids.
    bool done = false;
  };

  // What a Join must be in any state of the job (its world size, rank,
  // name, rank 0's key): checked before its ECDH, without the lock.
  grpc::Status CheckJoinShape(const proto::JoinRequest& r) const;
  // Each step runs under mu_ and returns the calls to finish after unlock.
  // (The joiner's key was checked before: it yields a pair secret.)
  // CheckJoin: the shape, then the rank's slot and the name's uniqueness.
  grpc::Status CheckJoin(const proto::JoinRequest& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `secret`: the joiner's pair secret with the master (made outside mu_).
  Finishes AdmitJoin(Held* held, const proto::JoinRequest& r,
                     const std::string& secret)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `slot` is held by the incarnation with this key.
  static bool Holds(const Slot& slot, uint64_t incarnation,
                    const std::string& public_key);
  // A held join (not a replacement's) gave rank `gone->rank` up before the
  // job formed: the slot is freed if `gone`'s incarnation held it, and
  // every other join held for the rank is answered ABORTED.
  Finishes ReleaseRank(Held* gone) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A slot's occupant from `r` and its pair secret with the master.
  Slot SlotFor(const proto::JoinRequest& r, const std::string& secret) const;
  // The token node `node` (holding `public_key`, with pair `secret`)
  // presents to the master.
  std::string ExpectedFrom(uint64_t node, const std::string& public_key,
                           const std::string& secret) const;
  // Whether worker `rank`'s holder is gone, so a new incarnation may take
  // the rank (the job formed; never rank 0).
  bool Replaceable(int rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For a join of `r` contesting a rank whose holder is not declared gone
  // and whose poll was held longer than kNudgeAfter: that poll, taken, to
  // be answered now (the holder, if alive, polls again at once). Null
  // otherwise.
  Held* NudgeContestedHolder(const proto::JoinRequest& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How long worker `rank`'s live holder has been out of contact (no poll
  // held: a live worker polls again at once); nullopt if it is in
  // contact, gone, or never replaceable.
  std::optional<absl::Duration> SilentFor(int rank) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new incarnation takes rank r.worker().rank() (CheckJoin passed).
  Finishes AdmitReplacement(Held* held, const proto::JoinRequest& r,
                            const std::string& secret)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registers a client (node id, key, event, vouchers) into `out`.
  Finishes AdmitClient(Held* held, const proto::RegisterClientRequest& r,
                       const std::string& secret, const std::string& peer,
                       proto::RegisterClientResponse* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK unless the master knows --max_clients clients, or `peer` registered
  // --max_clients_per_peer live ones.
  grpc::Status CheckRoomForClient(const std::string& peer) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Live workers but `except` that have not seen event number `event`.
  std::vector<std::string> NotSeenBy(int64_t event, uint64_t except) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers the replacements' joins every live worker has seen arrive.
  Finishes CheckReplacements() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The workers gone now, but `self`, as the events that said so.
  void FillGone(uint64_t self,
                google::protobuf::RepeatedPtrField<proto::NodeEvent>* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Finishes CompleteRendezvous() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the held joins `ids` and answers each: the job's answer (the
  // directory) to the incarnation that holds its rank's slot, ABORTED
  // "rendezvous: rank N <lost>" to any other.
  Finishes AnswerJoins(const std::vector<uint64_t>& ids, absl::string_view lost)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `presented`: the call's credential header, if it sent one.
  Finishes AdmitPoll(Held* held, const proto::PollRequest& r,
                     const std::optional<std::string>& presented)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // FAILED_PRECONDITION if a poll as (node `n`, `incarnation`) comes from
  // an incarnation that was replaced or declared gone.
  grpc::Status CheckFenced(const Node& n, uint64_t node,
                           uint64_t incarnation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Finishes AdmitBarrier(Held* held, const proto::BarrierRequest& r,
                        const std::optional<std::string>& presented)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK if a call that presented `presented` may speak for `node` (known);
  // PERMISSION_DENIED naming `what` and both nodes if not.
  grpc::Status CheckCaller(absl::string_view what, uint64_t node, const Node& n,
                           const std::optional<std::string>& presented) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The node whose credential `presented` is (made for the master), if any.
  std::optional<uint64_t> Presenter(const std::string& presented) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OK unless cert_identity is on and `node` is a worker of this job whose
  // name the caller's certificate (`cert_names`) does not hold.
  grpc::Status CheckCertLocked(absl::string_view what, uint64_t node,
                               const std::vector<std::string>& cert_names) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A join's answer for the worker in `slot`: directory, the workers gone,
  // the live clients (all public).
  void FillJoin(const Slot& slot, proto::JoinResponse* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Finishes MarkDown(uint64_t node, proto::NodeEvent::Kind kind,
                    std::string reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers the held polls (of workers only, if `workers_only`: news only
  // they act on, such as a client's registration, reaches clients at
  // their next poll instead of waking every one of them).
  Finishes ReleasePolls(bool workers_only = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds events [since, end) to a poll reply.
  void FillEvents(int64_t since, proto::PollResponse* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t EventsEnd() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_.events_base + static_cast<int64_t>(state_.events.size());
  }
  void TrimEvents() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Finishes CheckBarriers() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FillDirectory(google::protobuf::RepeatedPtrField<proto::WorkerInfo>* out)
      const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingRanks() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string MissingFromBarrier(const BarrierState& b) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RESOURCE_EXHAUSTED naming --max_held_calls if no join or barrier more
  // may be held.
  grpc::Status CheckRoomToWait() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The barrier called `name`, made if there is room (forgetting one
  // nobody waits at if need be); null if not.
  BarrierState* BarrierFor(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t ClientCount() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether every live worker but `node` arrived at `b`.
  bool AllArrivedBut(const BarrierState& b, uint64_t node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Held* Take(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Hold(Held* held, absl::Time until) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Time Now() const;
  void Expire(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void Cancelled(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // For worker `node` out of contact now (its held poll broke, or none
  // came for kAskAfter) and not asked about within kAskAfter: the
  // question to ask its host (listener_probe.h), to be asked by AskIfGone
  // outside mu_. Nullopt otherwise.
  struct Question {
    uint64_t node = 0;
    uint64_t incarnation = 0;
    std::string address;
  };
  std::optional<Question> QuestionFor(uint64_t node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AskIfGone(Question question) ABSL_LOCKS_EXCLUDED(mu_);
  // Its host answered: a refusal declares that incarnation dead unless it
  // polled again meanwhile, was replaced, or is down already.
  void Answered(uint64_t node, uint64_t incarnation, const std::string& address,
                Listener answer) ABSL_LOCKS_EXCLUDED(mu_);
  void Sweep() ABSL_LOCKS_EXCLUDED(mu_);
  void FinishAll(Finishes finishes) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts handling a held call: `admit` runs under mu_. Its lambdas carry
  // ABSL_NO_THREAD_SAFETY_ANALYSIS because the analysis cannot see that a
  // std::function is called with mu_ held; Start is the only caller, and
  // it holds mu_ for the whole call.
  void Start(Held* held, Held::Kind kind,
             const std::function<Finishes()>& admit) ABSL_LOCKS_EXCLUDED(mu_);

  const RendezvousOptions options_;
  Timers* const timers_;
  const std::shared_ptr<const NodeKey> key_;
  std::unique_ptr<ListenerProbe> own_probe_;  // Unless options_ names one.
  ListenerProbe* const probe_;

  // Everything the four RPCs, the sweeps and the held calls share: one
  // struct under the one mutex, so each RPC's file (rendezvous_join,
  // _clients, _poll, _barrier) reads as operations on it.
  struct State {
    bool stopping = false;
    std::vector<Slot> slots;
    bool complete = false;
    uint64_t next_held = 1;
    uint64_t next_client = 1;
    // Every held call, by id.
    absl::flat_hash_map<uint64_t, Held*> held;
    // Of those, joins and barriers.
    int64_t held_waits = 0;
    absl::flat_hash_map<uint64_t, Node> nodes;
    // Events numbered from events_base; older ones (seen by every live
    // node) are trimmed, with the clients they announced, so a long job
    // with many short-lived clients does not grow the master without
    // bound.
    std::deque<proto::NodeEvent> events;
    int64_t events_base = 0;
    absl::flat_hash_map<std::string, BarrierState> barriers;
    // Live clients by registering connection (--max_clients_per_peer).
    absl::flat_hash_map<std::string, int64_t> clients_by_peer;
    Timers::TimerId sweep_timer = 0;
  };

  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_RENDEZVOUS_SERVICE_H_
