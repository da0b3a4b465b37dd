// A collective op's deadline is on its worker's clock: with the workers on
// hand-stepped timers, an op whose peer never comes ends when that clock
// reaches the deadline (and not a moment before), whatever real time did.
// gRPC runs in-process on 127.0.0.1; nothing waits for real time to pass.
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "collectives/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

// Long on the manual clock: an op ended by real time would not end within
// the test's time limit.
constexpr absl::Duration kOpTimeout = absl::Hours(1);

class DeadlineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Manual time: nobody is declared dead while the test steps time by
    // hours.
    absl::StatusOr<std::unique_ptr<LocalJob>> job =
        LocalJob::Start(2, {.timers = &timers_});
    ASSERT_OK(job);
    job_ = *std::move(job);
  }

  void TearDown() override {
    if (op_thread_.joinable()) op_thread_.join();
    // Nothing of the op is left on any worker: no op, no message.
    for (int r = 0; r < job_->size(); ++r) {
      proto::WorkerStatus status;
      job_->worker(r).collectives().FillStatus(&status);
      EXPECT_EQ(status.collectives_inflight(), 0) << "worker" << r;
      EXPECT_EQ(status.mailbox_bytes(), 0) << "worker" << r;
    }
    timers_.Stop();  // No worker's timer runs from here on.
    job_.reset();
  }

  int64_t Inflight(int rank) {
    proto::WorkerStatus status;
    job_->worker(rank).collectives().FillStatus(&status);
    return status.collectives_inflight();
  }

  ManualClock clock_;
  ManualTimers timers_{&clock_};
  std::unique_ptr<LocalJob> job_;
  std::thread op_thread_;
};

TEST_F(DeadlineTest, AnOpWhosePeerNeverComesEndsWhenTheClockGetsThere) {
  absl::Status result;
  absl::Notification done;
  op_thread_ = std::thread([&] {
    CollectiveOptions options;
    options.timeout = kOpTimeout;
    result =
        AllReduce(job_->worker(0).collectives().world(),
                  Tensor::FromVector<int64_t>({1}), ReduceOp::kSum, options)
            .status();
    done.Notify();
  });
  // Once the op began, its deadline is fixed on the clock.
  while (Inflight(0) == 0) {
    ASSERT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(1)));
  }
  timers_.Advance(kOpTimeout - absl::Milliseconds(1));
  EXPECT_FALSE(done.HasBeenNotified());
  EXPECT_EQ(Inflight(0), 1);
  timers_.Advance(absl::Milliseconds(1));
  // Run what came due meanwhile (a wait that registered its timer late).
  while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
    timers_.RunDue();
  }
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kDeadlineExceeded,
                               HasSubstr("all_reduce op 0: rank 1 (worker1) "
                                         "did not join within 3600000 ms")));
}

}  // namespace
}  // namespace ferry
