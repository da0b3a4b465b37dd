// Barrier: named barriers of the job's nodes.
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
using rendezvous_internal::Exhausted;
using rendezvous_internal::HoldMs;
using rendezvous_internal::kDefaultWaitMs;

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
  auto it = state_.nodes.find(r.node());
  if (!IsWorkerNode(r.node()) || it == state_.nodes.end() || it->second.down) {
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
  auto existing = state_.barriers.find(r.name());
  if (existing != state_.barriers.end() && existing->second.done)
    return {{held, grpc::Status::OK}};
  // The last arrival is answered at once, never refused for room (else
  // held calls could keep a barrier from ever finishing).
  const bool completes = existing != state_.barriers.end() &&
                         AllArrivedBut(existing->second, r.node());
  if (grpc::Status room = CheckRoomToWait(); !completes && !room.ok())
    return {{held, room}};
  BarrierState* b = BarrierFor(r.name());
  if (b == nullptr) {
    return {{held, Exhausted(absl::StrCat("barrier '", r.name(),
                                          "': ", state_.barriers.size(),
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
  auto it = state_.barriers.find(name);
  if (it != state_.barriers.end()) return &it->second;
  const size_t max = static_cast<size_t>(options_.limits.max_barriers);
  // Forget barriers nobody waits at: finished ones first, then abandoned.
  for (bool done : {true, false}) {
    for (auto b = state_.barriers.begin();
         b != state_.barriers.end() && state_.barriers.size() >= max;) {
      if (b->second.waiters.empty() && b->second.done == done) {
        state_.barriers.erase(b++);
      } else {
        ++b;
      }
    }
  }
  if (state_.barriers.size() >= max) return nullptr;
  return &state_.barriers[name];
}

bool RendezvousService::AllArrivedBut(const BarrierState& b,
                                      uint64_t node) const {
  for (const auto& [id, n] : state_.nodes) {
    if (IsWorkerNode(id) && !n.down && id != node && !b.arrived.contains(id))
      return false;
  }
  return true;
}

std::string RendezvousService::MissingFromBarrier(const BarrierState& b) const {
  std::vector<std::string> missing;
  for (const auto& [node, n] : state_.nodes) {
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
  for (auto& [name, b] : state_.barriers) {
    if (b.done || b.waiters.empty()) continue;
    bool all = true;
    for (const auto& [node, n] : state_.nodes) {
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

}  // namespace ferry
