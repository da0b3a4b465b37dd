// The rendezvous calls a worker other than the master answers: only
// RegisterClient, read-only from the worker's own directory, so
// `ferryctl --master=<any worker> status` and `down` work — also after the
// master died, while the survivors wind down. Join, Poll and Barrier stay
// the master's (UNIMPLEMENTED here).
//
// A client registered here is told `read_only`: it does not poll (no
// membership is kept for it). Its node id comes from a range of this
// worker's own, (rank + 1) << 32 onwards, so it never equals an id the
// master or another worker hands out; its credential is MAC'd with the
// job's client key like the master's (rpc/authenticator.h), so every
// worker knows it at once.
#ifndef FERRY_RPC_MEMBERSHIP_DIRECTORY_SERVICE_H_
#define FERRY_RPC_MEMBERSHIP_DIRECTORY_SERVICE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/rendezvous.grpc.pb.h"
#include "rpc/base/limits.h"
#include "rpc/bounded_service.h"
#include "rpc/membership/directory.h"

namespace ferry {

// Every request (Join, Poll and Barrier too, answered UNIMPLEMENTED) is
// parsed through BoundedParse within `limits`.
class DirectoryService final
    : public BoundedService<proto::Rendezvous::CallbackService> {
 public:
  // Serves for the worker of rank `rank` (>= 1).
  explicit DirectoryService(int rank, const Limits& limits = DefaultLimits());

  // The job's directory and client key, once this worker joined. Before
  // that RegisterClient is UNAVAILABLE (the caller retries).
  void SetDirectory(Directory directory, std::string client_key)
      ABSL_LOCKS_EXCLUDED(mu_);

  grpc::ServerUnaryReactor* RegisterClient(
      grpc::CallbackServerContext* context,
      const proto::RegisterClientRequest* request,
      proto::RegisterClientResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int rank_;
  absl::Mutex mu_;
  std::optional<Directory> directory_ ABSL_GUARDED_BY(mu_);
  std::string client_key_ ABSL_GUARDED_BY(mu_);
  uint64_t next_client_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_DIRECTORY_SERVICE_H_
