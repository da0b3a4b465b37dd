#include "rpc/membership/rendezvous_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "rpc/auth/authenticator.h"
#include "rpc/auth/cert_identity.h"
#include "rpc/auth/credential.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/node_names.h"
#include "rpc/value/value.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

// A gRPC call: the reactor is the held call; gRPC deletes it once done.
class RendezvousService::GrpcHeld final : public Held,
                                          public grpc::ServerUnaryReactor {
 public:
  explicit GrpcHeld(RendezvousService* service) : service_(service) {}

  void Answer(const grpc::Status& status) override { Finish(status); }
  void OnCancel() override { service_->Cancel(this); }
  void OnDone() override { delete this; }

 private:
  RendezvousService* const service_;
};

namespace {

constexpr int64_t kDefaultWaitMs = 60000;
constexpr int64_t kMaxPollHoldMs = 5000;

grpc::Status Error(grpc::StatusCode code, std::string message) {
  return grpc::Status(code, std::move(message));
}

// RESOURCE_EXHAUSTED "<what>, over the limit of N (--flag=N)".
grpc::Status Exhausted(absl::string_view what, absl::string_view flag,
                       int64_t limit) {
  return Error(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      std::string(OverLimit(what, absl::StrCat(limit), flag, limit).message()));
}

// A caller's timeout, in [1 ms, kMaxHoldMs]; `fallback` if none.
int64_t HoldMs(int64_t asked, int64_t fallback) {
  return std::clamp<int64_t>(asked > 0 ? asked : fallback, 1,
                             RendezvousService::kMaxHoldMs);
}

std::string Cut(const std::string& text) {
  if (text.size() <= RendezvousService::kMaxNameBytes) return text;
  size_t n = RendezvousService::kMaxNameBytes;
  // Not inside a UTF-8 sequence (the name goes back out in protos).
  while (n > 0 && (static_cast<uint8_t>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

// What the master sees of a gRPC call besides its message.
RendezvousService::Caller CallerOf(const grpc::CallbackServerContext& context,
                                   bool cert_identity) {
  RendezvousService::Caller caller;
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kCredentialHeader); it != metadata.end()) {
    caller.credential.emplace(it->second.data(), it->second.size());
  }
  if (cert_identity) caller.cert_names = PeerCertNames(context);
  caller.peer = context.peer();
  return caller;
}

// A random incarnation for a client: its polls cannot be guessed.
uint64_t RandomIncarnation() { return RandomU64() | 1; }

// The pair secret of the master and the holder of `public_key` (an ECDH:
// made before the lock is taken); INVALID_ARGUMENT naming `field` for a
// key that yields none.
absl::StatusOr<std::string> SecretWith(const NodeKey& key,
                                       const std::string& public_key,
                                       absl::string_view field) {
  absl::StatusOr<std::string> secret = key.Agree(public_key);
  if (secret.ok()) return secret;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", secret.status().message()));
}

}  // namespace

absl::Time RendezvousService::Now() const { return timers_->clock()->Now(); }

RendezvousService::RendezvousService(RendezvousOptions options, Timers* timers)
    : BoundedService(ServiceOf<proto::JoinRequest>("Rendezvous"),
                     options.limits, "worker0"),
      options_(options),
      timers_(timers),
      key_(options_.key != nullptr ? options_.key : NodeKey::Generate()) {
  Bound(&RendezvousService::Join, "Join");
  Bound(&RendezvousService::RegisterClient, "RegisterClient");
  Bound(&RendezvousService::Poll, "Poll");
  Bound(&RendezvousService::Barrier, "Barrier");
  absl::MutexLock lock(&mu_);
  slots_.resize(std::max(options_.world_size, 1));
  sweep_timer_ =
      timers_->RunAfter(options_.sweep_interval, [this] { Sweep(); });
}

RendezvousService::~RendezvousService() { Shutdown(); }

void RendezvousService::Shutdown() {
  Finishes finishes;
  Timers::TimerId sweep;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    sweep = sweep_timer_;
    sweep_timer_ = 0;
    std::vector<uint64_t> ids;
    for (const auto& [id, held] : held_) ids.push_back(id);
    for (uint64_t id : ids) {
      Held* held = Take(id);
      // Joiners still waiting get the verdict, not a vague "unavailable".
      grpc::Status status =
          held->kind == Held::Kind::kJoin && !held->replacement
              ? Error(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("rendezvous: ", MissingRanks(), " of ",
                                   slots_.size(),
                                   " did not join before the master gave up"))
              : Error(grpc::StatusCode::UNAVAILABLE,
                      "the master is shutting down");
      finishes.emplace_back(held, status);
    }
  }
  if (sweep != 0) timers_->Cancel(sweep);
  FinishAll(std::move(finishes));
}

void RendezvousService::FinishAll(Finishes finishes) {
  for (auto& [held, status] : finishes) {
    if (held->timer != 0) timers_->Cancel(held->timer);
    held->Answer(status);
  }
}

void RendezvousService::Start(Held* held, Held::Kind kind,
                              const std::function<Finishes()>& admit) {
  Finishes finishes;
  {
    absl::MutexLock lock(&mu_);
    held->kind = kind;
    if (stopping_) {
      finishes.emplace_back(held, Error(grpc::StatusCode::UNAVAILABLE,
                                        "the master is shutting down"));
    } else {
      finishes = admit();
    }
  }
  FinishAll(std::move(finishes));
}

void RendezvousService::Cancel(Held* call) {
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    id = call->id;
  }
  if (id != 0) Cancelled(id);
}

