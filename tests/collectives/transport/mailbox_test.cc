#include "collectives/transport/mailbox.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/base/limits.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

const MessageKey kA{"world/1", 0, 2};

// A mailbox where one sender may hold a message like kA of `bytes` of
// payload (and two senders one each): one sender holds at most half.
Limits Room(int64_t bytes, int64_t ttl_ms = 60000) {
  Limits limits;
  limits.max_mailbox_bytes = 2 * Mailbox::Charge(kA, bytes);
  limits.mailbox_ttl_ms = ttl_ms;
  return limits;
}

class MailboxTest : public ::testing::Test {
 protected:
  ManualClock clock_;
};

TEST_F(MailboxTest, ReceiveBeforeDeliver) {
  Mailbox box(Room(1000), &clock_);
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

TEST_F(MailboxTest, ReceiveAfterDeliver) {
  Mailbox box(Room(1000), &clock_);
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value(int64_t{7}), 10));
  // The payload, the key and a fixed overhead count.
  EXPECT_EQ(box.held_bytes(), Mailbox::Charge(kA, 10));
  EXPECT_GT(Mailbox::Charge(kA, 10), 10 + static_cast<int64_t>(kA.op.size()));
  EXPECT_EQ(box.held_messages(), 1);
  Future<Value> f = box.Receive(kA);
  ASSERT_TRUE(f.IsReady());
  ASSERT_OK_AND_ASSIGN(Value v, f.Wait(absl::ZeroDuration()));
  EXPECT_EQ(v, Value(int64_t{7}));
  EXPECT_EQ(box.held_bytes(), 0);
  EXPECT_EQ(box.held_messages(), 0);
}

TEST_F(MailboxTest, KeysAreOpStepAndSource) {
  Mailbox box(Room(1000), &clock_);
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

TEST_F(MailboxTest, NoRoomIsBackpressure) {
  Mailbox box(Room(100), &clock_);
  const MessageKey b{"world/1", 0, 3};
  const MessageKey c{"world/1", 0, 1};
  ASSERT_OK(box.Admit(kA, 100));
  // Admitted but not yet delivered counts too.
  EXPECT_EQ(box.held_bytes(), Mailbox::Charge(kA, 100));
  ASSERT_OK(box.Admit(b, 100));
  absl::Status full = box.Admit(c, 1);
  EXPECT_THAT(full, StatusIs(absl::StatusCode::kResourceExhausted,
                             HasSubstr("collective buffer full")));
  EXPECT_TRUE(IsBackpressure(full));
  ASSERT_OK(box.Deliver(kA, Value(1), 100));
  box.Release(b, 100);  // Not delivered after all.
  // A message someone waits for is never refused for room.
  Future<Value> waiting = box.Receive(c);
  ASSERT_OK(box.Admit(c, 400));
  ASSERT_OK(box.Deliver(c, Value(3), 400));
  EXPECT_EQ(waiting.Wait(absl::ZeroDuration()).value(), Value(3));
  // Receiving frees room.
  EXPECT_EQ(box.Receive(kA).Wait(absl::ZeroDuration()).value(), Value(1));
  EXPECT_EQ(box.held_bytes(), 0);
}

// Issue 49: one sender's messages not asked for yet hold at most half the
// mailbox, so the others always have room; past it, backpressure (its
// messages wait, none is dropped). On 1dde932 one sender could fill it.
TEST_F(MailboxTest, OneSenderHoldsAtMostHalf) {
  Mailbox box(Room(100), &clock_);
  const MessageKey next{"world/2", 0, 2};  // kA's sender again.
  ASSERT_OK(box.Admit(kA, 100));
  ASSERT_OK(box.Deliver(kA, Value(1), 100));
  absl::Status over = box.Admit(next, 1);
  EXPECT_THAT(over,
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr(absl::StrCat("rank 2's messages hold ",
                                                    Mailbox::Charge(kA, 100),
                                                    " bytes here")),
                             HasSubstr("half of --max_mailbox_mb"))));
  EXPECT_TRUE(IsBackpressure(over));
  // Another sender has its half.
  const MessageKey other{"world/2", 0, 3};
  ASSERT_OK(box.Admit(other, 100));
  box.Release(other, 100);
  // A message its receiver asks for is taken whatever its sender holds.
  Future<Value> asked = box.Receive(next);
  ASSERT_OK(box.Admit(next, 100));
  ASSERT_OK(box.Deliver(next, Value(2), 100));
  EXPECT_EQ(asked.Wait(absl::ZeroDuration()).value(), Value(2));
  // Once its held message is taken, the sender has room again.
  EXPECT_EQ(box.Receive(kA).Wait(absl::ZeroDuration()).value(), Value(1));
  ASSERT_OK(box.Admit({"world/3", 0, 2}, 100));
  box.Release({"world/3", 0, 2}, 100);
  EXPECT_EQ(box.held_bytes(), 0);
}

