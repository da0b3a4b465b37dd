// One gRPC channel per peer, created on first use and reused for every call
// (channels multiplex; creating one per call would cost a connection).
// Same-host peers are reached over their unix-abstract socket.
//
// The pool alone owns its channels: the pointers it hands out do not, so a
// channel is never destroyed by whoever drops the last stub — possibly a
// gRPC callback thread, where destroying a channel crashes gRPC. Handed-out
// channels are valid while the pool lives; destroy the pool only once the
// calls on them have completed.
#ifndef FERRY_RPC_CHANNELS_H_
#define FERRY_RPC_CHANNELS_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "rpc/membership/directory.h"
#include "rpc/security.h"

namespace ferry {

struct ChannelOptions {
  // Largest message accepted or sent; -1 = unlimited.
  int max_message_bytes = -1;
  // Use a peer's local_address when it runs on this host.
  bool use_local_sockets = true;
};

class ChannelPool {
 public:
  ChannelPool(std::shared_ptr<const Security> security, ChannelOptions options);

  // The channel for a gRPC target ("host:port", "unix-abstract:name"),
  // not owning (see above).
  std::shared_ptr<grpc::Channel> Get(const std::string& target)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The channel to a worker, preferring its local socket on this host.
  std::shared_ptr<grpc::Channel> ForWorker(const WorkerInfo& worker);

  const Security& security() const { return *security_; }

 private:
  std::shared_ptr<grpc::Channel> Create(const std::string& target) const;

  const std::shared_ptr<const Security> security_;
  const ChannelOptions options_;
  const std::string host_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_CHANNELS_H_