RendezvousService::Held* RendezvousService::Take(uint64_t id) {
  auto it = held_.find(id);
  if (it == held_.end()) return nullptr;
  Held* held = it->second;
  held_.erase(it);
  if (held->kind != Held::Kind::kPoll) --held_waits_;
  if (held->kind == Held::Kind::kPoll) {
    auto node = nodes_.find(held->node);
    if (node != nodes_.end() && node->second.held_poll == id) {
      node->second.held_poll = 0;
      // Its connection was open all along: alive until now.
      node->second.last_seen = Now();
    }
  } else if (held->kind == Held::Kind::kBarrier) {
    // A barrier with waiters is never forgotten: it is there.
    auto barrier = barriers_.find(held->barrier);
    if (barrier != barriers_.end()) {
      auto& waiters = barrier->second.waiters;
      waiters.erase(std::remove(waiters.begin(), waiters.end(), id),
                    waiters.end());
    }
  }
  return held;
}

int64_t RendezvousService::held_waits() const {
  absl::MutexLock lock(&mu_);
  return held_waits_;
}

int64_t RendezvousService::held_polls() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(held_.size()) - held_waits_;
}

grpc::Status RendezvousService::CheckRoomToWait() const {
  const int64_t max = options_.limits.max_held_calls;
  if (held_waits_ < max) return grpc::Status::OK;
  return Exhausted(absl::StrCat("the master already holds ", held_waits_,
                                " joins and barriers"),
                   "max_held_calls", max);
}

void RendezvousService::Hold(Held* held, absl::Time until) {
  held->id = next_held_++;
  held_.emplace(held->id, held);
  if (held->kind != Held::Kind::kPoll) ++held_waits_;
  uint64_t id = held->id;
  held->timer = timers_->RunAt(until, [this, id] { Expire(id); });
}

// ---- Join ----

grpc::ServerUnaryReactor* RendezvousService::Join(
    grpc::CallbackServerContext* context, const proto::JoinRequest* request,
    proto::JoinResponse* response) {
  auto* held = new GrpcHeld(this);
  HandleJoin(held, *request, response,
             CallerOf(*context, options_.cert_identity));
  return held;
}

void RendezvousService::HandleJoin(Held* held, const proto::JoinRequest& r,
                                   proto::JoinResponse* response,
                                   const Caller& caller) {
  held->join = response;
  // Before the rank is taken: a certificate for another worker takes none.
  grpc::Status bound = grpc::Status::OK;
  if (options_.cert_identity) {
    const int rank = r.worker().rank();
    absl::Status fits =
        Annotate(CheckNameFitsRank(r.worker().name(), rank), "Join");
    if (fits.ok() && rank >= 0) {
      fits = CheckWorkerCert(caller.cert_names, WorkerNode(rank), "Join");
    }
    bound = ToGrpcStatus(fits);
  }
  // The checks that need no state before the ECDH (~35 us): a malformed
  // join costs the master no key agreement.
  const grpc::Status shape = bound.ok() ? CheckJoinShape(r) : bound;
  const absl::StatusOr<std::string> secret =
      shape.ok() ? SecretWith(*key_, r.worker().public_key(),
                              "Join: worker.public_key")
                 : absl::StatusOr<std::string>(std::string());
  Start(held, Held::Kind::kJoin, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!shape.ok()) return Finishes{{held, shape}};
    if (!secret.ok()) return Finishes{{held, ToGrpcStatus(secret.status())}};
    return AdmitJoin(held, r, *secret);
  });
}

bool RendezvousService::Holds(const Slot& slot, uint64_t incarnation,
                              const std::string& public_key) {
  return slot.joined && slot.incarnation == incarnation &&
         slot.info.public_key() == public_key;
}

grpc::Status RendezvousService::CheckJoinShape(
    const proto::JoinRequest& r) const {
  const int world = std::max(options_.world_size, 1);  // slots_.size()
  const int rank = r.worker().rank();
  if (r.world_size() != world) {
    return Error(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("world_size ", r.world_size(), " of ", r.worker().name(),
                     " does not match the master's ", world));
  }
  if (rank < 0 || rank >= world) {
    return Error(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("rank ", rank, " is out of range [0, ", world, ")"));
  }
  // Names are data: a fixed alphabet and length (node_names.h).
  if (absl::Status name = CheckWorkerName(r.worker().name()); !name.ok()) {
    return ToGrpcStatus(Annotate(name, "Join"));
  }
  // The master's own join: only the process that holds its key.
  if (rank == 0 && r.worker().public_key() != key_->public_key()) {
    return Error(grpc::StatusCode::PERMISSION_DENIED,
                 "rank 0 is the master itself: its join must carry the "
                 "master's own key");
  }
  return grpc::Status::OK;
}

