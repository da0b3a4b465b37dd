// In-process owners for RRef protocol tests: a user context's requests
// (rref/owner_requests.h) go to the owners' OwnerEndpoints
// (rref/owner_endpoint.h) of other contexts in the test process, and its
// calls (rpc/caller.h's CallSender: remote(), calls on an owner) to
// functions the test defines there, with no gRPC server and no thread of
// their own.
//
// Every message is delivered by the test's manual timers, `latency` after it
// was sent: nothing moves until the test steps the clock (RunDue,
// Advance), so a protocol test is a fixed sequence of steps. A test can
// also hold every message of one method (Hold), then deliver the held ones
// late (Release) or lose them (Drop), and kill an owner (FailNode through
// the user's context, as its membership would).
//
//   ManualTimers timers(&clock);
//   FakeOwners owners(&timers);
//   auto owner = RRefContext::ForOwner(owner_host, options);
//   owners.AddOwner(1, owner.get());
//   owners.Define(1, "make", [](std::vector<Value> args) { … });
//   user_host.owners = owners.ForNode(WorkerNode(0));
//   user_host.caller = owners.CallerFor(WorkerNode(0));
//   auto user = RRefContext::ForUser(user_host, options);
//   … ; timers.RunDue();  // Delivers what was sent.
#ifndef FERRY_TESTS_TESTING_FAKE_OWNERS_H_
#define FERRY_TESTS_TESTING_FAKE_OWNERS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"
#include "rpc/base/timers.h"
#include "rpc/caller.h"
#include "rpc/value/value.h"
#include "rref/owner_endpoint.h"
#include "rref/owner_requests.h"
#include "rref/rref_context.h"

namespace ferry::testing {

class FakeOwners {
 public:
  // Messages are delivered on `timers`, which outlive this.
  explicit FakeOwners(Timers* timers, absl::Duration latency = {});
  ~FakeOwners();

  // Requests to worker `rank` go to `owner` (an owner's context, which
  // outlives this and every user of it).
  void AddOwner(int rank, RRefContext* owner) ABSL_LOCKS_EXCLUDED(mu_);
  // The requests of the context of node `node` (for its Host::owners).
  // Owners with an authenticator see them proven as `node`.
  std::shared_ptr<OwnerRequests> ForNode(uint64_t node);

  // A function worker `rank` runs for calls: its result is the call's
  // reply, or, for remote(), the RRef's value (the call then replies null).
  using Function = std::function<Future<Value>(std::vector<Value> args)>;
  void Define(int rank, const std::string& name, Function fn)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The calls of node `node` (for its Host::caller; owned by this fake).
  // Each is a message "Call", run when delivered: the function's errors
  // come back as "<worker>: <function>: <message>", a call not delivered
  // by its timeout fails DEADLINE_EXCEEDED and never runs, and a remote()
  // still computing at its timeout is abandoned at its owner (as a
  // cancelled call is). Arguments pass as they are (RRefs inside are not
  // forked; send copies with the codecs); a callee's death does not fail
  // its calls.
  CallSender* CallerFor(uint64_t node) ABSL_LOCKS_EXCLUDED(mu_);

  // From now on, messages of `method` ("AddFork", "ConfirmFork",
  // "DeleteFork", "Fetch", "RenewLease", "ListOwned", "Call") wait
  // undelivered.
  void Hold(absl::string_view method) ABSL_LOCKS_EXCLUDED(mu_);
  // Delivers the held messages (late, in the order sent) and stops holding.
  void Release() ABSL_LOCKS_EXCLUDED(mu_);
  // Loses the held messages and stops holding: a request's future fails
  // UNAVAILABLE; a control message counts as given up by its sender.
  void Drop() ABSL_LOCKS_EXCLUDED(mu_);

  // Messages of `method` delivered to owners so far.
  int delivered(absl::string_view method) const ABSL_LOCKS_EXCLUDED(mu_);
  // Messages sent and not yet delivered or lost (held or in flight).
  int in_flight() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class User;
  class Calls;
  struct Message {
    int owner = -1;
    std::string method;
    // Hands the message to the owner (its context and endpoint).
    absl::AnyInvocable<void(RRefContext&, OwnerEndpoint&) &&> deliver;
    // The message is lost.
    absl::AnyInvocable<void() &&> lose;
  };

  // Sends `m` (delivered after the latency, or held).
  void Send(Message m) ABSL_LOCKS_EXCLUDED(mu_);
  void Deliver(Message m) ABSL_LOCKS_EXCLUDED(mu_);
  // The name of worker `rank` ("rank N" if it has no owner here).
  std::string OwnerName(int rank) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether owners see senders proven (their host has an authenticator).
  bool Proves(int rank) const ABSL_LOCKS_EXCLUDED(mu_);
  // The function `name` of worker `rank`; null if it has none.
  Function FunctionOf(int rank, const std::string& name) const
      ABSL_LOCKS_EXCLUDED(mu_);

  Timers* const timers_;
  const absl::Duration latency_;
  mutable absl::Mutex mu_;
  struct Owner {
    RRefContext* context = nullptr;
    std::unique_ptr<OwnerEndpoint> endpoint;
    absl::flat_hash_map<std::string, Function> functions;
  };
  absl::flat_hash_map<int, Owner> owners_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Calls>> calls_ ABSL_GUARDED_BY(mu_);
  std::string hold_ ABSL_GUARDED_BY(mu_);
  std::vector<Message> held_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> delivered_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_FAKE_OWNERS_H_
