// Point-to-point (p2p.h) between in-process workers: matching by source,
// tag and order, receives from any source (with messages kept for the
// receive after), receiving into caller memory, the deadlines on the
// workers' hand-stepped clock, a dead peer, and bad arguments.
#include "collectives/p2p.h"

#include <cstring>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "collectives/collectives.h"
#include "collectives/op/group_state.h"
#include "collectives/op/tensor_out.h"
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

constexpr absl::Duration kWait = absl::Seconds(60);

Tensor I64(std::vector<int64_t> v) { return Tensor::FromVector<int64_t>(v); }

class P2pTest : public ::testing::Test {
 protected:
  void Start(int n, LocalJob::Options options = {}) {
    absl::StatusOr<std::unique_ptr<LocalJob>> job = LocalJob::Start(n, options);
    ASSERT_OK(job);
    job_ = *std::move(job);
  }
  ProcessGroup& World(int r) { return job_->worker(r).collectives().world(); }

  // fn(world, rank) on every rank at once.
  void OnEveryRank(const std::function<void(ProcessGroup&, int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < job_->size(); ++r) {
      threads.emplace_back([&, r] { fn(World(r), r); });
    }
    for (std::thread& t : threads) t.join();
  }

  // Nothing of any message is left behind on any worker.
  void ExpectNothingLeft() {
    for (int r = 0; r < job_->size(); ++r) {
      proto::WorkerStatus status;
      job_->worker(r).collectives().FillStatus(&status);
      EXPECT_EQ(status.collectives_inflight(), 0) << "worker" << r;
      EXPECT_EQ(status.mailbox_bytes(), 0) << "worker" << r;
    }
  }

  std::unique_ptr<LocalJob> job_;
};

TEST_F(P2pTest, RingExchangeInOrderPerTag) {
  Start(3);
  // Each rank sends its right neighbour three messages on tag 0 and one on
  // tag 9, then receives from its left neighbour — tag 9 first.
  std::vector<std::vector<Tensor>> got(3);
  OnEveryRank([&](ProcessGroup& g, int r) {
    const int right = (r + 1) % 3, left = (r + 2) % 3;
    std::vector<Work<Done>> sends;
    for (int k = 0; k < 3; ++k)
      sends.push_back(SendAsync(g, I64({r, k}), right, 0));
    sends.push_back(SendAsync(g, I64({r, 90}), right, 9));
    absl::StatusOr<Received> nine = Recv(g, left, 9);
    ASSERT_OK(nine);
    EXPECT_EQ(nine->src, left);
    got[r].push_back(nine->tensor);
    for (int k = 0; k < 3; ++k) {
      absl::StatusOr<Received> m = Recv(g, left, 0);
      ASSERT_OK(m);
      got[r].push_back(m->tensor);
    }
    for (Work<Done>& s : sends) EXPECT_OK(s.Wait(kWait));
  });
  for (int r = 0; r < 3; ++r) {
    const int left = (r + 2) % 3;
    ASSERT_EQ(got[r].size(), 4u);
    EXPECT_EQ(got[r][0], I64({left, 90})) << "rank " << r;
    for (int k = 0; k < 3; ++k)
      EXPECT_EQ(got[r][1 + k], I64({left, k})) << "rank " << r;
  }
  ExpectNothingLeft();
}

TEST_F(P2pTest, NegativeTagsAndComplexTensors) {
  Start(2);
  const Tensor z = *Tensor::FromVector<std::complex<float>>(
      {{1, 2}, {3, -4}, {0, 0}, {5, 6}}, {2, 2});
  OnEveryRank([&](ProcessGroup& g, int r) {
    if (r == 0) {
      EXPECT_OK(Send(g, z, 1, -3));
    } else {
      absl::StatusOr<Received> m = Recv(g, 0, -3);
      ASSERT_OK(m);
      EXPECT_EQ(m->tensor, z);
    }
  });
}

