// RegisterClient: a client becomes a node of the job.
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
using rendezvous_internal::Exhausted;
using rendezvous_internal::RandomIncarnation;
using rendezvous_internal::SecretWith;

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
  auto it = state_.clients_by_peer.find(peer);
  const int64_t mine = it == state_.clients_by_peer.end() ? 0 : it->second;
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
  if (!state_.complete) {
    return {{held, Error(grpc::StatusCode::UNAVAILABLE,
                         absl::StrCat("the job is not formed yet (waiting for ",
                                      MissingRanks(), ")"))}};
  }
  if (grpc::Status room = CheckRoomForClient(peer); !room.ok()) {
    return {{held, room}};
  }
  const uint64_t number = state_.next_client++;
  const uint64_t node = kFirstClientNode + number;
  Node& n = state_.nodes[node];
  n.name = absl::StrCat("client", number);
  if (!r.description().empty()) {
    absl::StrAppend(&n.name, " (", r.description(), ")");
  }
  n.last_seen = Now();
  n.incarnation = RandomIncarnation();
  n.public_key = r.public_key();
  n.expected = ExpectedFrom(node, n.public_key, secret);
  n.peer = peer;
  ++state_.clients_by_peer[peer];
  out->set_node(node);
  out->set_incarnation(n.incarnation);
  FillDirectory(out->mutable_workers());
  // What each worker may check it by until the announcement below reaches
  // it: only the master and that worker can make it.
  for (const Slot& s : state_.slots) {
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
  state_.events.push_back(std::move(event));
  // Its own announcement is in its answer already.
  out->set_events_end(EventsEnd());
  n.seen = EventsEnd();
  Finishes finishes = ReleasePolls(/*workers_only=*/true);
  finishes.emplace_back(held, grpc::Status::OK);
  return finishes;
}

// ---- Poll ----

int64_t RendezvousService::ClientCount() const {
  int64_t n = 0;
  for (const auto& [node, info] : state_.nodes) {
    if (!IsWorkerNode(node)) ++n;
  }
  return n;
}

}  // namespace ferry
