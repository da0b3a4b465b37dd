// The master's held calls, event log and sweeps (rendezvous_service.h); each
// RPC is a file of its own: rendezvous_join.cc, _clients.cc, _poll.cc,
// _barrier.cc.
#include "rpc/membership/rendezvous_service.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
#include "rpc/value/value.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

using rendezvous_internal::Error;
using rendezvous_internal::Exhausted;

absl::Time RendezvousService::Now() const { return timers_->clock()->Now(); }

RendezvousService::RendezvousService(RendezvousOptions options, Timers* timers)
    : BoundedService(ServiceOf<proto::JoinRequest>("Rendezvous"),
                     options.limits, "worker0"),
      options_(options),
      timers_(timers),
      key_(options_.key != nullptr ? options_.key : NodeKey::Generate()),
      own_probe_(options_.listener_probe != nullptr
                     ? nullptr
                     : std::make_unique<TcpListenerProbe>(timers)),
      probe_(options_.listener_probe != nullptr ? options_.listener_probe
                                                : own_probe_.get()) {
  Bound(&RendezvousService::Join, "Join");
  Bound(&RendezvousService::RegisterClient, "RegisterClient");
  Bound(&RendezvousService::Poll, "Poll");
  Bound(&RendezvousService::Barrier, "Barrier");
  absl::MutexLock lock(&mu_);
  state_.slots.resize(std::max(options_.world_size, 1));
  state_.sweep_timer =
      timers_->RunAfter(options_.sweep_interval, [this] { Sweep(); });
}

RendezvousService::~RendezvousService() { Shutdown(); }

void RendezvousService::Shutdown() {
  Finishes finishes;
  Timers::TimerId sweep;
  {
    absl::MutexLock lock(&mu_);
    state_.stopping = true;
    sweep = state_.sweep_timer;
    state_.sweep_timer = 0;
    std::vector<uint64_t> ids;
    for (const auto& [id, held] : state_.held) ids.push_back(id);
    for (uint64_t id : ids) {
      Held* held = Take(id);
      // Joiners still waiting get the verdict, not a vague "unavailable".
      grpc::Status status =
          held->kind == Held::Kind::kJoin && !held->replacement
              ? Error(grpc::StatusCode::DEADLINE_EXCEEDED,
                      absl::StrCat("rendezvous: ", MissingRanks(), " of ",
                                   state_.slots.size(),
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
    if (state_.stopping) {
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
  auto it = state_.held.find(id);
  if (it == state_.held.end()) return nullptr;
  Held* held = it->second;
  state_.held.erase(it);
  if (held->kind != Held::Kind::kPoll) --state_.held_waits;
  if (held->kind == Held::Kind::kPoll) {
    auto node = state_.nodes.find(held->node);
    if (node != state_.nodes.end() && node->second.held_poll == id) {
      node->second.held_poll = 0;
      // Its connection was open all along: alive until now.
      node->second.last_seen = Now();
    }
  } else if (held->kind == Held::Kind::kBarrier) {
    // A barrier with waiters is never forgotten: it is there.
    auto barrier = state_.barriers.find(held->barrier);
    if (barrier != state_.barriers.end()) {
      auto& waiters = barrier->second.waiters;
      waiters.erase(std::remove(waiters.begin(), waiters.end(), id),
                    waiters.end());
    }
  }
  return held;
}

int64_t RendezvousService::held_waits() const {
  absl::MutexLock lock(&mu_);
  return state_.held_waits;
}

int64_t RendezvousService::held_polls() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(state_.held.size()) - state_.held_waits;
}

grpc::Status RendezvousService::CheckRoomToWait() const {
  const int64_t max = options_.limits.max_held_calls;
  if (state_.held_waits < max) return grpc::Status::OK;
  return Exhausted(absl::StrCat("the master already holds ", state_.held_waits,
                                " joins and barriers"),
                   "max_held_calls", max);
}

void RendezvousService::Hold(Held* held, absl::Time until) {
  held->id = state_.next_held++;
  state_.held.emplace(held->id, held);
  if (held->kind != Held::Kind::kPoll) ++state_.held_waits;
  uint64_t id = held->id;
  held->timer = timers_->RunAt(until, [this, id] { Expire(id); });
}

// ---- Join ----

void RendezvousService::FillEvents(int64_t since,
                                   proto::PollResponse* out) const {
  out->set_first(std::max(since, state_.events_base));
  for (int64_t k = out->first(); k < EventsEnd(); ++k) {
    *out->add_events() = state_.events[k - state_.events_base];
  }
}

void RendezvousService::TrimEvents() {
  int64_t seen_by_all = EventsEnd();
  for (const auto& [node, n] : state_.nodes) {
    if (!n.down) seen_by_all = std::min(seen_by_all, n.seen);
  }
  // Workers stay known (for fencing); departed clients are forgotten once
  // their event is trimmed.
  while (state_.events_base < seen_by_all) {
    const proto::NodeEvent& e = state_.events.front();
    if (!IsWorkerNode(e.node()) && e.kind() != proto::NodeEvent::REGISTERED) {
      state_.nodes.erase(e.node());
    }
    state_.events.pop_front();
    ++state_.events_base;
  }
}

RendezvousService::Finishes RendezvousService::MarkDown(
    uint64_t node, proto::NodeEvent::Kind kind, std::string reason) {
  Node& n = state_.nodes[node];
  if (n.down) return {};
  n.down = true;
  n.down_kind = kind;
  n.down_reason = reason;
  if (!n.peer.empty()) {  // A client: no longer counted for its connection.
    auto peer = state_.clients_by_peer.find(n.peer);
    if (peer != state_.clients_by_peer.end() && --peer->second <= 0) {
      state_.clients_by_peer.erase(peer);
    }
  }
  proto::NodeEvent event;
  event.set_node(node);
  event.set_name(n.name);
  event.set_kind(kind);
  event.set_reason(std::move(reason));
  state_.events.push_back(std::move(event));
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
  std::vector<Question> questions;
  {
    absl::MutexLock lock(&mu_);
    if (state_.stopping) return;
    const absl::Time now = Now();
    std::vector<uint64_t> dead;
    for (const auto& [node, n] : state_.nodes) {
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
    for (auto& [node, n] : state_.nodes) {
      if (!n.down && n.held_poll == 0 && now - n.last_seen > kAskAfter) {
        if (std::optional<Question> q = QuestionFor(node)) {
          questions.push_back(*std::move(q));
        }
      }
    }
    state_.sweep_timer =
        timers_->RunAfter(options_.sweep_interval, [this] { Sweep(); });
  }
  FinishAll(std::move(finishes));
  for (Question& q : questions) AskIfGone(std::move(q));
}

// ---- Barrier ----

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
                    " did not see ", state_.slots[held->rank].info.name(),
                    " rejoin within ", held->timeout_ms, " ms"));
    } else if (held->kind == Held::Kind::kJoin) {
      status = Error(grpc::StatusCode::DEADLINE_EXCEEDED,
                     absl::StrCat("rendezvous: ", MissingRanks(), " of ",
                                  state_.slots.size(), " did not join within ",
                                  held->timeout_ms, " ms"));
      // Let a restarted process take the rank.
      finishes = ReleaseRank(held);
    } else if (held->kind == Held::Kind::kBarrier) {
      status = Error(
          grpc::StatusCode::DEADLINE_EXCEEDED,
          absl::StrCat("barrier '", held->barrier, "': ",
                       MissingFromBarrier(state_.barriers[held->barrier]),
                       " did not arrive within ", held->timeout_ms, " ms"));
    }
    finishes.emplace_back(held, status);
  }
  FinishAll(std::move(finishes));
}

