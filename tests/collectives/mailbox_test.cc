#include "collectives/mailbox.h"

#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

const MessageKey kA{"world/1", 0, 2};

TEST(MailboxTest, ReceiveBeforeDeliver) {
  Mailbox box(1000);
  Future<Value> f = box.Receive(kA);
  EXPECT_FALSE(f.IsReady());
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value("hello"), 10));
  ASSERT_TRUE(f.IsReady());
  ASSERT_OK_AND_ASSIGN(Value v, f.Wait(absl::ZeroDuration()));
  EXPECT_EQ(v, Value("hello"));
  // Handed over at once: nothing held.
  EXPECT_EQ(box.held_bytes(), 0);
  EXPECT_EQ(box.held_messages(), 0);
}

TEST(MailboxTest, ReceiveAfterDeliver) {
  Mailbox box(1000);
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value(int64_t{7}), 10));
  EXPECT_EQ(box.held_bytes(), 10);
  EXPECT_EQ(box.held_messages(), 1);
  Future<Value> f = box.Receive(kA);
  ASSERT_TRUE(f.IsReady());
  ASSERT_OK_AND_ASSIGN(Value v, f.Wait(absl::ZeroDuration()));
  EXPECT_EQ(v, Value(int64_t{7}));
  EXPECT_EQ(box.held_bytes(), 0);
  EXPECT_EQ(box.held_messages(), 0);
}

TEST(MailboxTest, KeysAreOpStepAndSource) {
  Mailbox box(1000);
  const MessageKey other_step{"world/1", 1, 2};
  const MessageKey other_src{"world/1", 0, 3};
  const MessageKey other_op{"world/2", 0, 2};
  for (const MessageKey& k : {kA, other_step, other_src, other_op}) {
    ASSERT_OK(box.Admit(k, 1));
    ASSERT_OK(box.Deliver(k,
                          Value(k.op + "/" + std::to_string(k.step) + "/" +
                                std::to_string(k.src)),
                          1));
  }
  EXPECT_EQ(box.held_messages(), 4);
  EXPECT_EQ(box.Receive(other_src).Wait(absl::ZeroDuration()).value(),
            Value("world/1/0/3"));
  EXPECT_EQ(box.Receive(other_op).Wait(absl::ZeroDuration()).value(),
            Value("world/2/0/2"));
  EXPECT_EQ(box.Receive(kA).Wait(absl::ZeroDuration()).value(),
            Value("world/1/0/2"));
  EXPECT_EQ(box.Receive(other_step).Wait(absl::ZeroDuration()).value(),
            Value("world/1/1/2"));
  // A second receive of the same key waits for a second message.
  EXPECT_FALSE(box.Receive(kA).IsReady());
}

TEST(MailboxTest, AdmitBoundIsResourceExhausted) {
  Mailbox box(100);
  const MessageKey b{"world/1", 0, 3};
  const MessageKey c{"world/1", 0, 4};
  ASSERT_OK(box.Admit(kA, 60));
  // Admitted but not yet delivered counts too.
  EXPECT_EQ(box.held_bytes(), 60);
  EXPECT_THAT(box.Admit(b, 60),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("collective buffer full (60 of 100 bytes "
                                 "held)")));
  // Up to the bound is fine.
  ASSERT_OK(box.Admit(b, 40));
  ASSERT_OK(box.Deliver(kA, Value(1), 60));
  ASSERT_OK(box.Deliver(b, Value(2), 40));
  EXPECT_THAT(box.Admit(c, 1), StatusIs(absl::StatusCode::kResourceExhausted));
  // A message someone waits for is never refused.
  Future<Value> waiting = box.Receive(c);
  ASSERT_OK(box.Admit(c, 500));
  ASSERT_OK(box.Deliver(c, Value(3), 500));
  EXPECT_EQ(waiting.Wait(absl::ZeroDuration()).value(), Value(3));
  // Receiving frees room.
  EXPECT_EQ(box.Receive(kA).Wait(absl::ZeroDuration()).value(), Value(1));
  EXPECT_EQ(box.held_bytes(), 40);
  ASSERT_OK(box.Admit({"world/9", 0, 0}, 60));
  box.Release(60);  // Not delivered after all.
  EXPECT_EQ(box.held_bytes(), 40);
}

