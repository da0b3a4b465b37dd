// The RRef protocol's races, each forced on a real in-process job: a hook on
// the owner holds one message until the test lets it go, so the bad order
// happens every run (no sleeps, no timing luck). Every test ends with the
// owner tables empty, observed through the deletes the owner receives.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "rref/rref.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(20);

// An owner hook: holds the messages of some keys (a method,
// "DeleteFork/abandon" for abandons, "RenewLease/<holder>" for renewals)
// until Release, applies the others at once, and counts what was applied.
class Gate {
 public:
  void Hold(std::vector<std::string> keys) {
    absl::MutexLock lock(&mu_);
    hold_.insert(keys.begin(), keys.end());
  }
  RRefContext::OwnerHook Hook() {
    return [this](absl::string_view method,
                  const google::protobuf::Message& request,
                  absl::AnyInvocable<void() &&> proceed) {
      const std::string key = Key(method, request);
      {
        absl::MutexLock lock(&mu_);
        if (hold_.contains(key) || hold_.contains(method)) {
          held_.emplace_back(key, std::move(proceed));
          return;
        }
      }
      std::move(proceed)();
      absl::MutexLock lock(&mu_);
      ++applied_[key];
    };
  }
  // Waits (bounded) until `n` messages are held.
  bool WaitHeld(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return held_.size() >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  // Waits (bounded) until `n` messages of `key` were applied.
  bool WaitApplied(const std::string& key, int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return applied_[key] >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  int applied(const std::string& key) {
    absl::MutexLock lock(&mu_);
    return applied_[key];
  }
  // Applies the held messages and stops holding.
  void Release() {
    std::vector<std::pair<std::string, absl::AnyInvocable<void() &&>>> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
      hold_.clear();
    }
    for (auto& [key, proceed] : held) {
      std::move(proceed)();
      absl::MutexLock lock(&mu_);
      ++applied_[key];
    }
  }

 private:
  static std::string Key(absl::string_view method,
                         const google::protobuf::Message& request) {
    if (auto* fork = dynamic_cast<const proto::ForkRequest*>(&request)) {
      return absl::StrCat(method, fork->only_unconfirmed() ? "/abandon" : "");
    }
    if (auto* lease = dynamic_cast<const proto::LeaseRequest*>(&request)) {
      return absl::StrCat(method, "/", lease->holder());
    }
    return std::string(method);
  }

  absl::Mutex mu_;
  absl::flat_hash_set<std::string> hold_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, absl::AnyInvocable<void() &&>>> held_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> applied_ ABSL_GUARDED_BY(mu_);
};

class RRefRacesTest : public ::testing::Test {
 protected:
  // worker2's "keep(x)": keeps x (an RRef's copy) and returns when the
  // test sets keep_returns_.
  LocalJob::Options KeepOnWorker2(absl::Duration lease = absl::Seconds(10)) {
    LocalJob::Options o;
    o.configure = [lease](WorkerConfig& c) { c.rref.lease = lease; };
    o.setup = [this](WorkerImpl& w) {
      if (w.rpc().rank() != 2) return;
      ASSERT_OK(w.registry().RegisterAsync(
          "keep",
          [this](const CallContext&, std::vector<Value> args) {
            absl::MutexLock lock(&kept_mu_);
            kept_ = args.at(0);
            return keep_returns_.future();
          },
          "keep(x) -> null"));
    };
    return o;
  }
  // worker2's copy, taken out of keep's slot.
  absl::StatusOr<RRef> Kept() {
    Value copy;
    {
      absl::MutexLock lock(&kept_mu_);
      copy = std::exchange(kept_, Value());
    }
    return RRef::FromValue(copy);
  }

  void StartJob(int n, LocalJob::Options options = {}) {
    absl::StatusOr<std::unique_ptr<LocalJob>> job = LocalJob::Start(n, options);
    ASSERT_OK(job);
    job_ = *std::move(job);
    worker(1).rrefs().SetOwnerHookForTesting(gate_.Hook());
  }
  WorkerImpl& worker(int r) { return job_->worker(r); }

  // An RRef worker0 holds, owned by worker1, created and confirmed.
  RRef OwnedByWorker1(int v) {
    absl::StatusOr<RRef> r = worker(0).rrefs().Remote("worker1", "echo", {v});
    EXPECT_OK(r);
    EXPECT_OK(r->ToHere());
    return *r;
  }

  void TearDown() override {
    gate_.Release();
    gate3_.Release();
    if (job_ != nullptr) {
      for (int i = 0; i < job_->size(); ++i) {
        worker(i).rrefs().SetOwnerHookForTesting(nullptr);
      }
      ASSERT_OK(job_->ShutdownAll());
    }
  }

  Gate gate_;   // On worker1.
  Gate gate3_;  // On worker3, if a test sets it.
  absl::Mutex kept_mu_;
  Value kept_ ABSL_GUARDED_BY(kept_mu_);
  Promise<Value> keep_returns_;
  std::unique_ptr<LocalJob> job_;
};

// G2: worker0 sends its copy to worker2 and drops it at once. The child's
// AddFork is held at the owner: worker0's delete must not go out before
// the AddFork is acknowledged (it would free the value worker2 is about to
// fetch).
TEST_F(RRefRacesTest, ParentIsPinnedUntilTheChildsAddForkIsAcknowledged) {
  StartJob(3);
  RRef r = OwnedByWorker1(7);
  gate_.Hold({"AddFork"});
  Future<Value> fetched =
      worker(0).rpc().RpcAsync("worker2", "to_here", {r.AsValue()});
  ASSERT_TRUE(gate_.WaitHeld(1));
  r = RRef();  // worker0's last reference.
  EXPECT_EQ(worker(0).rrefs().pending_messages(), 0);  // No delete sent.
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 1);
  gate_.Release();
  ASSERT_OK_AND_ASSIGN(Value v, fetched.Wait(kWait));
  EXPECT_EQ(v, Value(7));
  // worker0's copy and worker2's copy are deleted; nothing is left.
  ASSERT_TRUE(gate_.WaitApplied("DeleteFork", 2));
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 0);
}