void RendezvousService::Cancelled(uint64_t id) {
  Finishes finishes;
  std::optional<Question> question;
  {
    absl::MutexLock lock(&mu_);
    Held* held = Take(id);
    if (held == nullptr) return;
    if (held->kind == Held::Kind::kJoin && !state_.complete) {
      finishes = ReleaseRank(held);
    }
    // A cancelled held poll (the poller's connection broke, or the poller
    // gave up on it) is only a suspicion: a loaded or briefly cut-off node
    // reconnects and polls again. Take() noted the time; Sweep declares the
    // node dead if no poll follows within heartbeat_timeout — unless the
    // worker's host says sooner that its process is gone.
    if (held->kind == Held::Kind::kPoll) question = QuestionFor(held->node);
    finishes.emplace_back(held,
                          Error(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  FinishAll(std::move(finishes));
  if (question.has_value()) AskIfGone(*std::move(question));
}

std::optional<RendezvousService::Question> RendezvousService::QuestionFor(
    uint64_t node) {
  // Rank 0 is this process; clients serve nothing to ask about.
  if (node == WorkerNode(0) || !IsWorkerNode(node) ||
      node >= state_.slots.size()) {
    return std::nullopt;
  }
  auto it = state_.nodes.find(node);
  if (it == state_.nodes.end()) return std::nullopt;
  Node& n = it->second;
  const absl::Time now = Now();
  if (n.down || n.held_poll != 0 || now - n.asked_at < kAskAfter) {
    return std::nullopt;
  }
  n.asked_at = now;
  return Question{node, n.incarnation, state_.slots[node].info.address()};
}

void RendezvousService::AskIfGone(Question question) {
  // The answer comes on the timers, which stop only after Shutdown (the
  // agent's teardown order), as Sweep's do: `this` outlives it.
  const std::string address = question.address;
  probe_->Probe(
      address, [this, question = std::move(question)](Listener answer) {
        Answered(question.node, question.incarnation, question.address, answer);
      });
}

void RendezvousService::Answered(uint64_t node, uint64_t incarnation,
                                 const std::string& address, Listener answer) {
  if (answer != Listener::kRefused) return;  // The heartbeat decides.
  Finishes finishes;
  {
    absl::MutexLock lock(&mu_);
    if (state_.stopping) return;
    auto it = state_.nodes.find(node);
    if (it == state_.nodes.end()) return;
    const Node& n = it->second;
    // Polled again meanwhile (alive after all), replaced, or gone already.
    if (n.down || n.held_poll != 0 || n.incarnation != incarnation) return;
    finishes = MarkDown(
        node, proto::NodeEvent::DEAD,
        absl::StrCat("its process is gone: its heartbeat connection broke "
                     "and its host refuses connections to ",
                     address));
  }
  FinishAll(std::move(finishes));
}

}  // namespace ferry
