// The embedded master as a MembershipBackend: rank 0 serves the
// rendezvous (rendezvous_service.h) on its own server; every node joins or
// registers there and keeps one long poll open (membership_client.h). The
// master's death is published as node 0's, which ends the job. While the
// master lives, a worker started for a dead or departed rank rejoins as a
// new incarnation (Join answers at once; the others are told through
// on_rejoined).
#ifndef FERRY_RPC_MEMBERSHIP_EMBEDDED_BACKEND_H_
#define FERRY_RPC_MEMBERSHIP_EMBEDDED_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "rpc/base/timers.h"
#include "rpc/membership/membership_backend.h"
#include "rpc/membership/membership_client.h"

namespace ferry {

struct EmbeddedBackendOptions {
  // The master's channel (ChannelPool::ForMembership) and its host:port.
  std::shared_ptr<grpc::Channel> master;
  std::string master_address;
  Timers* timers = nullptr;  // Not owned; outlives the backend.
  MembershipOptions membership;
};

class EmbeddedBackend final : public MembershipBackend {
 public:
  explicit EmbeddedBackend(EmbeddedBackendOptions options);
  ~EmbeddedBackend() override;

  // INVALID_ARGUMENT for rank -1: the master cannot pick ranks.
  absl::StatusOr<Directory> Join(const JoinSpec& spec,
                                 absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ClientRegistration> RegisterClient(
      const std::string& description, const std::string& public_key,
      absl::Duration timeout) override ABSL_LOCKS_EXCLUDED(mu_);
  // First publishes the workers the Join or registration answer said were
  // gone (a replacement's, or a late client's view of the job), and the
  // clients the Join answer listed.
  void Follow(Membership* membership, FollowCallbacks callbacks) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Barrier(const std::string& name, absl::Duration timeout) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Leave(absl::Duration timeout) override ABSL_LOCKS_EXCLUDED(mu_);
  void Stop() override ABSL_LOCKS_EXCLUDED(mu_);
  // The master's store, over the membership channel.
  absl::StatusOr<std::unique_ptr<KeyValueStore>> OpenStore() override;

  bool rank0_is_master() const override { return true; }
  bool rank_is_assignable() const override { return false; }
  std::string description() const override;

 private:
  std::shared_ptr<MembershipClient> client() const ABSL_LOCKS_EXCLUDED(mu_);

  const EmbeddedBackendOptions options_;
  mutable absl::Mutex mu_;
  uint64_t node_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t incarnation_ ABSL_GUARDED_BY(mu_) = 0;
  // From the Join or registration answer, for Follow.
  std::vector<std::pair<uint64_t, absl::Status>> gone_ ABSL_GUARDED_BY(mu_);
  int64_t events_end_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<uint64_t, std::string>> clients_ ABSL_GUARDED_BY(mu_);
  uint64_t clients_end_ ABSL_GUARDED_BY(mu_) = 0;
  // Set by Follow.
  std::shared_ptr<MembershipClient> client_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_EMBEDDED_BACKEND_H_
