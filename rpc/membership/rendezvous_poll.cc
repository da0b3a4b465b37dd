// Poll: a node's heartbeat and its view of events; who a caller is.
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
using rendezvous_internal::Error;
using rendezvous_internal::kMaxPollHoldMs;

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
  if (!state_.nodes.contains(node))
    return grpc::Status::OK;  // Answered unknown.
  return ToGrpcStatus(CheckWorkerCert(cert_names, node, what));
}

std::optional<uint64_t> RendezvousService::Presenter(
    const std::string& presented) const {
  std::optional<PresentedCredential> c = ParseCredential(presented);
  if (!c.has_value()) return std::nullopt;
  auto it = state_.nodes.find(c->node);
  if (it == state_.nodes.end() || it->second.expected.empty() ||
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
    const proto::WorkerInfo& now = state_.slots[node].info;
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
  auto it = state_.nodes.find(r.node());
  if (it == state_.nodes.end()) {
    return {{held, state_.complete
                       ? Error(grpc::StatusCode::NOT_FOUND,
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
  held->since = std::max<int64_t>(r.since(), state_.events_base);
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
  if (!state_.events.empty()) TrimEvents();
  return finishes;
}

RendezvousService::Finishes RendezvousService::ReleasePolls(bool workers_only) {
  Finishes finishes;
  std::vector<uint64_t> polls;
  for (const auto& [node, n] : state_.nodes) {
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

}  // namespace ferry
