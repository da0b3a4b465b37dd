#include "tests/testing/served_rendezvous.h"

#include <chrono>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace ferry::testing {

absl::StatusOr<std::unique_ptr<ServedRendezvous>> ServedRendezvous::Start(
    RendezvousOptions options, Timers* timers) {
  std::unique_ptr<ServedRendezvous> served(new ServedRendezvous());
  served->service_ =
      std::make_unique<RendezvousService>(std::move(options), timers);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(served->service_.get());
  served->server_ = builder.BuildAndStart();
  if (served->server_ == nullptr || port == 0) {
    served->service_->Shutdown();
    return absl::InternalError("the rendezvous service's server did not start");
  }
  served->address_ = absl::StrCat("127.0.0.1:", port);
  return served;
}

ServedRendezvous::~ServedRendezvous() {
  if (server_ == nullptr) return;
  service_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now());
}

std::shared_ptr<grpc::Channel> ServedRendezvous::NewChannel() const {
  return grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
}

proto::JoinRequest JoinRequestOf(int rank, int world_size, const NodeKey& key,
                                 uint64_t incarnation, int64_t timeout_ms) {
  proto::JoinRequest r;
  r.mutable_worker()->set_name(absl::StrCat("worker", rank));
  r.mutable_worker()->set_rank(rank);
  r.mutable_worker()->set_public_key(key.public_key());
  r.set_world_size(world_size);
  r.set_incarnation(incarnation);
  r.set_timeout_ms(timeout_ms);
  return r;
}

}  // namespace ferry::testing
