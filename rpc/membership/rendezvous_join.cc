// Join: a worker takes its rank, the job forms, a replacement rejoins.
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
#include "rpc/membership/rendezvous_internal.h"
#include "rpc/membership/rendezvous_service.h"
#include "rpc/value/value.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

using rendezvous_internal::CallerOf;
using rendezvous_internal::Cut;
using rendezvous_internal::Error;
using rendezvous_internal::HoldMs;
using rendezvous_internal::kDefaultWaitMs;
using rendezvous_internal::SecretWith;

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
  const int world = std::max(options_.world_size, 1);  // state_.slots.size()
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
  const int world = static_cast<int>(state_.slots.size());
  const int rank = r.worker().rank();
  const Slot& slot = state_.slots[rank];
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
      return Error(grpc::StatusCode::ALREADY_EXISTS,
                   absl::StrCat("rank ", rank, " is already taken by ",
                                slot.info.name(), " (pid ", slot.info.pid(),
                                " at ", slot.info.address(), ")",
                                state_.complete
                                    ? ", which is alive (its heartbeat poll is "
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
    if (k != rank && state_.slots[k].joined &&
        state_.slots[k].info.name() == r.worker().name()) {
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
                                  state_.slots[r.worker().rank()].info.name(),
                                  ": asking it whether it is alive"))}};
  }
  grpc::Status bad = CheckJoin(r);
  if (!bad.ok()) return {{held, bad}};
  const int rank = r.worker().rank();
  const std::string& key = r.worker().public_key();
  if (state_.complete && !Holds(state_.slots[rank], r.incarnation(), key)) {
    return AdmitReplacement(held, r, secret);
  }
  // A join that completes the job is answered at once, never refused for
  // room (else held joins could keep the job from forming). Checked before
  // the rank is taken: a join not held must not keep it.
  bool completes = true;
  for (int k = 0; k < static_cast<int>(state_.slots.size()); ++k) {
    if (k != rank && !state_.slots[k].joined) completes = false;
  }
  if (grpc::Status room = CheckRoomToWait();
      !state_.complete && !completes && !room.ok()) {
    return {{held, room}};
  }
  Slot& slot = state_.slots[rank];
  if (!slot.joined) slot = SlotFor(r, secret);
  held->rank = rank;
  held->incarnation = r.incarnation();
  held->public_key = key;
  held->timeout_ms = HoldMs(r.timeout_ms(), kDefaultWaitMs);
  if (state_.complete) {  // A retried join after completion (the holder's own).
    FillJoin(slot, held->join);
    return {{held, grpc::Status::OK}};
  }
  Hold(held, Now() + absl::Milliseconds(held->timeout_ms));
  bool all = std::all_of(state_.slots.begin(), state_.slots.end(),
                         [](const Slot& s) { return s.joined; });
  return all ? CompleteRendezvous() : Finishes{};
}

