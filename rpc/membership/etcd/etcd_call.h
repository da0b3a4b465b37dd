// One unary etcd call with a deadline, carried across endpoints:
//
//   Future<etcdserverpb::RangeResponse> r =
//       EtcdCall<etcdserverpb::RangeRequest, etcdserverpb::RangeResponse>(
//           connection, {.what = "Range /a", .read_only = true}, request,
//           [](const EtcdStubs& s, grpc::ClientContext* c,
//              const etcdserverpb::RangeRequest* q,
//              etcdserverpb::RangeResponse* a,
//              std::function<void(grpc::Status)> done) {
//             s.kv->async()->Range(c, q, a, std::move(done));
//           });
//
// Contracts:
// - The call goes to the connection's endpoint in use. When that endpoint
//   fails (down, no leader, too slow) the connection moves to the next one,
//   and the call is tried there if that is safe: always for read-only
//   calls, for writes only when etcd surely did not apply the first try.
//   After every endpoint failed, the next round waits for the backoff. All
//   of it within the one deadline.
// - A stale token is renewed once, then the call is tried again.
// - Errors read "etcd ENDPOINT: WHAT: etcd's message" (see etcd_status.h);
//   CANCELLED if the connection stops first.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CALL_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CALL_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "rpc/base/future.h"
#include "rpc/base/timers.h"
#include "rpc/membership/etcd/etcd_connection.h"

namespace ferry {

struct EtcdCallSpec {
  std::string what;        // For errors: the RPC and its key.
  bool read_only = false;  // Safe to repeat after any failure.
  // Send the token (all calls but Authenticate).
  bool authenticated = true;
  // >= 0: only this endpoint, no failover (health probes).
  int pinned_endpoint = -1;
};

// The retries, failover and cancellation of a call, whatever its types.
class EtcdCallBase : public EtcdTask,
                     public std::enable_shared_from_this<EtcdCallBase> {
 public:
  void Cancel() override ABSL_LOCKS_EXCLUDED(mu_);

 protected:
  EtcdCallBase(std::shared_ptr<EtcdConnection> connection, EtcdCallSpec spec,
               absl::Time deadline);

  // Tracks the call and makes the first attempt.
  void Begin();
  // Issues the RPC on `stubs` with `context`; its completion must call
  // AttemptDone(endpoint, status).
  virtual void StartAttempt(const EtcdStubs& stubs,
                            grpc::ClientContext* context, int endpoint) = 0;
  // The final outcome: OK means the response of the last attempt stands.
  virtual void Complete(const absl::Status& status) = 0;
  void AttemptDone(int endpoint, const grpc::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Attempt() ABSL_LOCKS_EXCLUDED(mu_);
  // After a failed attempt that needs no new token.
  void FailOverOrFinish(int endpoint, const grpc::Status& status, int attempts)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RetryLater(absl::Duration delay) ABSL_LOCKS_EXCLUDED(mu_);
  void RenewTokenThenRetry(uint64_t generation);
  void Finish(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Failure(int endpoint, const grpc::Status& status) const
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Cancelled() const;

  // Constant after construction.
  const std::shared_ptr<EtcdConnection> connection_;
  const EtcdCallSpec spec_;
  const absl::Time deadline_;

  mutable absl::Mutex mu_;
  std::shared_ptr<grpc::ClientContext> context_ ABSL_GUARDED_BY(mu_);
  uint64_t token_generation_ ABSL_GUARDED_BY(mu_) = 0;
  Timers::TimerId retry_timer_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool renewed_token_ ABSL_GUARDED_BY(mu_) = false;
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> tried_ ABSL_GUARDED_BY(mu_);
};

template <typename Req, typename Resp>
using EtcdStart =
    std::function<void(const EtcdStubs&, grpc::ClientContext*, const Req*,
                       Resp*, std::function<void(grpc::Status)>)>;

template <typename Req, typename Resp>
class EtcdUnaryCall final : public EtcdCallBase {
 public:
  EtcdUnaryCall(std::shared_ptr<EtcdConnection> connection, EtcdCallSpec spec,
                absl::Time deadline, Req request, EtcdStart<Req, Resp> start)
      : EtcdCallBase(std::move(connection), std::move(spec), deadline),
        request_(std::move(request)),
        start_(std::move(start)) {}

  Future<Resp> Run() {
    Future<Resp> result = promise_.future();
    Begin();
    return result;
  }

 private:
  void StartAttempt(const EtcdStubs& stubs, grpc::ClientContext* context,
                    int endpoint) override {
    // Attempts never overlap, so the one response buffer is reused.
    response_.Clear();
    std::shared_ptr<EtcdCallBase> self = shared_from_this();
    start_(stubs, context, &request_, &response_,
           [self, endpoint](grpc::Status status) {
             static_cast<EtcdUnaryCall*>(self.get())
                 ->AttemptDone(endpoint, status);
           });
  }

  void Complete(const absl::Status& status) override {
    if (status.ok()) {
      promise_.Set(std::move(response_));
    } else {
      promise_.Set(status);
    }
  }

  const Req request_;
  const EtcdStart<Req, Resp> start_;
  Resp response_;  // Written by gRPC during an attempt, read after it.
  Promise<Resp> promise_;
};

// Runs one call (see the file comment). `deadline` is on the connection's
// clock.
template <typename Req, typename Resp>
Future<Resp> EtcdCall(std::shared_ptr<EtcdConnection> connection,
                      EtcdCallSpec spec, Req request,
                      EtcdStart<Req, Resp> start, absl::Time deadline) {
  auto call = std::make_shared<EtcdUnaryCall<Req, Resp>>(
      std::move(connection), std::move(spec), deadline, std::move(request),
      std::move(start));
  return call->Run();
}

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CALL_H_