TEST_F(P2pTest, ReceivesIntoCallerMemory) {
  Start(2);
  auto memory =
      std::shared_ptr<float>(new float[4], std::default_delete<float[]>());
  TensorOut out = *OutputOver(DType::kFloat32, {4}, memory,
                              reinterpret_cast<char*>(memory.get()), 16);
  OnEveryRank([&](ProcessGroup& g, int r) {
    if (r == 0) {
      // Sent only once the receive is there: it lands in `memory`.
      absl::StatusOr<Received> ready = Recv(g, 1, 1);
      ASSERT_OK(ready);
      EXPECT_OK(Send(g, Tensor::FromVector<float>({1, 2, 3, 4}), 1));
    } else {
      Work<Received> w = RecvAsync(g, 0, 0, out);
      EXPECT_OK(Send(g, I64({0}), 0, 1));
      absl::StatusOr<Received> m = w.Wait(kWait);
      ASSERT_OK(m);
      EXPECT_EQ(m->tensor.data(), reinterpret_cast<char*>(memory.get()));
    }
  });
  EXPECT_THAT(std::vector<float>(memory.get(), memory.get() + 4),
              ::testing::ElementsAre(1, 2, 3, 4));
}

TEST_F(P2pTest, AnOutputOfAnotherShapeNamesTheSender) {
  Start(2);
  auto memory =
      std::shared_ptr<char>(new char[8], std::default_delete<char[]>());
  TensorOut out = *OutputOver(DType::kInt64, {1}, memory, memory.get(), 8);
  OnEveryRank([&](ProcessGroup& g, int r) {
    if (r == 0) {
      EXPECT_OK(Send(g, I64({1, 2}), 1));
    } else {
      EXPECT_THAT(Recv(g, 0, 0, out).status(),
                  StatusIs(absl::StatusCode::kInvalidArgument,
                           HasSubstr("recv from rank 0 (worker0) with tag 0: "
                                     "rank 0 (worker0) sent int64 [2] but the "
                                     "output is int64 [1]")));
    }
  });
}

TEST_F(P2pTest, AnySourceTakesEachSenderOnceInItsOrder) {
  Start(4);
  // Ranks 1..3 each send rank 0 two messages on tag 5; rank 0 receives six
  // from any source: each sender twice, its first before its second.
  std::vector<Received> got;
  OnEveryRank([&](ProcessGroup& g, int r) {
    if (r != 0) {
      EXPECT_OK(Send(g, I64({r, 0}), 0, 5));
      EXPECT_OK(Send(g, I64({r, 1}), 0, 5));
      return;
    }
    for (int k = 0; k < 6; ++k) {
      absl::StatusOr<Received> m = Recv(g, kAnySource, 5);
      ASSERT_OK(m);
      got.push_back(*m);
    }
  });
  ASSERT_EQ(got.size(), 6u);
  std::vector<int> seen(4, 0);
  for (const Received& m : got) {
    ASSERT_GE(m.src, 1);
    EXPECT_EQ(m.tensor, I64({m.src, seen[m.src]++}));
  }
  EXPECT_THAT(seen, ::testing::ElementsAre(0, 2, 2, 2));
  ExpectNothingLeft();
}

TEST_F(P2pTest, AnySourceAndFromOneSourceMatchInCallOrder) {
  Start(3);
  // Rank 0 calls: recv(1), recv(any), recv(2). Rank 1 sends 10 then 11;
  // rank 2 sends 20 once rank 0's first receive is done... in any order,
  // the first receive gets 10, and the receive from 2 gets 2's message.
  OnEveryRank([&](ProcessGroup& g, int r) {
    if (r == 1) {
      EXPECT_OK(Send(g, I64({10}), 0, 0));
      EXPECT_OK(Send(g, I64({11}), 0, 0));
    } else if (r == 2) {
      EXPECT_OK(Send(g, I64({20}), 0, 0));
      EXPECT_OK(Send(g, I64({21}), 0, 0));
    } else {
      Work<Received> from1 = RecvAsync(g, 1, 0);
      Work<Received> any = RecvAsync(g, kAnySource, 0);
      Work<Received> from2 = RecvAsync(g, 2, 0);
      absl::StatusOr<Received> a = from1.Wait(kWait), b = any.Wait(kWait),
                               c = from2.Wait(kWait);
      ASSERT_OK(a);
      ASSERT_OK(b);
      ASSERT_OK(c);
      EXPECT_EQ(a->tensor, I64({10}));
      if (b->src == 1) {
        EXPECT_EQ(b->tensor, I64({11}));
        EXPECT_EQ(c->tensor, I64({20}));
        EXPECT_OK(Recv(g, 2, 0).status());  // 21
      } else {
        EXPECT_EQ(b->tensor, I64({20}));
        EXPECT_EQ(c->tensor, I64({21}));
        EXPECT_OK(Recv(g, 1, 0).status());  // 11
      }
    }
  });
  ExpectNothingLeft();
}

