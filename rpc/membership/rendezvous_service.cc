#include "rpc/membership/rendezvous_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "rpc/authenticator.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"
#include "rpc/cert_identity.h"
#include "rpc/grpc_status.h"
#include "rpc/membership/directory.h"
#include "rpc/value/value.h"

namespace ferry {

class RendezvousService::Held final : public grpc::ServerUnaryReactor {
 public:
  enum class Kind { kJoin, kPoll, kBarrier, kOther };

  Held(RendezvousService* service, Kind kind) : service_(service), kind(kind) {}

  void OnCancel() override { service_->Cancelled(id); }
  void OnDone() override { delete this; }

  RendezvousService* const service_;
  const Kind kind;
  // Written under the service's mu_ while the call is held.
  uint64_t id = 0;
  Timers::TimerId timer = 0;
  int rank = -1;
  uint64_t node = 0;
  uint64_t incarnation = 0;
  int64_t since = 0;  // Polls; a replacement's join: its event's number.
  int64_t timeout_ms = 0;
  // A join admitted as a replacement, held until every live worker has
  // seen it arrive.
  bool replacement = false;
  std::string barrier;
  proto::JoinResponse* join = nullptr;
  proto::PollResponse* poll = nullptr;
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

// The digest of the credential the call presented, if any.
std::optional<std::string> PresentedDigest(
    const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kCredentialHeader);
  if (it == metadata.end()) return std::nullopt;
  return CredentialDigest(std::string(it->second.data(), it->second.size()));
}

// The names the call's client certificate holds, if they are `checked`.
std::vector<std::string> CertNames(bool checked,
                                   const grpc::CallbackServerContext& context) {
  return checked ? PeerCertNames(context) : std::vector<std::string>();
}

// A random incarnation for a client: its polls cannot be guessed.
uint64_t RandomIncarnation() {
  uint64_t incarnation = 0;
  // NewCredential() is hex from the CSPRNG; 16 digits are 64 bits.
  (void)absl::SimpleHexAtoi(NewCredential().substr(0, 16), &incarnation);
  return incarnation;
}

}  // namespace

absl::Time RendezvousService::Now() const { return timers_->clock()->Now(); }

RendezvousService::RendezvousService(RendezvousOptions options, Timers* timers)
    : BoundedService(ServiceOf<proto::JoinRequest>("Rendezvous"),
                     options.limits, "worker0"),
      options_(options),
      timers_(timers),
      client_key_(NewCredential()) {
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
    held->Finish(status);
  }
}

grpc::ServerUnaryReactor* RendezvousService::Start(
    grpc::CallbackServerContext* /*context*/, Held* held,
    const std::function<Finishes()>& admit) {
  Finishes finishes;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      finishes.emplace_back(held, Error(grpc::StatusCode::UNAVAILABLE,
                                        "the master is shutting down"));
    } else {
      finishes = admit();
    }
  }
  FinishAll(std::move(finishes));
  return held;
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
  auto* held = new Held(this, Held::Kind::kJoin);
  held->join = response;
  // Before the rank is taken: a certificate for another worker takes none.
  grpc::Status bound = grpc::Status::OK;
  if (options_.cert_identity) {
    const int rank = request->worker().rank();
    absl::Status fits =
        Annotate(CheckNameFitsRank(request->worker().name(), rank), "Join");
    if (fits.ok() && rank >= 0) {
      fits = CheckWorkerCert(PeerCertNames(*context), WorkerNode(rank), "Join");
    }
    bound = ToGrpcStatus(fits);
  }
  return Start(context, held, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return bound.ok() ? AdmitJoin(held, *request) : Finishes{{held, bound}};
  });
}