grpc::Status RendezvousService::CheckJoin(const proto::JoinRequest& r) const {
  if (grpc::Status shape = CheckJoinShape(r); !shape.ok()) return shape;
  const int world = static_cast<int>(slots_.size());
  const int rank = r.worker().rank();
  const Slot& slot = slots_[rank];
  if (slot.joined && !Holds(slot, r.incarnation(), r.worker().public_key())) {
    if (!Replaceable(rank)) {
      // A holder out of contact (no poll open: a crash resets the
      // connection) is not called alive: the replacement is told to retry
      // (UNAVAILABLE; the joiner does, until its startup deadline) until
      // the holder is declared dead, or polls again and is refused as alive.
      if (std::optional<absl::Duration> silent = SilentFor(rank)) {
        return Error(
            grpc::StatusCode::UNAVAILABLE,
            absl::StrCat("rank ", rank, " is still held by ", slot.info.name(),
                         " (pid ", slot.info.pid(), " at ", slot.info.address(),
                         "), out of contact for ",
                         absl::ToInt64Milliseconds(*silent),
                         " ms: it is declared dead after ",
                         absl::ToInt64Milliseconds(options_.heartbeat_timeout),
                         " ms without contact, and its rank is free then"));
      }
      return Error(
          grpc::StatusCode::ALREADY_EXISTS,
          absl::StrCat("rank ", rank, " is already taken by ", slot.info.name(),
                       " (pid ", slot.info.pid(), " at ", slot.info.address(),
                       ")",
                       complete_ ? ", which is alive (its heartbeat poll is "
                                   "open at the master): a rank is taken "
                                   "over only once its holder died or left"
                                 : ""));
    }
    if (r.worker().name() != slot.info.name()) {
      return Error(grpc::StatusCode::INVALID_ARGUMENT,
                   absl::StrCat("a replacement for rank ", rank,
                                " must be named ", slot.info.name(),
                                " (names are fixed when the job forms), not ",
                                Cut(r.worker().name())));
    }
  }
  for (int k = 0; k < world; ++k) {
    if (k != rank && slots_[k].joined &&
        slots_[k].info.name() == r.worker().name()) {
      return Error(grpc::StatusCode::ALREADY_EXISTS,
                   absl::StrCat("name '", r.worker().name(),
                                "' is already taken by rank ", k));
    }
  }
  return grpc::Status::OK;
}

RendezvousService::Slot RendezvousService::SlotFor(
    const proto::JoinRequest& r, const std::string& secret) const {
  return Slot{true, r.worker(), r.incarnation(), secret};
}

std::string RendezvousService::ExpectedFrom(uint64_t node,
                                            const std::string& public_key,
                                            const std::string& secret) const {
  return CallToken(secret, {node, public_key},
                   {WorkerNode(0), key_->public_key()});
}

RendezvousService::Finishes RendezvousService::AdmitJoin(
    Held* held, const proto::JoinRequest& r, const std::string& secret) {
  if (Held* poll = NudgeContestedHolder(r); poll != nullptr) {
    return {
        {poll, grpc::Status::OK},
        {held, Error(grpc::StatusCode::UNAVAILABLE,
                     absl::StrCat("rank ", r.worker().rank(), " is held by ",
                                  slots_[r.worker().rank()].info.name(),
                                  ": asking it whether it is alive"))}};
  }
  grpc::Status bad = CheckJoin(r);
  if (!bad.ok()) return {{held, bad}};
  const int rank = r.worker().rank();
  const std::string& key = r.worker().public_key();
  if (complete_ && !Holds(slots_[rank], r.incarnation(), key)) {
    return AdmitReplacement(held, r, secret);
  }
  // A join that completes the job is answered at once, never refused for
  // room (else held joins could keep the job from forming). Checked before
  // the rank is taken: a join not held must not keep it.
  bool completes = true;
  for (int k = 0; k < static_cast<int>(slots_.size()); ++k) {
    if (k != rank && !slots_[k].joined) completes = false;
  }
  if (grpc::Status room = CheckRoomToWait();
      !complete_ && !completes && !room.ok()) {
    return {{held, room}};
  }
  Slot& slot = slots_[rank];
  if (!slot.joined) slot = SlotFor(r, secret);
  held->rank = rank;
  held->incarnation = r.incarnation();
  held->public_key = key;
  held->timeout_ms = HoldMs(r.timeout_ms(), kDefaultWaitMs);
  if (complete_) {  // A retried join after completion (the holder's own).
    FillJoin(slot, held->join);
    return {{held, grpc::Status::OK}};
  }
  Hold(held, Now() + absl::Milliseconds(held->timeout_ms));
  bool all = std::all_of(slots_.begin(), slots_.end(),
                         [](const Slot& s) { return s.joined; });
  return all ? CompleteRendezvous() : Finishes{};
}

RendezvousService::Finishes RendezvousService::ReleaseRank(Held* gone) {
  Slot& slot = slots_[gone->rank];
  // Only the holder's join frees the rank (the master's own stays).
  if (gone->rank == 0 || !Holds(slot, gone->incarnation, gone->public_key)) {
    return {};
  }
  slot = Slot{};
  // Any other join held for the rank was the same incarnation's: answered
  // now, it can never be answered as the rank's next holder (issue 25: a
  // lingering twin of an expired join got the next holder's credential).
  std::vector<uint64_t> twins;
  for (const auto& [id, held] : held_) {
    if (held->kind == Held::Kind::kJoin && !held->replacement &&
        held->rank == gone->rank) {
      twins.push_back(id);
    }
  }
  Finishes finishes;
  for (uint64_t id : twins) {
    finishes.emplace_back(
        Take(id),
        Error(grpc::StatusCode::ABORTED,
              absl::StrCat("rendezvous: another join of incarnation ",
                           absl::Hex(gone->incarnation, absl::kZeroPad16),
                           " for rank ", gone->rank,
                           " gave the rank up (it expired or was "
                           "cancelled); join again")));
  }
  return finishes;
}

RendezvousService::Finishes RendezvousService::CompleteRendezvous() {
  complete_ = true;
  const absl::Time now = Now();
  for (const Slot& s : slots_) {
    const uint64_t node = WorkerNode(s.info.rank());
    Node& n = nodes_[node];
    n.name = s.info.name();
    n.incarnation = s.incarnation;
    n.public_key = s.info.public_key();
    n.expected = ExpectedFrom(node, n.public_key, s.secret);
    n.last_seen = now;
  }
  Finishes finishes;
  std::vector<uint64_t> joins;
  for (const auto& [id, held] : held_) {
    if (held->kind == Held::Kind::kJoin) joins.push_back(id);
  }
  for (uint64_t id : joins) {
    Held* held = Take(id);
    const Slot& slot = slots_[held->rank];
    // Only the incarnation holding the slot gets the job's answer.
    if (!Holds(slot, held->incarnation, held->public_key)) {
      finishes.emplace_back(
          held, Error(grpc::StatusCode::ABORTED,
                      absl::StrCat("rendezvous: rank ", held->rank,
                                   " is held by another incarnation")));
      continue;
    }
    FillJoin(slot, held->join);
    finishes.emplace_back(held, grpc::Status::OK);
  }
  return finishes;
}