// Before, an empty mailbox admitted one message of up to 1 TiB, and an
// awaited one of any size: one peer could make the worker hold that much.
TEST_F(MailboxTest, OneMessageIsBoundedEvenWhenEmptyOrAwaited) {
  Limits limits;
  limits.max_mailbox_bytes = 4 * Limits::kMiB;
  Mailbox box(limits, &clock_);
  EXPECT_EQ(box.max_message_bytes(),
            4 * Limits::kMiB + Mailbox::kFramingAllowance);
  absl::Status big = box.Admit(kA, 5 * Limits::kMiB);
  EXPECT_THAT(big, StatusIs(absl::StatusCode::kResourceExhausted,
                            HasSubstr("(--max_mailbox_mb=4)")));
  EXPECT_FALSE(IsBackpressure(big));  // For good: no point retrying.
  Future<Value> waiting = box.Receive(kA);
  EXPECT_THAT(box.Admit(kA, int64_t{1} << 40),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("--max_mailbox_mb=4")));
  EXPECT_EQ(box.held_bytes(), 0);
  // Exactly the limit (a tensor of 4 MiB and its framing) is fine.
  ASSERT_OK(box.Admit(kA, box.max_message_bytes()));
}

// TakeHeld takes only what arrived whole, of an op not aborted, and never
// leaves a waiter behind.
TEST_F(MailboxTest, TakeHeldTakesOnlyAWholeMessage) {
  Mailbox box(Room(1000), &clock_);
  EXPECT_FALSE(box.TakeHeld(kA).has_value());  // Nothing came.
  ASSERT_OK(box.Admit(kA, 10));
  EXPECT_FALSE(box.TakeHeld(kA).has_value());  // Still arriving.
  ASSERT_OK(box.Deliver(kA, Value("hello"), 10));
  std::optional<Value> taken = box.TakeHeld(kA);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(*taken, Value("hello"));
  EXPECT_EQ(box.held_messages(), 0);
  EXPECT_EQ(box.held_bytes(), 0);
  // A message of an aborted op is not handed out.
  const MessageKey other{"world/3", 0, 1};
  ASSERT_OK(box.Admit(other, 5));
  ASSERT_OK(box.Deliver(other, Value("late"), 5));
  (void)box.Abort("world/3", absl::CancelledError("gone"));
  EXPECT_FALSE(box.TakeHeld(other).has_value());
  // Asking left no waiter: a later delivery is held, not handed to one.
  const MessageKey again{"world/1", 1, 2};
  EXPECT_FALSE(box.TakeHeld(again).has_value());
  ASSERT_OK(box.Admit(again, 3));
  ASSERT_OK(box.Deliver(again, Value("held"), 3));
  EXPECT_EQ(box.held_messages(), 1);
}

