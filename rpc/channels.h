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

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "rpc/membership/directory.h"
#include "rpc/security.h"

namespace ferry {

struct ChannelOptions {
  // Largest message accepted or sent; -1 = unlimited.
  int max_message_bytes = -1;
  // Use a peer's local_address when it runs on this host.
  bool use_local_sockets = true;
};

// What a node proves itself with on every call: the job's token and, once
// membership issued it, its node credential. Thread-safe.
class NodeSecrets {
 public:
  explicit NodeSecrets(const std::string& token);
  void SetCredential(std::string credential) ABSL_LOCKS_EXCLUDED(mu_);
  // Adds the secrets to a call's initial metadata.
  void AddTo(std::multimap<std::string, std::string>* metadata) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The same, on a call about to start.
  void AddTo(grpc::ClientContext* context) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string authorization_;  // "Bearer <token>", or "".
  mutable absl::Mutex mu_;
  std::string credential_ ABSL_GUARDED_BY(mu_);
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

  // A channel to a worker (as ForWorker's) whose calls do not carry the
  // secrets by themselves: its user adds them to every call with
  // AddSecrets when `*secrets` says the target may receive them
  // (GenericStubs does, so none of its users can forget). gRPC's client
  // interceptor, which ForWorker's channels carry them with, costs every
  // call its interception machinery (about a twentieth of a small call's
  // instructions). It shares ForWorker's connection.
  std::shared_ptr<grpc::Channel> ForWorkerStamped(const WorkerInfo& worker,
                                                  bool* secrets)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Adds this node's secrets to a call on a ForWorkerStamped channel.
  void AddSecrets(grpc::ClientContext* context) const {
    secrets_.AddTo(context);
  }
  // A channel to `target` for membership only (joins, heartbeats): a
  // connection of its own, so heartbeats never wait behind calls'
  // messages in one connection's HTTP/2 flow control or queues.
  std::shared_ptr<grpc::Channel> ForMembership(const std::string& target)
      ABSL_LOCKS_EXCLUDED(mu_);

  const Security& security() const { return *security_; }
  // This node's credential, sent on every call from now on (over channels
  // that may carry secrets).
  void SetCredential(std::string credential) {
    secrets_.SetCredential(std::move(credential));
  }

 private:
  std::shared_ptr<grpc::Channel> Create(const std::string& target,
                                        bool own_connection,
                                        bool intercept = true) const;
  // The target ForWorker reaches `worker` at.
  const std::string& TargetOf(const WorkerInfo& worker) const;

  const std::shared_ptr<const Security> security_;
  const ChannelOptions options_;
  const std::string host_;
  NodeSecrets secrets_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>>
      membership_channels_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>>
      stamped_channels_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_CHANNELS_H_