RendezvousService::Held* RendezvousService::NudgeContestedHolder(
    const proto::JoinRequest& r) {
  const int rank = r.worker().rank();
  if (!complete_ || rank <= 0 || rank >= static_cast<int>(slots_.size()) ||
      Holds(slots_[rank], r.incarnation(), r.worker().public_key()) ||
      Replaceable(rank)) {
    return nullptr;
  }
  auto it = nodes_.find(WorkerNode(rank));
  if (it == nodes_.end() || it->second.held_poll == 0 ||
      Now() - it->second.last_seen <= kNudgeAfter) {
    return nullptr;
  }
  // A crashed holder's poll may still look open (its connection's reset
  // not seen yet): answered now, a live holder polls again at once, a dead
  // one does not — the joiner's retry finds out which (SilentFor).
  Held* poll = Take(it->second.held_poll);
  FillEvents(poll->since, poll->poll);
  return poll;
}

std::optional<absl::Duration> RendezvousService::SilentFor(int rank) const {
  if (!complete_ || rank == 0) return std::nullopt;
  auto it = nodes_.find(WorkerNode(rank));
  if (it == nodes_.end() || it->second.down || it->second.held_poll != 0) {
    return std::nullopt;
  }
  return Now() - it->second.last_seen;
}

bool RendezvousService::Replaceable(int rank) const {
  if (!complete_ || rank == 0) return false;
  auto it = nodes_.find(WorkerNode(rank));
  return it != nodes_.end() && it->second.down;
}

RendezvousService::Finishes RendezvousService::AdmitReplacement(
    Held* held, const proto::JoinRequest& r, const std::string& secret) {
  if (grpc::Status room = CheckRoomToWait(); !room.ok()) {
    return {{held, room}};
  }
  const int rank = r.worker().rank();
  const uint64_t node = WorkerNode(rank);
  Slot& slot = slots_[rank];
  const uint64_t generation = slot.info.generation() + 1;
  slot = SlotFor(r, secret);
  slot.info.set_generation(generation);
  // The old incarnation's state goes: a new key, contact from now.
  Node& n = nodes_[node];
  n = Node{};
  n.name = slot.info.name();
  n.incarnation = slot.incarnation;
  n.public_key = slot.info.public_key();
  n.expected = ExpectedFrom(node, n.public_key, secret);
  n.last_seen = Now();
  proto::NodeEvent event;
  event.set_node(node);
  event.set_name(n.name);
  event.set_kind(proto::NodeEvent::REJOINED);
  *event.mutable_worker() = slot.info;
  event.set_incarnation(slot.incarnation);
  events_.push_back(std::move(event));
  // The job as it is now is in its answer: its polls start after that.
  n.seen = EventsEnd();
  // Answered once every live worker has seen the event (its next poll
  // asks for what follows it): from then on every worker knows the new
  // incarnation's address and key, and counts it alive, so its first
  // calls and collectives are not refused or named after the old one.
  held->rank = rank;
  held->incarnation = r.incarnation();
  held->public_key = r.worker().public_key();
  held->replacement = true;
  held->since = EventsEnd() - 1;
  held->timeout_ms = HoldMs(r.timeout_ms(), kDefaultWaitMs);
  Hold(held, Now() + absl::Milliseconds(held->timeout_ms));
  Finishes finishes = ReleasePolls();
  Finishes answered = CheckReplacements();
  finishes.insert(finishes.end(), answered.begin(), answered.end());
  return finishes;
}

std::vector<std::string> RendezvousService::NotSeenBy(int64_t event,
                                                      uint64_t except) const {
  std::vector<std::string> behind;
  for (const auto& [node, n] : nodes_) {
    if (IsWorkerNode(node) && node != except && !n.down && n.seen <= event) {
      behind.push_back(n.name);
    }
  }
  std::sort(behind.begin(), behind.end());
  return behind;
}

RendezvousService::Finishes RendezvousService::CheckReplacements() {
  std::vector<uint64_t> ready;
  for (const auto& [id, held] : held_) {
    if (held->replacement &&
        NotSeenBy(held->since, WorkerNode(held->rank)).empty()) {
      ready.push_back(id);
    }
  }
  Finishes finishes;
  for (uint64_t id : ready) {
    Held* held = Take(id);
    const Slot& slot = slots_[held->rank];
    if (!Holds(slot, held->incarnation, held->public_key)) {
      finishes.emplace_back(
          held, Error(grpc::StatusCode::ABORTED,
                      absl::StrCat("rendezvous: rank ", held->rank,
                                   " was taken by another incarnation")));
      continue;
    }
    FillJoin(slot, held->join);
    finishes.emplace_back(held, grpc::Status::OK);
  }
  return finishes;
}

void RendezvousService::FillGone(
    uint64_t self,
    google::protobuf::RepeatedPtrField<proto::NodeEvent>* out) const {
  for (int rank = 0; rank < static_cast<int>(slots_.size()); ++rank) {
    const uint64_t node = WorkerNode(rank);
    auto it = nodes_.find(node);
    if (node == self || it == nodes_.end() || !it->second.down) continue;
    proto::NodeEvent* e = out->Add();
    e->set_node(node);
    e->set_name(it->second.name);
    e->set_kind(it->second.down_kind);
    e->set_reason(it->second.down_reason);
  }
}