TEST_F(MailboxTest, AbortFailsWaitersAndLaterReceivesAndDropsHeld) {
  Mailbox box(Room(1000), &clock_);
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
  EXPECT_EQ(box.held_bytes(), Mailbox::Charge(unrelated, 5));
  EXPECT_EQ(box.Receive(held).Wait(absl::ZeroDuration()).status(), failed);
  // Later receives, admissions and deliveries of the op fail with it.
  EXPECT_EQ(box.Receive({"world/1", 7, 0}).Wait(absl::ZeroDuration()).status(),
            failed);
  EXPECT_EQ(box.Admit({"world/1", 2, 1}, 1), failed);
  EXPECT_EQ(box.AbortStatus("world/1"), failed);
  EXPECT_OK(box.AbortStatus("world/2"));
  // Other ops are untouched (also ops whose name extends this one's).
  EXPECT_EQ(box.Receive(unrelated).Wait(absl::ZeroDuration()).value(),
            Value("keep"));
  EXPECT_EQ(box.held_bytes(), 0);
}

TEST_F(MailboxTest, AbortTouchesOnlyItsOwnOp) {
  Mailbox box(Room(1000), &clock_);
  const MessageKey longer{"world/10", 0, 2};
  const MessageKey shorter{"world/", 0, 2};
  for (const MessageKey& k : {longer, shorter}) {
    ASSERT_OK(box.Admit(k, 1));
    ASSERT_OK(box.Deliver(k, Value(1), 1));
  }
  Future<Value> other = box.Receive({"world/10", 1, 1});
  (void)box.Abort("world/1", absl::UnavailableError("x"));
  EXPECT_EQ(box.held_messages(), 2);
  EXPECT_FALSE(other.IsReady());
}

TEST_F(MailboxTest, DeliverAfterAbortReleasesItsBytes) {
  Mailbox box(Room(100), &clock_);
  ASSERT_OK(box.Admit(kA, 80));  // Admitted, then the op fails mid-stream.
  (void)box.Abort("world/1", absl::DeadlineExceededError("late"));
  EXPECT_THAT(box.Deliver(kA, Value(1), 80),
              StatusIs(absl::StatusCode::kDeadlineExceeded, "late"));
  EXPECT_EQ(box.held_bytes(), 0);
  EXPECT_EQ(box.held_messages(), 0);
  ASSERT_OK(box.Admit({"world/2", 0, 2}, 100));
}

TEST_F(MailboxTest, FirstAbortWins) {
  Mailbox box(Room(100), &clock_);
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

// An op's abort watch: no message completes it, its abort (or close) does,
// and one made after the abort fails at once.
TEST_F(MailboxTest, WhenAbortedWaitsForTheAbortOnly) {
  Mailbox box(Room(1000), &clock_);
  Future<Value> watch = box.WhenAborted("world/1");
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value("hello"), 10));
  EXPECT_FALSE(watch.IsReady());
  box.Abort("world/1", absl::UnavailableError("rank 2 died")).IgnoreError();
  EXPECT_THAT(watch.Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kUnavailable, "rank 2 died"));
  EXPECT_THAT(box.WhenAborted("world/1").Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kUnavailable, "rank 2 died"));
  Future<Value> closed = box.WhenAborted("world/2");
  box.Close("world/2");
  EXPECT_THAT(closed.Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// A peer's abort may carry code 0: the op still fails.
TEST_F(MailboxTest, AbortWithoutACodeStillFails) {
  Mailbox box(Room(100), &clock_);
  EXPECT_THAT(box.Abort("world/1", absl::OkStatus()),
              StatusIs(absl::StatusCode::kUnknown));
  EXPECT_THAT(box.Receive(kA).Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kUnknown));
}

// An abort flood keeps a bounded memory: the oldest aborts are forgotten,
// by count and by bytes.
TEST_F(MailboxTest, AbortsAreRememberedWithinABound) {
  Mailbox box(Room(100), &clock_);
  const std::string error(4000, 'e');
  const int n = 2 * static_cast<int>(Mailbox::kAbortedMemory);
  for (int i = 0; i < n; ++i) {
    (void)box.Abort(absl::StrCat("world/", i), absl::InternalError(error));
  }
  EXPECT_OK(box.AbortStatus("world/0"));  // Forgotten.
  EXPECT_THAT(box.AbortStatus(absl::StrCat("world/", n - 1)),
              StatusIs(absl::StatusCode::kInternal));
  const int64_t kept = Mailbox::kAbortedMemoryBytes / 4000;
  EXPECT_OK(box.AbortStatus(absl::StrCat("world/", n - 1 - kept - 1)));
}

