// The fake membership (fake_membership.h): its backends keep the
// MembershipBackend contract (joins, clashes, barriers, deadlines on the
// joiner's clock), and a job of real workers runs on it, where a death is
// what the test declares, seen by everyone at once, without heartbeats.
#include "tests/testing/fake_membership.h"

#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rpc/agent.h"
#include "rpc/client.h"
#include "rpc/membership/membership.h"
#include "tests/testing/await.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry::testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

JoinSpec SpecFor(int rank, int world_size, uint64_t incarnation = 1) {
  return {.self = {.name = absl::StrCat("worker", rank),
                   .rank = rank,
                   .address = absl::StrCat("127.0.0.1:", 1000 + rank)},
          .world_size = world_size,
          .incarnation = incarnation};
}

class FakeMembershipBackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<MembershipBackend> Make(FakeMembership& members) {
    absl::StatusOr<std::unique_ptr<MembershipBackend>> b =
        members.Backend()(&timers_);
    EXPECT_OK(b.status());
    return b.ok() ? *std::move(b) : nullptr;
  }

  // Joins both workers of a job of 2 (each waits for the other).
  static void JoinBoth(MembershipBackend& worker0, MembershipBackend& worker1) {
    std::thread join1([&] {
      EXPECT_OK(worker1.Join(SpecFor(1, 2), absl::Seconds(5)).status());
    });
    EXPECT_OK(worker0.Join(SpecFor(0, 2), absl::Seconds(5)).status());
    join1.join();
  }

  // Runs `wait` on a thread, stepping the manual clock by `step` until it
  // returns (bounded): what a wait on the joiner's clock needs to end.
  absl::Status StepUntilDone(const std::function<absl::Status()>& wait,
                             absl::Duration step) {
    absl::Status result;
    absl::Notification done;
    std::thread t([&] {
      result = wait();
      done.Notify();
    });
    const bool ended = AwaitTrue(
        [&] {
          if (done.HasBeenNotified()) return true;
          timers_.Advance(step);
          return false;
        },
        kWait);
    t.join();
    EXPECT_TRUE(ended);
    return result;
  }

  ManualClock clock_;
  ManualTimers timers_{&clock_};
};

TEST_F(FakeMembershipBackendTest, AJoinNamesTheRanksMissingAtItsDeadline) {
  FakeMembership members(3);
  auto worker0 = Make(members);
  EXPECT_THAT(
      StepUntilDone(
          [&] {
            return worker0->Join(SpecFor(0, 3), absl::Seconds(5)).status();
          },
          absl::Seconds(1)),
      StatusIs(absl::StatusCode::kDeadlineExceeded,
               HasSubstr("waiting for worker1, worker2")));
}

TEST_F(FakeMembershipBackendTest, ClashesAreRefused) {
  FakeMembership members(1);
  auto first = Make(members);
  ASSERT_OK(first->Join(SpecFor(0, 1), absl::Seconds(5)).status());
  auto second = Make(members);
  EXPECT_THAT(second->Join(SpecFor(0, 1, 2), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("rank 0 is held by a live worker")));
  EXPECT_THAT(second->Join(SpecFor(0, 2, 2), absl::Seconds(5)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("this job has 1 ranks")));
  EXPECT_THAT(members.Kill(1, "no such rank"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(FakeMembershipBackendTest, AReplacementIsTheNextGenerationAndIsRevived) {
  FakeMembership members(2);
  auto worker0 = Make(members);
  auto worker1 = Make(members);
  JoinBoth(*worker0, *worker1);
  Membership seen;
  int rejoined = 0;
  worker0->Follow(&seen, {.on_fenced = [](const absl::Status&) {},
                          .on_rejoined =
                              [&](const WorkerInfo& w, uint64_t) {
                                EXPECT_EQ(w.generation, 1u);
                                ++rejoined;
                              }});
  ASSERT_OK(members.Kill(1, "pulled"));
  EXPECT_THAT(seen.DownReason(WorkerNode(1)).value_or(absl::OkStatus()),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("worker1 died (pulled)")));
  EXPECT_THAT(members.Kill(1, "again"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  auto replacement = Make(members);
  ASSERT_OK_AND_ASSIGN(Directory now,
                       replacement->Join(SpecFor(1, 2, 7), absl::Seconds(5)));
  EXPECT_EQ(now.at(1).generation, 1u);
  EXPECT_EQ(rejoined, 1);
  EXPECT_FALSE(seen.DownReason(WorkerNode(1)).has_value());
}

TEST_F(FakeMembershipBackendTest, ABarrierWaitsForTheLiveWorkersOnly) {
  FakeMembership members(2);
  auto worker0 = Make(members);
  auto worker1 = Make(members);
  JoinBoth(*worker0, *worker1);
  EXPECT_THAT(
      StepUntilDone([&] { return worker0->Barrier("b", absl::Seconds(3)); },
                    absl::Seconds(1)),
      StatusIs(absl::StatusCode::kDeadlineExceeded,
               HasSubstr("barrier b: waiting for worker1")));
  // worker1's death leaves nobody to wait for.
  ASSERT_OK(members.Kill(1, "pulled"));
  EXPECT_OK(worker0->Barrier("b", absl::Seconds(3)));
}

// A job of real workers on the fake: what the test declares, every node
// knows at once (heartbeats would take 1000 hours here).
class FakeMembershipJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<LocalJob>> job =
        LocalJob::Start(3, {.configure = [this](WorkerConfig& c) {
                          c.membership_backend = members_.Backend();
                          c.heartbeat_timeout = absl::Hours(1000);
                        }});
    ASSERT_OK(job.status());
    job_ = *std::move(job);
    RpcClientOptions o;
    o.membership_backend = members_.Backend();
    absl::StatusOr<std::unique_ptr<ClientImpl>> client = job_->Connect(o);
    ASSERT_OK(client.status());
    client_ = *std::move(client);
  }

  FakeMembership members_{3};
  std::unique_ptr<LocalJob> job_;
  std::unique_ptr<ClientImpl> client_;
};

TEST_F(FakeMembershipJobTest, CallsGoThroughAndClientsAreCounted) {
  EXPECT_OK(job_->worker(0).rpc().RpcSync("worker2", "echo", {1}));
  EXPECT_OK(client_->rpc().RpcSync("worker1", "echo", {2}));
  EXPECT_EQ(members_.clients(), 1);
}

TEST_F(FakeMembershipJobTest, AKilledWorkerIsDeadToEveryoneAtOnce) {
  ASSERT_OK(members_.Kill(2, "the test pulled its plug"));
  EXPECT_THAT(job_->worker(0).rpc().RpcSync("worker2", "echo", {1}),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("worker2 died (the test pulled its plug)")));
  EXPECT_THAT(
      client_->rpc().RpcSync("worker2", "echo", {1}),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2 died")));
  EXPECT_THAT(job_->worker(2).rpc().exit_status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("worker2 was fenced")));
  // The replacement is the rank's next generation, reachable by everyone.
  ASSERT_OK(job_->Replace(2));
  EXPECT_EQ(job_->worker(0).rpc().directory().at(2).generation, 1u);
  EXPECT_OK(job_->worker(0).rpc().RpcSync("worker2", "echo", {3}));
  EXPECT_OK(client_->rpc().RpcSync("worker2", "echo", {4}));
}

TEST_F(FakeMembershipJobTest, ShutdownMeetsAtTheBarriers) {
  client_.reset();
  EXPECT_OK(job_->ShutdownAll());
}

}  // namespace
}  // namespace ferry::testing