void RendezvousService::FillJoin(const Slot& slot,
                                 proto::JoinResponse* out) const {
  FillDirectory(out->mutable_workers());
  out->clear_gone();
  FillGone(WorkerNode(slot.info.rank()), out->mutable_gone());
  out->set_events_end(EventsEnd());
  out->clear_clients();
  for (const auto& [node, n] : nodes_) {
    if (IsWorkerNode(node) || n.down) continue;
    proto::ClientKey* c = out->add_clients();
    c->set_node(node);
    c->set_public_key(n.public_key);
  }
  out->set_clients_end(kFirstClientNode + next_client_);
}

void RendezvousService::FillDirectory(
    google::protobuf::RepeatedPtrField<proto::WorkerInfo>* out) const {
  out->Clear();
  for (const Slot& s : slots_) *out->Add() = s.info;
}

std::string RendezvousService::MissingRanks() const {
  std::vector<int> missing;
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (!slots_[k].joined) missing.push_back(static_cast<int>(k));
  }
  return absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(missing, ", "));
}

// ---- Clients ----

grpc::ServerUnaryReactor* RendezvousService::RegisterClient(
    grpc::CallbackServerContext* context,
    const proto::RegisterClientRequest* request,
    proto::RegisterClientResponse* response) {
  auto* held = new GrpcHeld(this);
  HandleRegisterClient(held, *request, response,
                       CallerOf(*context, options_.cert_identity));
  return held;
}

void RendezvousService::HandleRegisterClient(
    Held* held, const proto::RegisterClientRequest& r,
    proto::RegisterClientResponse* response, const Caller& caller) {
  // Checked before the ECDH: a malformed registration costs no key
  // agreement.
  const absl::Status described = CheckClientDescription(r.description());
  const absl::StatusOr<std::string> secret =
      described.ok()
          ? SecretWith(*key_, r.public_key(), "RegisterClient: public_key")
          : absl::StatusOr<std::string>(Annotate(described, "RegisterClient"));
  Start(held, Held::Kind::kOther, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (!secret.ok()) return Finishes{{held, ToGrpcStatus(secret.status())}};
    return AdmitClient(held, r, *secret, caller.peer, response);
  });
}

// Who a "caller" is, for --max_clients_per_peer: the connection the
// registration came over (gRPC's peer URI, its address and port). Not the
// peer's host: on one machine every process is 127.0.0.1, and behind a NAT
// or on a launcher host many honest clients share one address, so a
// per-host bound would either be the job-wide one again or lock honest
// clients out. Not a credential: a client registers before it has an
// identity, so a registration presents none. A connection is what an
// honest client registers over once (its membership channel is a
// connection of its own), and what a token holder must pay for each
// (a socket and a handshake, TLS included) to hold more.
grpc::Status RendezvousService::CheckRoomForClient(
    const std::string& peer) const {
  if (ClientCount() >= options_.limits.max_clients) {
    return Exhausted(
        absl::StrCat("the master already knows ", ClientCount(), " clients"),
        "max_clients", options_.limits.max_clients);
  }
  auto it = clients_by_peer_.find(peer);
  const int64_t mine = it == clients_by_peer_.end() ? 0 : it->second;
  if (mine >= options_.limits.max_clients_per_peer) {
    return Exhausted(absl::StrCat(mine,
                                  " live clients were registered over "
                                  "this connection (",
                                  Cut(peer), ") already"),
                     "max_clients_per_peer",
                     options_.limits.max_clients_per_peer);
  }
  return grpc::Status::OK;
}

RendezvousService::Finishes RendezvousService::AdmitClient(
    Held* held, const proto::RegisterClientRequest& r,
    const std::string& secret, const std::string& peer,
    proto::RegisterClientResponse* out) {
  if (!complete_) {
    return {{held, Error(grpc::StatusCode::UNAVAILABLE,
                         absl::StrCat("the job is not formed yet (waiting for ",
                                      MissingRanks(), ")"))}};
  }
  if (grpc::Status room = CheckRoomForClient(peer); !room.ok()) {
    return {{held, room}};
  }
  const uint64_t number = next_client_++;
  const uint64_t node = kFirstClientNode + number;
  Node& n = nodes_[node];
  n.name = absl::StrCat("client", number);
  if (!r.description().empty()) {
    absl::StrAppend(&n.name, " (", r.description(), ")");
  }
  n.last_seen = Now();
  n.incarnation = RandomIncarnation();
  n.public_key = r.public_key();
  n.expected = ExpectedFrom(node, n.public_key, secret);
  n.peer = peer;
  ++clients_by_peer_[peer];
  out->set_node(node);
  out->set_incarnation(n.incarnation);
  FillDirectory(out->mutable_workers());
  // What each worker may check it by until the announcement below reaches
  // it: only the master and that worker can make it.
  for (const Slot& s : slots_) {
    out->add_vouchers(
        VoucherTag(s.secret, {WorkerNode(0), key_->public_key()},
                   {WorkerNode(s.info.rank()), s.info.public_key()},
                   {node, n.public_key}));
  }
  FillGone(node, out->mutable_gone());
  // Announced to every node (workers admit its key), in the order of ids.
  proto::NodeEvent event;
  event.set_node(node);
  event.set_name(n.name);
  event.set_kind(proto::NodeEvent::REGISTERED);
  event.set_public_key(n.public_key);
  events_.push_back(std::move(event));
  // Its own announcement is in its answer already.
  out->set_events_end(EventsEnd());
  n.seen = EventsEnd();
  Finishes finishes = ReleasePolls(/*workers_only=*/true);
  finishes.emplace_back(held, grpc::Status::OK);
  return finishes;
}

