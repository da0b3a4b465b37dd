// A job's membership kept in this process and driven by the test: the
// membership seam (rpc/membership/membership_backend.h) faked, with no
// master, no etcd and no heartbeats. Workers and clients join it as they
// would a real backend; deaths happen when the test says so (Kill), so a
// protocol test sees a worker declared dead at once instead of waiting
// out a heartbeat timeout, and a replacement rejoin right after.
//
//   FakeMembership members(3);
//   ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(3, {
//       .configure = [&](WorkerConfig& c) {
//         c.membership_backend = members.Backend(); }}));
//   RpcClientOptions o;
//   o.membership_backend = members.Backend();
//   ASSERT_OK_AND_ASSIGN(auto client, job->Connect(o));
//   members.Kill(2, "the test pulled its plug");  // Everyone knows, now.
//   ASSERT_OK(job->Replace(2));                     // A new incarnation.
//
// What it keeps as the real backends do: Join waits (on the joiner's
// timers, so a manual clock ends it) until every rank joined, names the
// missing ranks at its deadline, refuses a rank a live worker holds
// (ALREADY_EXISTS) and a clashing world size (INVALID_ARGUMENT); once the
// job formed, a join for a dead or departed rank is a replacement (a new
// generation, announced to every follower before it is revived);
// barriers wait for every live worker; Leave is seen as "left the job".
// What it does not: no store (OpenStore is INVALID_ARGUMENT), ranks are
// not assignable, and a node that stops without leaving is alive until
// the test kills it.
#ifndef FERRY_TESTS_TESTING_FAKE_MEMBERSHIP_H_
#define FERRY_TESTS_TESTING_FAKE_MEMBERSHIP_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rpc/base/timers.h"
#include "rpc/membership/membership_backend.h"

namespace ferry::testing {

class FakeMembership {
 public:
  // For AgentOptions/RpcClientOptions::membership_backend.
  using Factory =
      std::function<absl::StatusOr<std::unique_ptr<MembershipBackend>>(
          Timers*)>;

  explicit FakeMembership(int world_size);
  ~FakeMembership();
  FakeMembership(const FakeMembership&) = delete;
  FakeMembership& operator=(const FakeMembership&) = delete;

  // Each backend it makes is one node (a worker or a client) of this job.
  Factory Backend();

  // Declares the worker holding `rank` dead: every other node following
  // marks it down (UNAVAILABLE "workerN died (why)"), and the worker itself
  // is fenced. Runs the nodes' callbacks on the calling thread, before it
  // returns. INVALID_ARGUMENT for a rank out of range, FAILED_PRECONDITION
  // when no live worker holds it.
  absl::Status Kill(int rank, const std::string& why);

  // How many clients registered so far.
  int clients() const;

  struct Hub;  // The job's state, shared with the backends it made.

 private:
  std::shared_ptr<Hub> hub_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_FAKE_MEMBERSHIP_H_