TEST_F(P2pTest, SubgroupRanksAreGroupRanks) {
  Start(3);
  OnEveryRank([&](ProcessGroup& world, int r) {
    if (r == 0) return;
    absl::StatusOr<std::shared_ptr<ProcessGroup>> g =
        world.state().context().NewGroup({2, 1});
    ASSERT_OK(g);
    // Global 2 is group rank 0, global 1 group rank 1.
    if (r == 2) {
      EXPECT_OK(Send(**g, I64({2}), 1));
    } else {
      absl::StatusOr<Received> m = Recv(**g, 0);
      ASSERT_OK(m);
      EXPECT_EQ(m->src, 0);
      EXPECT_EQ(m->tensor, I64({2}));
    }
  });
}

TEST_F(P2pTest, BadPeersAreRefused) {
  Start(2);
  ProcessGroup& g = World(0);
  EXPECT_THAT(Send(g, I64({1}), 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dst 0 is this rank itself")));
  EXPECT_THAT(Send(g, I64({1}), 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("dst 2 is not a rank of the group (size 2)")));
  EXPECT_THAT(Recv(g, -7).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("src -7 is not a rank of the group")));
}

TEST_F(P2pTest, ADeadSourceFailsItsReceiveNamingIt) {
  Start(3);
  absl::Status status = absl::UnknownError("not run");
  absl::Notification done;
  std::thread receiver([&] {
    CollectiveOptions o;
    o.timeout = absl::Seconds(300);
    status = Recv(World(0), 2, 4, nullptr, o).status();
    done.Notify();
  });
  // Once the receive is an op of worker0's, stop its source.
  proto::WorkerStatus s;
  do {
    ASSERT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(1)));
    job_->worker(0).collectives().FillStatus(&s);
  } while (s.collectives_inflight() == 0);
  job_->worker(2).Stop();
  receiver.join();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr("recv from rank 2 (worker2) with tag "
                                         "4: rank 2 (worker2) died")));
}

// A sender's process may exit right after its last send (torch's tutorials
// end so): what arrived whole is still received, from that source or from
// any, once its death is known here (gloo's receiver reads it from the
// socket then).
TEST_F(P2pTest, AMessageThatArrivedIsReceivedAfterItsSenderDied) {
  Start(3);
  ASSERT_OK(Send(World(2), I64({7, 8}), 0, /*tag=*/4));
  ASSERT_OK(Send(World(2), I64({9}), 0, /*tag=*/5));
  job_->worker(2).Stop();
  // A message that never came fails naming the death: known here from now.
  EXPECT_THAT(Recv(World(0), 2, /*tag=*/6).status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("rank 2 (worker2) died")));

  absl::StatusOr<Received> from_two = Recv(World(0), 2, 4);
  ASSERT_OK(from_two);
  EXPECT_EQ(from_two->src, 2);
  EXPECT_EQ(from_two->tensor.ToVector<int64_t>(), std::vector<int64_t>({7, 8}));
  absl::StatusOr<Received> from_any = Recv(World(0), kAnySource, 5);
  ASSERT_OK(from_any);
  EXPECT_EQ(from_any->src, 2);
  EXPECT_EQ(from_any->tensor.ToVector<int64_t>(), std::vector<int64_t>({9}));
}