// ---- Poll ----

grpc::ServerUnaryReactor* RendezvousService::Poll(
    grpc::CallbackServerContext* context, const proto::PollRequest* request,
    proto::PollResponse* response) {
  auto* held = new GrpcHeld(this);
  HandlePoll(held, *request, response,
             CallerOf(*context, options_.cert_identity));
  return held;
}

void RendezvousService::HandlePoll(Held* held, const proto::PollRequest& r,
                                   proto::PollResponse* response,
                                   const Caller& caller) {
  held->poll = response;
  Start(held, Held::Kind::kPoll, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    grpc::Status bound = CheckCertLocked("poll", r.node(), caller.cert_names);
    return bound.ok() ? AdmitPoll(held, r, caller.credential)
                      : Finishes{{held, bound}};
  });
}

grpc::Status RendezvousService::CheckCertLocked(
    absl::string_view what, uint64_t node,
    const std::vector<std::string>& cert_names) const {
  if (!options_.cert_identity || !IsWorkerNode(node)) return grpc::Status::OK;
  if (!nodes_.contains(node)) return grpc::Status::OK;  // Answered unknown.
  return ToGrpcStatus(CheckWorkerCert(cert_names, node, what));
}

std::optional<uint64_t> RendezvousService::Presenter(
    const std::string& presented) const {
  std::optional<PresentedCredential> c = ParseCredential(presented);
  if (!c.has_value()) return std::nullopt;
  auto it = nodes_.find(c->node);
  if (it == nodes_.end() || it->second.expected.empty() ||
      !ConstantTimeEquals(it->second.expected, c->token)) {
    return std::nullopt;
  }
  return c->node;
}

grpc::Status RendezvousService::CheckCaller(
    absl::string_view what, uint64_t node, const Node& /*n*/,
    const std::optional<std::string>& presented) const {
  if (!presented.has_value() && !options_.require_identity) {
    return grpc::Status::OK;
  }
  std::optional<uint64_t> who;
  if (presented.has_value()) who = Presenter(*presented);
  if (who == node) return grpc::Status::OK;
  std::string caller = "presented no node credential";
  if (presented.has_value()) {
    caller = who.has_value()
                 ? absl::StrCat("is ", IdentityLabel(*who))
                 : "presented a credential of no node of this job (made for "
                   "another node, of a node gone, or forged)";
  }
  return Error(grpc::StatusCode::PERMISSION_DENIED,
               absl::StrCat(what, ": node claims ", IdentityLabel(node),
                            " but the call ", caller));
}

grpc::Status RendezvousService::CheckFenced(const Node& n, uint64_t node,
                                            uint64_t incarnation) const {
  if (n.incarnation != incarnation) {
    if (!IsWorkerNode(node)) {
      return Error(grpc::StatusCode::FAILED_PRECONDITION,
                   absl::StrCat(n.name, ": stale incarnation"));
    }
    const proto::WorkerInfo& now = slots_[node].info;
    return Error(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat(n.name, ": this incarnation (",
                     absl::Hex(incarnation, absl::kZeroPad16),
                     ") was replaced: it was declared dead or left, and a new "
                     "process (generation ",
                     now.generation(), ", pid ", now.pid(), " at ",
                     now.address(), ") holds the rank now"));
  }
  if (n.down) {
    return Error(grpc::StatusCode::FAILED_PRECONDITION,
                 absl::StrCat(n.name, " was declared gone by the master: ",
                              n.down_reason));
  }
  return grpc::Status::OK;
}

RendezvousService::Finishes RendezvousService::AdmitPoll(
    Held* held, const proto::PollRequest& r,
    const std::optional<std::string>& presented) {
  auto it = nodes_.find(r.node());
  if (it == nodes_.end()) {
    return {{held, complete_ ? Error(grpc::StatusCode::NOT_FOUND,
                                     absl::StrCat("unknown node ", r.node()))
                             : Error(grpc::StatusCode::UNAVAILABLE,
                                     "the job is not formed yet")}};
  }
  Node& n = it->second;
  // A worker's fencing first (issue 25): a replaced incarnation no longer
  // has a credential that counts here, and must hear that it was replaced
  // (and stop) rather than be refused as a stranger until it gives the
  // master up. Telling it changes nothing here. (A client is never
  // replaced: a wrong incarnation there is a guess, refused as a stranger
  // first.)
  const bool worker = IsWorkerNode(r.node());
  grpc::Status fenced = CheckFenced(n, r.node(), r.incarnation());
  if (worker && !fenced.ok()) return {{held, fenced}};
  if (grpc::Status who = CheckCaller("poll", r.node(), n, presented);
      !who.ok()) {
    return {{held, who}};
  }
  if (!fenced.ok()) return {{held, fenced}};
  n.last_seen = Now();
  held->node = r.node();
  held->since = std::max<int64_t>(r.since(), events_base_);
  n.seen = held->since;
  Finishes finishes = CheckReplacements();
  if (r.leaving()) {
    Finishes left = MarkDown(r.node(), proto::NodeEvent::LEFT, "left the job");
    finishes.insert(finishes.end(), left.begin(), left.end());
  }
  if (r.leaving() || EventsEnd() > held->since) {
    FillEvents(held->since, held->poll);
    finishes.emplace_back(held, grpc::Status::OK);
    TrimEvents();
    return finishes;
  }
  if (n.held_poll != 0) {  // Superseded by this one.
    finishes.emplace_back(Take(n.held_poll), grpc::Status::OK);
  }
  // Held no longer than half the heartbeat timeout: the answer and the next
  // poll must both fit before a node could be declared dead.
  int64_t hold_ms = std::clamp<int64_t>(
      r.hold_ms(), 0,
      std::min(kMaxPollHoldMs,
               absl::ToInt64Milliseconds(options_.heartbeat_timeout) / 2));
  Hold(held, Now() + absl::Milliseconds(hold_ms));
  n.held_poll = held->id;
  // What every live node has seen can go (and departed clients with it),
  // also when no poll is behind — else it would stay while polls keep up.
  if (!events_.empty()) TrimEvents();
  return finishes;
}

