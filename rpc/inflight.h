// Outgoing calls in flight, by the node they went to, so a node's death can
// fail all of them at once (with its name) instead of letting each wait
// for its deadline.
//
//   auto context = std::make_shared<grpc::ClientContext>();
//   InflightCalls::Token t = inflight.Add(node, context);
//   stub->async()->Foo(context.get(), …, [&, t](grpc::Status s) {
//     absl::Status failure = inflight.Remove(t);  // set by FailNode, if any
//     …
//   });
#ifndef FERRY_RPC_INFLIGHT_H_
#define FERRY_RPC_INFLIGHT_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"

namespace ferry {

class InflightCalls {
 public:
  using Token = uint64_t;

  // Tracks a call to `node` until Remove. Holding the context keeps it
  // valid for a concurrent cancel.
  Token Add(uint64_t node, std::shared_ptr<grpc::ClientContext> context)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stops tracking; returns the reason the call was failed on purpose, or
  // OK.
  absl::Status Remove(Token token) ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels every call to `node`, recording `reason` for Remove.
  void FailNode(uint64_t node, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels every call.
  void CancelAll(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  // True once nothing is in flight; false at `deadline`.
  bool WaitIdle(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Call {
    uint64_t node;
    std::shared_ptr<grpc::ClientContext> context;
    absl::Status failure;
  };

  void Cancel(bool all, uint64_t node, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  Token next_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<Token, Call> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_INFLIGHT_H_
