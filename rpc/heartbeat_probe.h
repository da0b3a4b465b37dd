// The heartbeat's round trip, for ferry_heartbeat_rtt_seconds: every few
// seconds a worker sends gRPC's health check to the master over its
// heartbeat connection (ChannelPool::ForMembership, where the long poll
// lives) and records how long the answer took. The long poll itself says
// nothing of latency: the master holds it open by design.
//
// Holds no thread: one check in flight at most, scheduled on the timers;
// Stop() ends it (bounded by the check's 2 s deadline).
#ifndef FERRY_RPC_HEARTBEAT_PROBE_H_
#define FERRY_RPC_HEARTBEAT_PROBE_H_

#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "rpc/base/timers.h"
#include "rpc/metrics.h"

namespace ferry {

class HeartbeatProbe : public std::enable_shared_from_this<HeartbeatProbe> {
 public:
  static constexpr absl::Duration kPeriod = absl::Seconds(5);

  // Starts probing `master` now; `timers` must outlive Stop().
  static std::shared_ptr<HeartbeatProbe> Start(
      std::shared_ptr<grpc::Channel> master, Timers* timers,
      std::shared_ptr<Metrics> metrics);
  // No check is sent after this returns (one in flight may still answer,
  // and is then ignored).
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  HeartbeatProbe(std::shared_ptr<grpc::Channel> master, Timers* timers,
                 std::shared_ptr<Metrics> metrics);

 private:
  void Check() ABSL_LOCKS_EXCLUDED(mu_);
  void Answered(absl::Time sent, bool ok) ABSL_LOCKS_EXCLUDED(mu_);
  void Schedule() ABSL_LOCKS_EXCLUDED(mu_);

  grpc::GenericStub stub_;
  Timers* const timers_;
  const std::shared_ptr<Metrics> metrics_;

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  Timers::TimerId timer_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_RPC_HEARTBEAT_PROBE_H_