RendezvousService::Finishes RendezvousService::ReleasePolls(bool workers_only) {
  Finishes finishes;
  std::vector<uint64_t> polls;
  for (const auto& [node, n] : nodes_) {
    if (n.held_poll != 0 && (!workers_only || IsWorkerNode(node))) {
      polls.push_back(n.held_poll);
    }
  }
  for (uint64_t id : polls) {
    Held* held = Take(id);
    FillEvents(held->since, held->poll);
    finishes.emplace_back(held, grpc::Status::OK);
  }
  return finishes;
}

void RendezvousService::FillEvents(int64_t since,
                                   proto::PollResponse* out) const {
  out->set_first(std::max(since, events_base_));
  for (int64_t k = out->first(); k < EventsEnd(); ++k) {
    *out->add_events() = events_[k - events_base_];
  }
}

void RendezvousService::TrimEvents() {
  int64_t seen_by_all = EventsEnd();
  for (const auto& [node, n] : nodes_) {
    if (!n.down) seen_by_all = std::min(seen_by_all, n.seen);
  }
  // Workers stay known (for fencing); departed clients are forgotten once
  // their event is trimmed.
  while (events_base_ < seen_by_all) {
    const proto::NodeEvent& e = events_.front();
    if (!IsWorkerNode(e.node()) && e.kind() != proto::NodeEvent::REGISTERED) {
      nodes_.erase(e.node());
    }
    events_.pop_front();
    ++events_base_;
  }
}

RendezvousService::Finishes RendezvousService::MarkDown(
    uint64_t node, proto::NodeEvent::Kind kind, std::string reason) {
  Node& n = nodes_[node];
  if (n.down) return {};
  n.down = true;
  n.down_kind = kind;
  n.down_reason = reason;
  if (!n.peer.empty()) {  // A client: no longer counted for its connection.
    auto peer = clients_by_peer_.find(n.peer);
    if (peer != clients_by_peer_.end() && --peer->second <= 0) {
      clients_by_peer_.erase(peer);
    }
  }
  proto::NodeEvent event;
  event.set_node(node);
  event.set_name(n.name);
  event.set_kind(kind);
  event.set_reason(std::move(reason));
  events_.push_back(std::move(event));
  Finishes finishes = ReleasePolls();
  Finishes barriers = CheckBarriers();
  finishes.insert(finishes.end(), barriers.begin(), barriers.end());
  // A worker gone is no longer waited for.
  Finishes replacements = CheckReplacements();
  finishes.insert(finishes.end(), replacements.begin(), replacements.end());
  return finishes;
}

void RendezvousService::Sweep() {
  Finishes finishes;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    const absl::Time now = Now();
    std::vector<uint64_t> dead;
    for (const auto& [node, n] : nodes_) {
      if (!n.down && n.held_poll == 0 &&
          now - n.last_seen > options_.heartbeat_timeout) {
        dead.push_back(node);
      }
    }
    for (uint64_t node : dead) {
      Finishes f = MarkDown(
          node, proto::NodeEvent::DEAD,
          absl::StrCat("missed heartbeats for ",
                       absl::ToInt64Milliseconds(options_.heartbeat_timeout),
                       " ms"));
      finishes.insert(finishes.end(), f.begin(), f.end());
    }
    sweep_timer_ =
        timers_->RunAfter(options_.sweep_interval, [this] { Sweep(); });
  }
  FinishAll(std::move(finishes));
}

// ---- Barrier ----

grpc::ServerUnaryReactor* RendezvousService::Barrier(
    grpc::CallbackServerContext* context, const proto::BarrierRequest* request,
    proto::BarrierResponse*) {
  auto* held = new GrpcHeld(this);
  HandleBarrier(held, *request, CallerOf(*context, options_.cert_identity));
  return held;
}

void RendezvousService::HandleBarrier(Held* held,
                                      const proto::BarrierRequest& r,
                                      const Caller& caller) {
  Start(held, Held::Kind::kBarrier, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    grpc::Status bound =
        CheckCertLocked("barrier", r.node(), caller.cert_names);
    return bound.ok() ? AdmitBarrier(held, r, caller.credential)
                      : Finishes{{held, bound}};
  });
}