// The sender's call times out while worker2 (which got the copy) is still
// confirming it: the abandon reaches the owner first. The confirm still
// wins — worker2 keeps a working copy.
TEST_F(RRefRacesTest, ConfirmAfterAbandonKeepsTheCopy) {
  StartJob(3, KeepOnWorker2());
  RRef r = OwnedByWorker1(7);
  // worker2's confirm, and its renewals (which list its copy, so would
  // confirm it too), wait until the abandon was applied.
  gate_.Hold({"ConfirmFork", "RenewLease/2"});
  Future<Value> call = worker(0).rpc().RpcAsync(
      "worker2", "keep", {r.AsValue()}, {.timeout = absl::Milliseconds(200)});
  ASSERT_TRUE(gate_.WaitHeld(1));  // worker2 has it and confirms.
  EXPECT_THAT(call.Wait(kWait), StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_TRUE(gate_.WaitApplied("DeleteFork/abandon", 1));
  EXPECT_EQ(worker(1).rrefs().owner_stats().abandoned, 1);
  EXPECT_EQ(worker(1).rrefs().owner_stats().forks, 2);
  gate_.Release();  // The confirm arrives after the abandon.
  EXPECT_EQ(worker(1).rrefs().owner_stats().abandoned, 0);
  ASSERT_OK_AND_ASSIGN(RRef at_worker2, Kept());
  ASSERT_OK_AND_ASSIGN(Value v, at_worker2.ToHere(kWait));
  EXPECT_EQ(v, Value(7));
  keep_returns_.Set(Value());
  at_worker2 = RRef();
  r = RRef();
  ASSERT_TRUE(gate_.WaitApplied("DeleteFork", 2));
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 0);
}

// A call carries two copies: worker1's fork is registered at once, but
// worker3 holds its AddFork, so the call cannot leave for several leases.
// The sender vouches for worker1's fork in every renewal meanwhile, so it
// is still registered when worker2 finally gets the call and confirms.
TEST_F(RRefRacesTest, ForkInTransitLivesAsLongAsItsCall) {
  StartJob(4, KeepOnWorker2(absl::Seconds(1)));
  worker(3).rrefs().SetOwnerHookForTesting(gate3_.Hook());
  RRef r1 = OwnedByWorker1(7);
  ASSERT_OK_AND_ASSIGN(RRef r3,
                       worker(0).rrefs().Remote("worker3", "echo", {8}));
  ASSERT_OK(r3.ToHere());
  gate3_.Hold({"AddFork"});
  keep_returns_.Set(Value());
  Future<Value> call =
      worker(0).rpc().RpcAsync("worker2", "keep", {r1.AsValue(), r3.AsValue()});
  ASSERT_TRUE(gate3_.WaitHeld(1));
  ASSERT_TRUE(gate_.WaitApplied("AddFork", 1));
  // Renewals every lease/4: 14 of them span three leases and more.
  ASSERT_TRUE(
      gate_.WaitApplied("RenewLease/0", gate_.applied("RenewLease/0") + 14));
  EXPECT_EQ(worker(1).rrefs().owner_stats().forks, 2);
  EXPECT_EQ(worker(1).rrefs().owner_stats().unconfirmed, 1);
  gate3_.Release();  // The call leaves.
  ASSERT_OK(call.Wait(kWait));
  ASSERT_OK_AND_ASSIGN(RRef at_worker2, Kept());
  ASSERT_OK_AND_ASSIGN(Value v, at_worker2.ToHere(kWait));
  EXPECT_EQ(v, Value(7));
  at_worker2 = RRef();
  r1 = RRef();
  r3 = RRef();
  ASSERT_TRUE(gate_.WaitApplied("DeleteFork", 2));
  ASSERT_TRUE(gate3_.WaitApplied("DeleteFork", 2));
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 0);
  EXPECT_EQ(worker(3).rrefs().owner_stats().owned, 0);
}

// worker0's delete is lost (held for good): its next complete renewal
// round no longer lists the copy, and the owner frees the value.
TEST_F(RRefRacesTest, LostDeleteIsReconciledByTheNextRound) {
  StartJob(2, {.configure = [](WorkerConfig& c) {
             c.rref.lease = absl::Seconds(1);
           }});
  RRef r = OwnedByWorker1(1);
  RRef other = OwnedByWorker1(2);  // Keeps worker0 renewing with worker1.
  // Two rounds that list both copies.
  ASSERT_TRUE(
      gate_.WaitApplied("RenewLease/0", gate_.applied("RenewLease/0") + 2));
  gate_.Hold({"DeleteFork"});
  r = RRef();
  ASSERT_TRUE(gate_.WaitHeld(1));
  ASSERT_TRUE(
      gate_.WaitApplied("RenewLease/0", gate_.applied("RenewLease/0") + 2));
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 1);
  gate_.Release();  // The late delete: nothing left to do.
  other = RRef();
  ASSERT_TRUE(gate_.WaitApplied("DeleteFork", 2));
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 0);
}

}  // namespace
}  // namespace ferry
