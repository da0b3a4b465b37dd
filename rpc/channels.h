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

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/channel_arguments.h"
#include "rpc/auth/node_key.h"
#include "rpc/auth/security.h"
#include "rpc/membership/directory.h"

namespace ferry {

struct ChannelOptions {
  // Largest message accepted or sent; -1 = unlimited.
  int max_message_bytes = -1;
  // Use a peer's local_address when it runs on this host.
  bool use_local_sockets = true;
  // Send large calls to a peer reached on its local socket in memory files
  // (rpc/shm_message.h).
  bool use_shared_memory = true;
};

// What a node proves itself with on every call: the job's token and, once
// membership told it who it is, a credential made for the call's
// destination (rpc/auth/credential.h): it shows this node holds its key, and is
// worth nothing at any other node. Thread-safe.
class NodeSecrets {
 public:
  NodeSecrets(const std::string& token, std::shared_ptr<const NodeKey> key);

  // This node's id from now on, and (a client) what its issuer vouched for
  // it to each worker.
  void SetIdentity(uint64_t node, std::vector<Voucher> vouchers = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  // The master (worker0, on the embedded master): the destination of
  // membership calls.
  void SetMaster(const WorkerInfo& master) ABSL_LOCKS_EXCLUDED(mu_);
  std::optional<WorkerInfo> master() const ABSL_LOCKS_EXCLUDED(mu_);

  // The credential for calls to node `to` holding `to_key`: "" before
  // SetIdentity, or for a key no secret can be agreed with. An ECDH: made
  // once per channel (the pool's channels cache it).
  std::string CredentialFor(uint64_t to, const std::string& to_key) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // "Bearer <token>", or "" if the job has none.
  const std::string& authorization() const { return authorization_; }
  const NodeKey& key() const { return *key_; }

 private:
  const std::string authorization_;
  const std::shared_ptr<const NodeKey> key_;
  mutable absl::Mutex mu_;
  std::optional<uint64_t> node_ ABSL_GUARDED_BY(mu_);
  std::vector<Voucher> vouchers_ ABSL_GUARDED_BY(mu_);
  std::optional<WorkerInfo> master_ ABSL_GUARDED_BY(mu_);
};

// The secrets of calls to one destination (a worker's incarnation, or
// the master): the job's token and this node's credential made for that
// destination only — an ECDH once, as soon as this node knows who it is
// and who the destination is, then reused. Thread-safe.
class DestinationCredential {
 public:
  // `to`: the destination worker's node and key; unset: the master
  // (membership channels), known once NodeSecrets::SetMaster was called.
  DestinationCredential(const NodeSecrets* secrets,
                        std::optional<std::pair<uint64_t, std::string>> to)
      : secrets_(secrets), to_(std::move(to)) {}

  // Adds them to a call's initial metadata, or to a call about to start.
  void AddTo(std::multimap<std::string, std::string>* metadata) const
      ABSL_LOCKS_EXCLUDED(mu_);
  void AddTo(grpc::ClientContext* context) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The credential ("" while it cannot be made yet).
  std::string Get() const ABSL_LOCKS_EXCLUDED(mu_);

  const NodeSecrets* const secrets_;
  const std::optional<std::pair<uint64_t, std::string>> to_;
  mutable absl::Mutex mu_;
  mutable std::string cached_ ABSL_GUARDED_BY(mu_);
};

class ChannelPool {
 public:
  // `key`: this node's key pair (null: a fresh one).
  ChannelPool(std::shared_ptr<const Security> security, ChannelOptions options,
              std::shared_ptr<const NodeKey> key = nullptr);

  // The channel to a worker (the incarnation its entry names: a new one
  // gets another channel), preferring its local socket on this host; not
  // owning (see above). Its calls carry a credential made for that worker.
  std::shared_ptr<grpc::Channel> ForWorker(const WorkerInfo& worker)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A channel to a worker as ForWorker's (sharing its connection) whose
  // calls carry no secrets by themselves: `credential`, made for that
  // worker's incarnation only, is to be added to each call's context
  // (null where secrets may not go: plaintext to another host,
  // --insecure). gRPC's client interceptor, which carries them on
  // ForWorker's channels, costs every call its interception machinery
  // (about a twentieth of a small call's instructions). For GenericStubs,
  // which hands out a stub only with the call's context, so none of its
  // users can forget them. Not owning, as ForWorker's.
  struct Stamped {
    std::shared_ptr<grpc::Channel> channel;
    const DestinationCredential* credential = nullptr;
  };
  Stamped ForWorkerStamped(const WorkerInfo& worker) ABSL_LOCKS_EXCLUDED(mu_);
  // A channel to `target` for membership only (joins, heartbeats): a
  // connection of its own, so heartbeats never wait behind calls'
  // messages in one connection's HTTP/2 flow control or queues. Its calls
  // carry a credential made for the master once SetMaster was called.
  std::shared_ptr<grpc::Channel> ForMembership(const std::string& target)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Whether large calls to `worker` may go in memory files: it is reached
  // on its local socket, and the options allow it.
  bool SharedMemoryTo(const WorkerInfo& worker) const;

  const Security& security() const { return *security_; }
  NodeSecrets& secrets() { return secrets_; }
  const NodeSecrets& secrets() const { return secrets_; }

 private:
  // What a channel's calls are for: a worker, or (none) the master.
  struct Destination {
    uint64_t node = 0;
    std::string public_key;
  };
  std::shared_ptr<grpc::Channel> Create(
      const std::string& target, bool own_connection,
      std::optional<Destination> destination) const;
  grpc::ChannelArguments Arguments(bool own_connection) const;
  // Where ForWorker reaches `worker`, and the key of its incarnation's
  // channel (a new incarnation gets another: its credential differs).
  const std::string& TargetOf(const WorkerInfo& worker) const;
  static std::string ChannelKey(const std::string& target,
                                const WorkerInfo& worker);
  // A ForWorkerStamped channel and its credential (null: none sent).
  struct StampedEntry {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<DestinationCredential> credential;
  };

  const std::shared_ptr<const Security> security_;
  const ChannelOptions options_;
  const std::string host_;
  NodeSecrets secrets_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>> channels_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<grpc::Channel>>
      membership_channels_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, StampedEntry> stamped_channels_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_CHANNELS_H_
