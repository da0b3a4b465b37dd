// Outgoing calls in flight, by the node they went to, so a node's death can
// fail all of them at once (with its name) instead of letting each wait
// for its deadline; and so an owner can wait until every callback has
// finished before it goes away.
//
//   auto context = std::make_shared<grpc::ClientContext>();
//   InflightCalls::Token t = inflight.Add(node, context);
//   stub->async()->Foo(context.get(), …, [&, t](grpc::Status s) {
//     absl::Status failure = inflight.Remove(t);  // set by FailNode, if any
//     …
//     inflight.Finished();  // the callback's last use of its owner
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

  // Tracks a call to `node`: cancellable until Remove, active until
  // Finished. Holding the context keeps it valid for a concurrent cancel.
  Token Add(uint64_t node, std::shared_ptr<grpc::ClientContext> context)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The call completed: no longer cancellable. Returns the reason it was
  // failed on purpose, or OK.
  absl::Status Remove(Token token) ABSL_LOCKS_EXCLUDED(mu_);

  // The call's callback is done with its owner (exactly once per Add).
  void Finished() ABSL_LOCKS_EXCLUDED(mu_);

  // Cancels every call to `node`, recording `reason` for Remove.
  void FailNode(uint64_t node, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels every call.
  void CancelAll(const absl::Status& reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Cancels one call (if still cancellable), recording `reason` for Remove.
  void CancelOne(Token token, const absl::Status& reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls not yet Finished.
  int64_t size() const ABSL_LOCKS_EXCLUDED(mu_);
  // True once every call is Finished; false after `timeout`.
  bool WaitIdle(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

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
  int64_t active_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ferry

#endif  // FERRY_RPC_INFLIGHT_H_