// The same when this worker is stopping (its master died, say) before the
// receive is made: the message that arrived is received, nothing else.
TEST_F(P2pTest, AMessageThatArrivedIsReceivedWhileThisWorkerStops) {
  Start(2);
  ASSERT_OK(Send(World(1), I64({3}), 0, /*tag=*/1));
  job_->worker(0).Stop();
  absl::StatusOr<Received> got = Recv(World(0), 1, 1);
  ASSERT_OK(got);
  EXPECT_EQ(got->tensor.ToVector<int64_t>(), std::vector<int64_t>({3}));
  EXPECT_THAT(Recv(World(0), 1, 1).status(),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("worker0 is stopping")));
}

// On hand-stepped timers: a receive whose message never comes ends when
// the clock reaches its deadline, not before; then the group goes on.
class P2pDeadlineTest : public P2pTest {
 protected:
  void SetUp() override {
    Start(2, {.timers = &timers_});  // Manual time.
  }
  void TearDown() override {
    timers_.Stop();
    job_.reset();
  }

  // Runs `wait` (a receive) on a thread; steps the clock to just before
  // `timeout`, then to it; returns the receive's status.
  absl::Status EndsAtItsDeadline(absl::Duration timeout,
                                 const std::function<absl::Status()>& wait) {
    absl::Status result = absl::UnknownError("not run");
    absl::Notification done;
    std::thread t([&] {
      result = wait();
      done.Notify();
    });
    // Once the receive began, its deadline is fixed on the clock.
    proto::WorkerStatus s;
    do {
      EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(1)));
      job_->worker(0).collectives().FillStatus(&s);
    } while (s.collectives_inflight() == 0);
    timers_.Advance(timeout - absl::Milliseconds(1));
    EXPECT_FALSE(done.HasBeenNotified());
    timers_.Advance(absl::Milliseconds(1));
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
      timers_.RunDue();
    }
    t.join();
    return result;
  }

  ManualClock clock_;
  ManualTimers timers_{&clock_};
};

TEST_F(P2pDeadlineTest, ReceiveFromOneSource) {
  CollectiveOptions o;
  o.timeout = absl::Hours(1);
  absl::Status s = EndsAtItsDeadline(
      o.timeout, [&] { return Recv(World(0), 1, 3, nullptr, o).status(); });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDeadlineExceeded,
                          HasSubstr("recv from rank 1 (worker1) with tag 3: no "
                                    "message within 3600000 ms")));
  // The message sent late is refused, and its sender told so.
  EXPECT_THAT(Send(World(1), I64({1}), 0, 3, o),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("no message within 3600000 ms")));
  // The next message on the tag is received.
  std::thread sender([&] { EXPECT_OK(Send(World(1), I64({2}), 0, 3, o)); });
  absl::StatusOr<Received> next = Recv(World(0), 1, 3, nullptr, o);
  sender.join();
  ASSERT_OK(next);
  EXPECT_EQ(next->tensor, I64({2}));
}

TEST_F(P2pDeadlineTest, ReceiveFromAnySource) {
  CollectiveOptions o;
  o.timeout = absl::Minutes(5);
  absl::Status s = EndsAtItsDeadline(o.timeout, [&] {
    return Recv(World(0), kAnySource, 0, nullptr, o).status();
  });
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kDeadlineExceeded,
                          HasSubstr("recv from any rank with tag 0: no "
                                    "message within 300000 ms")));
  // Its ask was withdrawn: a message sent now is the next receive's.
  std::thread sender([&] { EXPECT_OK(Send(World(1), I64({7}), 0, 0, o)); });
  absl::StatusOr<Received> next = Recv(World(0), kAnySource, 0, nullptr, o);
  sender.join();
  ASSERT_OK(next);
  EXPECT_EQ(next->src, 1);
  EXPECT_EQ(next->tensor, I64({7}));
}

}  // namespace
}  // namespace ferry