TEST(MailboxTest, EmptyBoxAdmitsOneOversizedMessage) {
  Mailbox box(100);
  ASSERT_OK(box.Admit(kA, 1000));  // Else it could never be sent.
  EXPECT_THAT(box.Admit({"world/1", 0, 3}, 1),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(MailboxTest, AbortFailsWaitersAndLaterReceivesAndDropsHeld) {
  Mailbox box(1000);
  const absl::Status failed =
      absl::InvalidArgumentError("all_reduce op 1: rank 2 has …");
  const MessageKey held{"world/1", 1, 3};
  const MessageKey unrelated{"world/2", 0, 2};
  Future<Value> waiting = box.Receive(kA);
  ASSERT_OK(box.Admit(held, 50));
  ASSERT_OK(box.Deliver(held, Value("stale"), 50));
  ASSERT_OK(box.Admit(unrelated, 5));
  ASSERT_OK(box.Deliver(unrelated, Value("keep"), 5));
  EXPECT_EQ(box.held_messages(), 2);

  (void)box.Abort("world/1", failed);
  ASSERT_TRUE(waiting.IsReady());
  EXPECT_EQ(waiting.Wait(absl::ZeroDuration()).status(), failed);
  // The held message is gone, its bytes given back.
  EXPECT_EQ(box.held_messages(), 1);
  EXPECT_EQ(box.held_bytes(), 5);
  EXPECT_EQ(box.Receive(held).Wait(absl::ZeroDuration()).status(), failed);
  // Later receives, admissions and deliveries of the op fail with it.
  EXPECT_EQ(box.Receive({"world/1", 7, 0}).Wait(absl::ZeroDuration()).status(),
            failed);
  EXPECT_EQ(box.Admit({"world/1", 2, 1}, 1), failed);
  EXPECT_EQ(box.AbortStatus("world/1"), failed);
  EXPECT_OK(box.AbortStatus("world/2"));
  // Other ops are untouched.
  EXPECT_EQ(box.Receive(unrelated).Wait(absl::ZeroDuration()).value(),
            Value("keep"));
  EXPECT_EQ(box.held_bytes(), 0);
}

TEST(MailboxTest, DeliverAfterAbortReleasesItsBytes) {
  Mailbox box(100);
  ASSERT_OK(box.Admit(kA, 80));  // Admitted, then the op fails mid-stream.
  (void)box.Abort("world/1", absl::DeadlineExceededError("late"));
  EXPECT_THAT(box.Deliver(kA, Value(1), 80),
              StatusIs(absl::StatusCode::kDeadlineExceeded, "late"));
  EXPECT_EQ(box.held_bytes(), 0);
  EXPECT_EQ(box.held_messages(), 0);
  ASSERT_OK(box.Admit({"world/2", 0, 0}, 100));
}

TEST(MailboxTest, FirstAbortWins) {
  Mailbox box(100);
  EXPECT_THAT(box.Abort("world/1", absl::UnavailableError("first")),
              StatusIs(absl::StatusCode::kUnavailable, "first"));
  // The loser learns the winner's status (so every rank reports one).
  EXPECT_THAT(box.Abort("world/1", absl::InvalidArgumentError("second")),
              StatusIs(absl::StatusCode::kUnavailable, "first"));
  EXPECT_THAT(box.AbortStatus("world/1"),
              StatusIs(absl::StatusCode::kUnavailable, "first"));
  EXPECT_THAT(box.Receive(kA).Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kUnavailable, "first"));
}

}  // namespace
// A peer's abort may carry code 0: the op still fails.
TEST(MailboxTest, AbortWithoutACodeStillFails) {
  Mailbox box(100);
  EXPECT_THAT(box.Abort("world/1", absl::OkStatus()),
              StatusIs(absl::StatusCode::kUnknown));
  EXPECT_THAT(box.Receive(kA).Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kUnknown));
}

TEST(MailboxTest, ImpossibleSizesAndDuplicatesAreRefused) {
  Mailbox box(100);
  EXPECT_THAT(box.Admit(kA, -1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(box.Admit(kA, int64_t{1} << 62),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value(1), 10));
  ASSERT_OK(box.Admit(kA, 10));
  EXPECT_THAT(box.Deliver(kA, Value(2), 10),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(box.held_bytes(), 10);  // The duplicate's bytes were given back.
}

// Once an op is over here, what still arrives for it is refused.
TEST(MailboxTest, CloseRefusesLateMessages) {
  Mailbox box(100);
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value(1), 10));
  box.Close(kA.op);
  EXPECT_EQ(box.held_bytes(), 0);
  EXPECT_THAT(box.Admit(kA, 10),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace ferry
