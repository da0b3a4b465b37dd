// The RRef protocol's races, each forced on a real in-process job: a hook on
// the owner holds one message until the test lets it go, so the bad order
// happens every run (no sleeps, no timing luck). Every test ends with the
// owner tables empty, observed through the deletes the owner receives.
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

// An owner hook: holds messages of one method (all of them, until
// Release), applies the others at once, and counts what was applied.
class Gate {
 public:
  void Hold(std::string method) {
    absl::MutexLock lock(&mu_);
    hold_ = std::move(method);
  }
  RRefContext::OwnerHook Hook() {
    return [this](absl::string_view method, const proto::ForkRequest& r,
                  absl::AnyInvocable<void() &&> proceed) {
      {
        absl::MutexLock lock(&mu_);
        if (method == hold_) {
          held_.push_back(std::move(proceed));
          return;
        }
      }
      std::move(proceed)();
      absl::MutexLock lock(&mu_);
      ++applied_[Key(method, r.only_unconfirmed())];
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
  // Waits (bounded) until `n` messages of `method` were applied.
  bool WaitApplied(const std::string& method, int n,
                   bool only_unconfirmed = false) {
    const std::string key = Key(method, only_unconfirmed);
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return applied_[key] >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kWait);
  }
  // Applies the held messages and stops holding.
  void Release() {
    std::vector<absl::AnyInvocable<void() &&>> held;
    std::string method;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
      method.swap(hold_);
    }
    for (auto& p : held) {
      std::move(p)();
      absl::MutexLock lock(&mu_);
      ++applied_[Key(method, false)];
    }
  }

 private:
  static std::string Key(absl::string_view method, bool only_unconfirmed) {
    return absl::StrCat(method, only_unconfirmed ? "/abandon" : "");
  }

  absl::Mutex mu_;
  std::string hold_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::AnyInvocable<void() &&>> held_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> applied_ ABSL_GUARDED_BY(mu_);
};

class RRefRacesTest : public ::testing::Test {
 protected:
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
    if (job_ != nullptr) {
      worker(1).rrefs().SetOwnerHookForTesting(nullptr);
      ASSERT_OK(job_->ShutdownAll());
    }
  }

  Gate gate_;
  std::unique_ptr<LocalJob> job_;
};

// G2: worker0 sends its copy to worker2 and drops it at once. The child's
// AddFork is held at the owner: worker0's delete must not go out before
// the AddFork is acknowledged (it would free the value worker2 is about to
// fetch).
TEST_F(RRefRacesTest, ParentIsPinnedUntilTheChildsAddForkIsAcknowledged) {
  StartJob(3);
  RRef r = OwnedByWorker1(7);
  gate_.Hold("AddFork");
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
  absl::Mutex mu;
  Value kept;
  Promise<Value> keep_returns;
  StartJob(3, {.setup = [&](WorkerImpl& w) {
    if (w.rpc().rank() != 2) return;
    ASSERT_OK(w.registry().RegisterAsync(
        "keep",
        [&](const CallContext&, std::vector<Value> args) {
          absl::MutexLock lock(&mu);
          kept = args.at(0);
          return keep_returns.future();
        },
        "keep(x) -> null"));
  }});
  RRef r = OwnedByWorker1(7);
  gate_.Hold("ConfirmFork");
  Future<Value> call =
      worker(0).rpc().RpcAsync("worker2", "keep", {r.AsValue()},
                               {.timeout = absl::Milliseconds(200)});
  ASSERT_TRUE(gate_.WaitHeld(1));  // worker2 has it and confirms.
  EXPECT_THAT(call.Wait(kWait), StatusIs(absl::StatusCode::kDeadlineExceeded));
  ASSERT_TRUE(gate_.WaitApplied("DeleteFork", 1, /*only_unconfirmed=*/true));
  EXPECT_EQ(worker(1).rrefs().owner_stats().abandoned, 1);
  EXPECT_EQ(worker(1).rrefs().owner_stats().forks, 2);
  gate_.Release();  // The confirm arrives after the abandon.
  EXPECT_EQ(worker(1).rrefs().owner_stats().abandoned, 0);
  Value copy;
  {
    absl::MutexLock lock(&mu);
    copy = std::exchange(kept, Value());
  }
  ASSERT_OK_AND_ASSIGN(RRef at_worker2, RRef::FromValue(copy));
  copy = Value();
  ASSERT_OK_AND_ASSIGN(Value v, at_worker2.ToHere(kWait));
  EXPECT_EQ(v, Value(7));
  keep_returns.Set(Value());
  at_worker2 = RRef();
  r = RRef();
  ASSERT_TRUE(gate_.WaitApplied("DeleteFork", 2));
  EXPECT_EQ(worker(1).rrefs().owner_stats().owned, 0);
}

}  // namespace
}  // namespace ferry
