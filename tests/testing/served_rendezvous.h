// The embedded master's RendezvousService served in-process on 127.0.0.1 (a
// port picked), on the test's timers (usually manual), for tests that talk
// to it over gRPC as workers and clients do.
//
//   ManualTimers timers{&clock};
//   ASSERT_OK_AND_ASSIGN(auto master, ServedRendezvous::Start(options,
//   &timers)); auto stub = proto::Rendezvous::NewStub(master->NewChannel());
//   proto::JoinRequest join = JoinRequestOf(1, 2, *key, /*incarnation=*/7,
//                                           /*timeout_ms=*/20000);
#ifndef FERRY_TESTS_TESTING_SERVED_RENDEZVOUS_H_
#define FERRY_TESTS_TESTING_SERVED_RENDEZVOUS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/server.h"
#include "proto/rendezvous.pb.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/timers.h"
#include "rpc/membership/rendezvous_service.h"

namespace ferry::testing {

class ServedRendezvous {
 public:
  // Serves a RendezvousService with `options` on `timers` (which must
  // outlive it). INTERNAL if the server did not start.
  static absl::StatusOr<std::unique_ptr<ServedRendezvous>> Start(
      RendezvousOptions options, Timers* timers);

  // Shuts the service down (answering what it holds), then the server.
  ~ServedRendezvous();
  ServedRendezvous(const ServedRendezvous&) = delete;
  ServedRendezvous& operator=(const ServedRendezvous&) = delete;

  RendezvousService& service() { return *service_; }
  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  // A plaintext channel of its own to the service.
  std::shared_ptr<grpc::Channel> NewChannel() const;

 private:
  ServedRendezvous() = default;

  std::unique_ptr<RendezvousService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

// What worker `rank` ("worker<rank>") of a job of `world_size` sends to
// join, with its `key`, as `incarnation`, asking the master to wait up to
// `timeout_ms` for the others.
proto::JoinRequest JoinRequestOf(int rank, int world_size, const NodeKey& key,
                                 uint64_t incarnation, int64_t timeout_ms);

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_SERVED_RENDEZVOUS_H_