grpc::Status RendezvousService::CheckJoin(const proto::JoinRequest& r) const {
  const int world = static_cast<int>(slots_.size());
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
  if (r.worker().name().empty()) {
    return Error(grpc::StatusCode::INVALID_ARGUMENT, "worker name is empty");
  }
  const Slot& slot = slots_[rank];
  if (slot.joined && slot.incarnation != r.incarnation()) {
    if (!Replaceable(rank)) {
      return Error(
          grpc::StatusCode::ALREADY_EXISTS,
          absl::StrCat("rank ", rank, " is already taken by ", slot.info.name(),
                       " (pid ", slot.info.pid(), " at ", slot.info.address(),
                       ")",
                       complete_ ? ", which is alive: a rank is taken over "
                                   "only once its holder died or left"
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

RendezvousService::Finishes RendezvousService::AdmitJoin(
    Held* held, const proto::JoinRequest& r) {
  grpc::Status bad = CheckJoin(r);
  if (!bad.ok()) return {{held, bad}};
  const int rank = r.worker().rank();
  if (complete_ && slots_[rank].incarnation != r.incarnation()) {
    return AdmitReplacement(held, r);
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
  if (!slot.joined) {
    slot = Slot{true, r.worker(), r.incarnation(), NewCredential()};
    slot.info.set_credential_digest(CredentialDigest(slot.credential));
  }
  held->rank = rank;
  held->incarnation = r.incarnation();
  held->timeout_ms = HoldMs(r.timeout_ms(), kDefaultWaitMs);
  if (complete_) {  // A retried join after completion.
    FillJoin(slot, held->join);
    return {{held, grpc::Status::OK}};
  }
  Hold(held, Now() + absl::Milliseconds(held->timeout_ms));
  bool all = std::all_of(slots_.begin(), slots_.end(),
                         [](const Slot& s) { return s.joined; });
  return all ? CompleteRendezvous() : Finishes{};
}

RendezvousService::Finishes RendezvousService::CompleteRendezvous() {
  complete_ = true;
  const absl::Time now = Now();
  for (const Slot& s : slots_) {
    Node& n = nodes_[WorkerNode(s.info.rank())];
    n.name = s.info.name();
    n.incarnation = s.incarnation;
    n.credential_digest = s.info.credential_digest();
    n.last_seen = now;
  }
  Finishes finishes;
  std::vector<uint64_t> joins;
  for (const auto& [id, held] : held_) {
    if (held->kind == Held::Kind::kJoin) joins.push_back(id);
  }
  for (uint64_t id : joins) {
    Held* held = Take(id);
    FillJoin(slots_[held->rank], held->join);
    finishes.emplace_back(held, grpc::Status::OK);
  }
  return finishes;
}

bool RendezvousService::Replaceable(int rank) const {
  if (!complete_ || rank == 0) return false;
  auto it = nodes_.find(WorkerNode(rank));
  return it != nodes_.end() && it->second.down;
}

RendezvousService::Finishes RendezvousService::AdmitReplacement(
    Held* held, const proto::JoinRequest& r) {
  if (grpc::Status room = CheckRoomToWait(); !room.ok()) {
    return {{held, room}};
  }
  const int rank = r.worker().rank();
  const uint64_t node = WorkerNode(rank);
  Slot& slot = slots_[rank];
  const uint64_t generation = slot.info.generation() + 1;
  slot = Slot{true, r.worker(), r.incarnation(), NewCredential()};
  slot.info.set_credential_digest(CredentialDigest(slot.credential));
  slot.info.set_generation(generation);
  // The old incarnation's state goes: a fresh credential, contact from now.
  Node& n = nodes_[node];
  n = Node{};
  n.name = slot.info.name();
  n.incarnation = slot.incarnation;
  n.credential_digest = slot.info.credential_digest();
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
  // incarnation's address and credential, and counts it alive, so its
  // first calls and collectives are not refused or named after the old one.
  held->rank = rank;
  held->incarnation = r.incarnation();
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
    FillJoin(slots_[held->rank], held->join);
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
  out->set_credential(slot.credential);
  out->set_client_key(client_key_);
  out->clear_gone();
  FillGone(WorkerNode(slot.info.rank()), out->mutable_gone());
  out->set_events_end(EventsEnd());
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
  auto* held = new Held(this, Held::Kind::kOther);
  return Start(context, held, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS -> Finishes {
    if (!complete_) {
      return {
          {held, Error(grpc::StatusCode::UNAVAILABLE,
                       absl::StrCat("the job is not formed yet (waiting for ",
                                    MissingRanks(), ")"))}};
    }
    if (ClientCount() >= options_.limits.max_clients) {
      return {{held, Exhausted(absl::StrCat("the master already knows ",
                                            ClientCount(), " clients"),
                               "max_clients", options_.limits.max_clients)}};
    }
    uint64_t number = next_client_++;
    uint64_t node = kFirstClientNode + number;
    Node& n = nodes_[node];
    n.name = absl::StrCat("client", number);
    if (!request->description().empty()) {
      absl::StrAppend(&n.name, " (", Cut(request->description()), ")");
    }
    n.last_seen = Now();
    n.incarnation = RandomIncarnation();
    const std::string credential = ClientCredential(client_key_, node);
    n.credential_digest = CredentialDigest(credential);
    response->set_node(node);
    response->set_credential(credential);
    response->set_incarnation(n.incarnation);
    FillDirectory(response->mutable_workers());
    FillGone(node, response->mutable_gone());
    response->set_events_end(EventsEnd());
    n.seen = EventsEnd();
    return {{held, grpc::Status::OK}};
  });
}

// ---- Poll ----

grpc::ServerUnaryReactor* RendezvousService::Poll(
    grpc::CallbackServerContext* context, const proto::PollRequest* request,
    proto::PollResponse* response) {
  auto* held = new Held(this, Held::Kind::kPoll);
  held->poll = response;
  const std::optional<std::string> presented = PresentedDigest(*context);
  const std::vector<std::string> cert_names =
      CertNames(options_.cert_identity, *context);
  return Start(context, held, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    grpc::Status bound = CheckCertLocked("poll", request->node(), cert_names);
    return bound.ok() ? AdmitPoll(held, *request, presented)
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

grpc::Status RendezvousService::CheckCaller(
    absl::string_view what, uint64_t node, const Node& n,
    const std::optional<std::string>& presented) const {
  if (presented.has_value() && *presented == n.credential_digest) {
    return grpc::Status::OK;
  }
  if (!presented.has_value() && !options_.require_identity) {
    return grpc::Status::OK;
  }
  std::string caller = "presented no node credential";
  if (presented.has_value()) {
    caller = "presented a credential of no node of this job";
    for (const auto& [other, o] : nodes_) {
      if (o.credential_digest == *presented) {
        caller = absl::StrCat("is ", IdentityLabel(other));
      }
    }
  }
  return Error(grpc::StatusCode::PERMISSION_DENIED,
               absl::StrCat(what, ": node claims ", IdentityLabel(node),
                            " but the call ", caller));
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
  if (grpc::Status who = CheckCaller("poll", r.node(), n, presented);
      !who.ok()) {
    return {{held, who}};
  }
  if (n.incarnation != r.incarnation()) {
    return {{held, Error(grpc::StatusCode::FAILED_PRECONDITION,
                         absl::StrCat(n.name, ": stale incarnation"))}};
  }
  if (n.down) {
    return {
        {held, Error(grpc::StatusCode::FAILED_PRECONDITION,
                     absl::StrCat(n.name, " was declared gone by the master: ",
                                  n.down_reason))}};
  }
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

RendezvousService::Finishes RendezvousService::ReleasePolls() {
  Finishes finishes;
  std::vector<uint64_t> polls;
  for (const auto& [node, n] : nodes_) {
    if (n.held_poll != 0) polls.push_back(n.held_poll);
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
    if (!IsWorkerNode(e.node())) nodes_.erase(e.node());
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
  auto* held = new Held(this, Held::Kind::kBarrier);
  const std::optional<std::string> presented = PresentedDigest(*context);
  const std::vector<std::string> cert_names =
      CertNames(options_.cert_identity, *context);
  return Start(context, held, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    grpc::Status bound =
        CheckCertLocked("barrier", request->node(), cert_names);
    return bound.ok() ? AdmitBarrier(held, *request, presented)
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
      // Let a restarted process take the rank (the master's own stays).
      if (held->rank != 0) slots_[held->rank] = Slot{};
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
      slots_[held->rank] = Slot{};
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