RendezvousService::Finishes RendezvousService::ReleaseRank(Held* gone) {
  Slot& slot = state_.slots[gone->rank];
  // Only the holder's join frees the rank (the master's own stays).
  if (gone->rank == 0 || !Holds(slot, gone->incarnation, gone->public_key)) {
    return {};
  }
  slot = Slot{};
  // Any other join held for the rank was the same incarnation's: answered
  // now, it can never be answered as the rank's next holder (issue 25: a
  // lingering twin of an expired join got the next holder's credential).
  std::vector<uint64_t> twins;
  for (const auto& [id, held] : state_.held) {
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
  state_.complete = true;
  const absl::Time now = Now();
  for (const Slot& s : state_.slots) {
    const uint64_t node = WorkerNode(s.info.rank());
    Node& n = state_.nodes[node];
    n.name = s.info.name();
    n.incarnation = s.incarnation;
    n.public_key = s.info.public_key();
    n.expected = ExpectedFrom(node, n.public_key, s.secret);
    n.last_seen = now;
  }
  std::vector<uint64_t> joins;
  for (const auto& [id, held] : state_.held) {
    if (held->kind == Held::Kind::kJoin) joins.push_back(id);
  }
  return AnswerJoins(joins, "is held by another incarnation");
}

RendezvousService::Finishes RendezvousService::AnswerJoins(
    const std::vector<uint64_t>& ids, absl::string_view lost) {
  Finishes finishes;
  for (uint64_t id : ids) {
    Held* held = Take(id);
    const Slot& slot = state_.slots[held->rank];
    // Only the incarnation holding the slot gets the job's answer.
    if (!Holds(slot, held->incarnation, held->public_key)) {
      finishes.emplace_back(held, Error(grpc::StatusCode::ABORTED,
                                        absl::StrCat("rendezvous: rank ",
                                                     held->rank, " ", lost)));
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
  if (!state_.complete || rank <= 0 ||
      rank >= static_cast<int>(state_.slots.size()) ||
      Holds(state_.slots[rank], r.incarnation(), r.worker().public_key()) ||
      Replaceable(rank)) {
    return nullptr;
  }
  auto it = state_.nodes.find(WorkerNode(rank));
  if (it == state_.nodes.end() || it->second.held_poll == 0 ||
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
  if (!state_.complete || rank == 0) return std::nullopt;
  auto it = state_.nodes.find(WorkerNode(rank));
  if (it == state_.nodes.end() || it->second.down ||
      it->second.held_poll != 0) {
    return std::nullopt;
  }
  return Now() - it->second.last_seen;
}

bool RendezvousService::Replaceable(int rank) const {
  if (!state_.complete || rank == 0) return false;
  auto it = state_.nodes.find(WorkerNode(rank));
  return it != state_.nodes.end() && it->second.down;
}

RendezvousService::Finishes RendezvousService::AdmitReplacement(
    Held* held, const proto::JoinRequest& r, const std::string& secret) {
  if (grpc::Status room = CheckRoomToWait(); !room.ok()) {
    return {{held, room}};
  }
  const int rank = r.worker().rank();
  const uint64_t node = WorkerNode(rank);
  Slot& slot = state_.slots[rank];
  const uint64_t generation = slot.info.generation() + 1;
  slot = SlotFor(r, secret);
  slot.info.set_generation(generation);
  // The old incarnation's state goes: a new key, contact from now.
  Node& n = state_.nodes[node];
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
  state_.events.push_back(std::move(event));
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
  for (const auto& [node, n] : state_.nodes) {
    if (IsWorkerNode(node) && node != except && !n.down && n.seen <= event) {
      behind.push_back(n.name);
    }
  }
  std::sort(behind.begin(), behind.end());
  return behind;
}

RendezvousService::Finishes RendezvousService::CheckReplacements() {
  std::vector<uint64_t> ready;
  for (const auto& [id, held] : state_.held) {
    if (held->replacement &&
        NotSeenBy(held->since, WorkerNode(held->rank)).empty()) {
      ready.push_back(id);
    }
  }
  return AnswerJoins(ready, "was taken by another incarnation");
}

void RendezvousService::FillGone(
    uint64_t self,
    google::protobuf::RepeatedPtrField<proto::NodeEvent>* out) const {
  for (int rank = 0; rank < static_cast<int>(state_.slots.size()); ++rank) {
    const uint64_t node = WorkerNode(rank);
    auto it = state_.nodes.find(node);
    if (node == self || it == state_.nodes.end() || !it->second.down) continue;
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
  for (const auto& [node, n] : state_.nodes) {
    if (IsWorkerNode(node) || n.down) continue;
    proto::ClientKey* c = out->add_clients();
    c->set_node(node);
    c->set_public_key(n.public_key);
  }
  out->set_clients_end(kFirstClientNode + state_.next_client);
}

void RendezvousService::FillDirectory(
    google::protobuf::RepeatedPtrField<proto::WorkerInfo>* out) const {
  out->Clear();
  for (const Slot& s : state_.slots) *out->Add() = s.info;
}

std::string RendezvousService::MissingRanks() const {
  std::vector<int> missing;
  for (size_t k = 0; k < state_.slots.size(); ++k) {
    if (!state_.slots[k].joined) missing.push_back(static_cast<int>(k));
  }
  return absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(missing, ", "));
}

// ---- Clients ----

}  // namespace ferry
