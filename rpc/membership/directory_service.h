// The rendezvous calls a worker other than the master answers: only
// RegisterClient, read-only from the worker's own directory, so
// `ferryctl --master=<any worker> status` and `down` work — also after the
// master died, while the survivors wind down. Join, Poll and Barrier stay
// the master's (UNIMPLEMENTED here).
//
// A client registered here is told `read_only`: it does not poll (no
// membership is kept for it). Its node id comes from a range of this
// worker's own, (rank + 1) << 32 onwards, so it never equals an id the
// master or another worker hands out. Its answer carries, for each worker,
// what this worker vouches for it there (rpc/auth/node_key.h: its id and public
// key, under the pair secret of this worker and that one), so every worker
// knows it at once; no worker can vouch for ids outside its own range.
#ifndef FERRY_RPC_MEMBERSHIP_DIRECTORY_SERVICE_H_
#define FERRY_RPC_MEMBERSHIP_DIRECTORY_SERVICE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "proto/rendezvous.grpc.pb.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/limits.h"
#include "rpc/membership/directory.h"
#include "rpc/wire/bounded_service.h"

namespace ferry {

// Every request (Join, Poll and Barrier too, answered UNIMPLEMENTED) is
// parsed through BoundedParse within `limits`.
class DirectoryService final
    : public BoundedService<proto::Rendezvous::CallbackService> {
 public:
  // Serves for the worker of rank `rank` (>= 0), holding `key`.
  DirectoryService(int rank, std::shared_ptr<const NodeKey> key,
                   const Limits& limits = DefaultLimits());

  // The job's directory, once this worker joined. Before that
  // RegisterClient is UNAVAILABLE (the caller retries).
  void SetDirectory(Directory directory) ABSL_LOCKS_EXCLUDED(mu_);

  grpc::ServerUnaryReactor* RegisterClient(
      grpc::CallbackServerContext* context,
      const proto::RegisterClientRequest* request,
      proto::RegisterClientResponse* response) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The pair secret with `worker` (cached per incarnation: an ECDH).
  std::string SecretWith(const WorkerInfo& worker) ABSL_LOCKS_EXCLUDED(mu_);
  // The answer for a new client holding `public_key`; UNAVAILABLE before
  // the job formed.
  grpc::Status Register(const std::string& public_key,
                        proto::RegisterClientResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);

  const int rank_;
  const std::shared_ptr<const NodeKey> key_;
  absl::Mutex mu_;
  std::optional<Directory> directory_ ABSL_GUARDED_BY(mu_);
  uint64_t next_client_ ABSL_GUARDED_BY(mu_) = 1;
  // By rank: the key a secret was made with, and the secret.
  absl::flat_hash_map<int, std::pair<std::string, std::string>> secrets_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_DIRECTORY_SERVICE_H_