TEST_F(MailboxTest, ImpossibleSizesAndDuplicatesAreRefused) {
  Mailbox box(Room(1000), &clock_);
  EXPECT_THAT(box.Admit(kA, -1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(box.Admit(kA, int64_t{1} << 62),
              StatusIs(absl::StatusCode::kResourceExhausted));
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value(1), 10));
  ASSERT_OK(box.Admit(kA, 10));
  EXPECT_THAT(box.Deliver(kA, Value(2), 10),
              StatusIs(absl::StatusCode::kAlreadyExists));
  // The duplicate's bytes were given back.
  EXPECT_EQ(box.held_bytes(), Mailbox::Charge(kA, 10));
}

// Once an op is over here, what still arrives for it is refused.
TEST_F(MailboxTest, CloseRefusesLateMessages) {
  Mailbox box(Room(100), &clock_);
  box.Begin(kA.op);
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value(1), 10));
  box.Close(kA.op);
  EXPECT_EQ(box.held_bytes(), 0);
  EXPECT_THAT(box.Admit(kA, 10),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

// Before, a message for an op that never began here was kept forever.
TEST_F(MailboxTest, MessagesOfOpsThatNeverBeginExpire) {
  Mailbox box(Room(1000, /*ttl_ms=*/5000), &clock_);
  const MessageKey later{"world/2", 0, 2};
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value(1), 10));
  clock_.Advance(absl::Seconds(3));
  ASSERT_OK(box.Admit(later, 10));
  ASSERT_OK(box.Deliver(later, Value(2), 10));
  clock_.Advance(absl::Milliseconds(1999));
  box.ExpireStale();
  EXPECT_EQ(box.held_messages(), 2);  // Not yet.
  clock_.Advance(absl::Milliseconds(1));
  box.ExpireStale();
  EXPECT_EQ(box.held_messages(), 1);
  EXPECT_EQ(box.held_bytes(), Mailbox::Charge(later, 10));
  // The op fails here with why, naming the flag, if it ever begins; and
  // refuses what else comes for it.
  EXPECT_THAT(box.Receive(kA).Wait(absl::ZeroDuration()),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("(--mailbox_ttl_ms=5000)")));
  EXPECT_THAT(box.Admit({kA.op, 1, 2}, 1),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  // Admissions look for stale messages too (no sweep needed).
  clock_.Advance(absl::Seconds(3));
  ASSERT_OK(box.Admit({"world/3", 0, 2}, 1));
  EXPECT_EQ(box.held_messages(), 0);
  EXPECT_EQ(box.held_bytes(), Mailbox::Charge({"world/3", 0, 2}, 1));
}

TEST_F(MailboxTest, MessagesOfOpsThatBeganWaitForThem) {
  Mailbox box(Room(1000, /*ttl_ms=*/5000), &clock_);
  const MessageKey early{"world/2", 0, 2};
  // One arrives before its op begins, one after.
  ASSERT_OK(box.Admit(early, 10));
  ASSERT_OK(box.Deliver(early, Value(1), 10));
  box.Begin(kA.op);
  box.Begin(early.op);
  ASSERT_OK(box.Admit(kA, 10));
  ASSERT_OK(box.Deliver(kA, Value(2), 10));
  clock_.Advance(absl::Minutes(10));
  box.ExpireStale();
  EXPECT_EQ(box.held_messages(), 2);
  EXPECT_EQ(box.Receive(early).Wait(absl::ZeroDuration()).value(), Value(1));
  EXPECT_EQ(box.Receive(kA).Wait(absl::ZeroDuration()).value(), Value(2));
  box.Close(kA.op);
  box.Close(early.op);
  EXPECT_EQ(box.held_bytes(), 0);
}

}  // namespace
}  // namespace ferry