RendezvousService::Finishes RendezvousService::AdmitBarrier(
    Held* held, const proto::BarrierRequest& r,
    const std::optional<std::string>& presented) {
  auto it = nodes_.find(r.node());
  if (!IsWorkerNode(r.node()) || it == nodes_.end() || it->second.down) {
    return {{held, Error(grpc::StatusCode::FAILED_PRECONDITION,
                         absl::StrCat("node ", r.node(),
                                      " is not a live worker of this job"))}};
  }
  if (grpc::Status who =
          CheckCaller("barrier", r.node(), it->second, presented);
      !who.ok()) {
    return {{held, who}};
  }
  if (r.name().size() > kMaxNameBytes) {
    return {
        {held, Error(grpc::StatusCode::INVALID_ARGUMENT,
                     absl::StrCat("a barrier name of ", r.name().size(),
                                  " bytes (at most ", kMaxNameBytes, ")"))}};
  }
  auto existing = barriers_.find(r.name());
  if (existing != barriers_.end() && existing->second.done)
    return {{held, grpc::Status::OK}};
  // The last arrival is answered at once, never refused for room (else
  // held calls could keep a barrier from ever finishing).
  const bool completes =
      existing != barriers_.end() && AllArrivedBut(existing->second, r.node());
  if (grpc::Status room = CheckRoomToWait(); !completes && !room.ok())
    return {{held, room}};
  BarrierState* b = BarrierFor(r.name());
  if (b == nullptr) {
    return {{held, Exhausted(absl::StrCat("barrier '", r.name(),
                                          "': ", barriers_.size(),
                                          " barriers are waited at already"),
                             "max_barriers", options_.limits.max_barriers)}};
  }
  b->arrived.insert(r.node());
  held->node = r.node();
  held->barrier = r.name();
  held->timeout_ms = HoldMs(r.timeout_ms(), kDefaultWaitMs);
  Hold(held, Now() + absl::Milliseconds(held->timeout_ms));
  b->waiters.push_back(held->id);
  return CheckBarriers();
}

RendezvousService::BarrierState* RendezvousService::BarrierFor(
    const std::string& name) {
  auto it = barriers_.find(name);
  if (it != barriers_.end()) return &it->second;
  const size_t max = static_cast<size_t>(options_.limits.max_barriers);
  // Forget barriers nobody waits at: finished ones first, then abandoned.
  for (bool done : {true, false}) {
    for (auto b = barriers_.begin();
         b != barriers_.end() && barriers_.size() >= max;) {
      if (b->second.waiters.empty() && b->second.done == done) {
        barriers_.erase(b++);
      } else {
        ++b;
      }
    }
  }
  if (barriers_.size() >= max) return nullptr;
  return &barriers_[name];
}

bool RendezvousService::AllArrivedBut(const BarrierState& b,
                                      uint64_t node) const {
  for (const auto& [id, n] : nodes_) {
    if (IsWorkerNode(id) && !n.down && id != node && !b.arrived.contains(id))
      return false;
  }
  return true;
}

int64_t RendezvousService::ClientCount() const {
  int64_t n = 0;
  for (const auto& [node, info] : nodes_) {
    if (!IsWorkerNode(node)) ++n;
  }
  return n;
}

std::string RendezvousService::MissingFromBarrier(const BarrierState& b) const {
  std::vector<std::string> missing;
  for (const auto& [node, n] : nodes_) {
    if (IsWorkerNode(node) && !n.down && !b.arrived.contains(node)) {
      missing.push_back(absl::StrCat(node, " (", n.name, ")"));
    }
  }
  std::sort(missing.begin(), missing.end());
  return absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(missing, ", "));
}

RendezvousService::Finishes RendezvousService::CheckBarriers() {
  Finishes finishes;
  for (auto& [name, b] : barriers_) {
    if (b.done || b.waiters.empty()) continue;
    bool all = true;
    for (const auto& [node, n] : nodes_) {
      if (IsWorkerNode(node) && !n.down && !b.arrived.contains(node))
        all = false;
    }
    if (!all) continue;
    b.done = true;
    std::vector<uint64_t> waiters = b.waiters;
    for (uint64_t id : waiters)
      finishes.emplace_back(Take(id), grpc::Status::OK);
  }
  return finishes;
}

// ---- Timeouts and cancellation ----

void RendezvousService::Expire(uint64_t id) {
  Finishes finishes;
  {
    absl::MutexLock lock(&mu_);
    Held* held = Take(id);
    if (held == nullptr) return;
    held->timer = 0;  // Firing now; nothing to cancel.
    grpc::Status status = grpc::Status::OK;
    if (held->replacement) {
      status =
          Error(grpc::StatusCode::DEADLINE_EXCEEDED,
                absl::StrCat(
                    "rendezvous: ",
                    absl::StrJoin(
                        NotSeenBy(held->since, WorkerNode(held->rank)), ", "),
                    " did not see ", slots_[held->rank].info.name(),
                    " rejoin within ", held->timeout_ms, " ms"));
    } else if (held->kind == Held::Kind::kJoin) {
      status = Error(
          grpc::StatusCode::DEADLINE_EXCEEDED,
          absl::StrCat("rendezvous: ", MissingRanks(), " of ", slots_.size(),
                       " did not join within ", held->timeout_ms, " ms"));
      // Let a restarted process take the rank.
      finishes = ReleaseRank(held);
    } else if (held->kind == Held::Kind::kBarrier) {
      status = Error(
          grpc::StatusCode::DEADLINE_EXCEEDED,
          absl::StrCat("barrier '", held->barrier,
                       "': ", MissingFromBarrier(barriers_[held->barrier]),
                       " did not arrive within ", held->timeout_ms, " ms"));
    }
    finishes.emplace_back(held, status);
  }
  FinishAll(std::move(finishes));
}

void RendezvousService::Cancelled(uint64_t id) {
  Finishes finishes;
  {
    absl::MutexLock lock(&mu_);
    Held* held = Take(id);
    if (held == nullptr) return;
    if (held->kind == Held::Kind::kJoin && !complete_) {
      finishes = ReleaseRank(held);
    }
    // A cancelled held poll (the poller's connection broke, or the poller
    // gave up on it) is only a suspicion: a loaded or briefly cut-off node
    // reconnects and polls again. Take() noted the time; Sweep declares the
    // node dead if no poll follows within heartbeat_timeout.
    finishes.emplace_back(held,
                          Error(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  FinishAll(std::move(finishes));
}

}  // namespace ferry
