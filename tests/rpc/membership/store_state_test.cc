// The job's store's logic (StoreState), in-process on hand-stepped timers:
// what a caller may hold, what it gives back and when, and what a write
// looks at. Issue 49's R2-R4 are cases here (and against real ferryd in
// tests/tools/hostile_store_test.cc).
#include "rpc/membership/store_state.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/store.pb.h"
#include "rpc/membership/store_budget.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr auto kExhausted = absl::StatusCode::kResourceExhausted;

const StoreCaller kWorker1{1, true};
const StoreCaller kClientA{(uint64_t{1} << 32) + 1, false};
const StoreCaller kClientB{(uint64_t{1} << 32) + 2, false};
const StoreCaller kAnonymous{std::nullopt, false};

// One Get or Wait and its answer, once it comes.
struct Call {
  proto::StoreGetResponse get;
  proto::StoreWaitResponse wait;
  std::optional<absl::Status> status;
  uint64_t id = 0;
};

class StoreStateTest : public ::testing::Test {
 protected:
  void Start(StoreLimits limits) {
    state_ = std::make_unique<StoreState>(std::move(limits), &timers_);
  }
  void TearDown() override {
    state_.reset();
    timers_.Stop();
  }

  absl::Status Set(const StoreCaller& c, const std::string& key,
                   const std::string& value) {
    proto::StoreSetRequest r;
    r.set_key(key);
    r.set_value(value);
    return state_->Set(c, r);
  }
  absl::Status Delete(const StoreCaller& c, const std::string& key) {
    proto::StoreDeleteRequest r;
    r.set_key(key);
    proto::StoreDeleteResponse response;
    return state_->Delete(c, r, &response);
  }
  Call* Get(const StoreCaller& c, const std::string& key,
            absl::Duration wait = absl::Hours(1)) {
    Call* call = calls_.emplace_back(std::make_unique<Call>()).get();
    proto::StoreGetRequest r;
    r.set_key(key);
    r.set_wait_ms(absl::ToInt64Milliseconds(wait));
    call->id = state_->Get(c, r, &call->get, absl::InfiniteDuration(),
                           [call](absl::Status s) { call->status = s; });
    return call;
  }
  Call* Wait(const StoreCaller& c, const std::vector<std::string>& keys,
             absl::Duration wait = absl::Hours(1)) {
    Call* call = calls_.emplace_back(std::make_unique<Call>()).get();
    proto::StoreWaitRequest r;
    for (const std::string& k : keys) r.add_keys(k);
    r.set_wait_ms(absl::ToInt64Milliseconds(wait));
    call->id =
        state_->Wait(c, std::move(r), &call->wait, absl::InfiniteDuration(),
                     [call](absl::Status s) { call->status = s; });
    return call;
  }

  ManualClock clock_;
  ManualTimers timers_{&clock_};
  // Each call's answer, kept until the state is gone (it answers them all).
  std::vector<std::unique_ptr<Call>> calls_;
  std::unique_ptr<StoreState> state_;
};

// R2: waits whose callers gave up leave the store and give back what they
// held; the job's waits are open to the next caller. (On 1dde932 4096
// cancelled Gets closed every later wait for an hour.)
TEST_F(StoreStateTest, CancelledWaitsLeaveAndGiveBack) {
  StoreLimits limits;
  limits.shares.job.waits = 4;
  Start(limits);
  std::vector<Call*> abandoned;
  for (int i = 0; i < 4; ++i) {
    abandoned.push_back(Get(kClientA, absl::StrCat("never", i)));
  }
  EXPECT_EQ(state_->num_waits(), 4);
  EXPECT_EQ(state_->held(kClientA).waits, 4);
  Call* refused = Get(kClientB, "late");
  EXPECT_THAT(*refused->status,
              StatusIs(kExhausted, HasSubstr("would hold 5 waiting calls, "
                                             "over the limit of 4 per job")));
  for (const auto& c : abandoned) state_->Cancel(c->id);
  for (const auto& c : abandoned) {
    EXPECT_THAT(*c->status, StatusIs(absl::StatusCode::kCancelled));
  }
  EXPECT_EQ(state_->num_waits(), 0);
  EXPECT_EQ(state_->held(kClientA), StoreAmount{});
  EXPECT_EQ(state_->job_held(), StoreAmount{});
  Call* honest = Get(kClientB, "late");
  EXPECT_FALSE(honest->status.has_value());
  ASSERT_OK(Set(kWorker1, "late", "v"));
  ASSERT_OK(*honest->status);
  EXPECT_EQ(honest->get.value(), "v");
  // A second cancel, and one of a wait that ended, change nothing.
  state_->Cancel(abandoned[0]->id);
  state_->Cancel(honest->id);
  EXPECT_EQ(state_->num_waits(), 0);
}

// A wait gives back what it held at its deadline too.
TEST_F(StoreStateTest, AWaitGivesBackAtItsDeadline) {
  Start({});
  Call* c = Wait(kClientA, {"x", "y"}, absl::Seconds(10));
  EXPECT_EQ(state_->held(kClientA).waits, 1);
  timers_.Advance(absl::Seconds(10) - absl::Milliseconds(1));
  EXPECT_FALSE(c->status.has_value());
  timers_.Advance(absl::Milliseconds(1));
  EXPECT_THAT(*c->status,
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("key \"x\" not set within 10000 ms")));
  EXPECT_EQ(state_->job_held(), StoreAmount{});
}

// R3: a wait's keys are deduplicated (65,536 copies of a key cost one) and
// bounded in number; and a write looks only at the waits on its key. (On
// 1dde932 every Set scanned every waiter's every key: 0.4 ms → 2.4 s.)
TEST_F(StoreStateTest, AWriteLooksOnlyAtTheWaitsOnItsKey) {
  StoreLimits limits;
  limits.max_wait_keys = 1000;
  Start(limits);
  std::vector<std::string> copies(65536, "k0");
  Call* dup = Wait(kClientA, copies);
  EXPECT_EQ(state_->held(kClientA).wait_bytes, 2 + StoreState::kPerWaitedKey);
  std::vector<Call*> flood;
  for (int w = 0; w < 60; ++w) {
    std::vector<std::string> keys;
    for (int k = 0; k < 1000; ++k) keys.push_back(absl::StrCat("k", k));
    flood.push_back(Wait(kClientA, keys));
  }
  std::vector<std::string> too_many;
  for (int k = 0; k < 1001; ++k) too_many.push_back(absl::StrCat("z", k));
  EXPECT_THAT(*Wait(kClientA, too_many)->status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("more than 1000 distinct keys")));
  EXPECT_EQ(state_->num_waits(), 61);
  ASSERT_OK(Set(kClientB, "elsewhere", "1"));
  EXPECT_EQ(state_->waits_examined(), 0);
  ASSERT_OK(Set(kClientB, "k999", "1"));
  EXPECT_EQ(state_->waits_examined(), 60);
  // Setting k0 completes the one that waited for it alone.
  ASSERT_OK(Set(kClientB, "k0", "1"));
  EXPECT_EQ(state_->waits_examined(), 121);
  ASSERT_OK(*dup->status);
  EXPECT_TRUE(dup->wait.all_set());
  EXPECT_EQ(state_->num_waits(), 60);
}

// A key deleted is missing again for the waits on it: a wait ends when
// all its keys are set at once.
TEST_F(StoreStateTest, ADeletedKeyIsMissingAgain) {
  Start({});
  Call* c = Wait(kClientA, {"a", "b"});
  ASSERT_OK(Set(kClientB, "a", "1"));
  ASSERT_OK(Delete(kClientB, "a"));
  ASSERT_OK(Set(kClientB, "b", "1"));
  EXPECT_FALSE(c->status.has_value());
  ASSERT_OK(Set(kClientB, "a", "2"));
  ASSERT_OK(*c->status);
  EXPECT_TRUE(c->wait.all_set());
}

// R4: one client fills only its own share; other callers still write, and
// the workers' keys under "ferry/" have a share no client can take. (On
// 1dde932 ~90 Sets of one client filled the job's 64 MiB and every
// ferry.agree failed.)
TEST_F(StoreStateTest, OneClientFillsOnlyItsShare) {
  StoreLimits limits;
  limits.shares.caller = {4, 1000, 2, 1000};
  limits.shares.job = {10, 10000, 4, 10000};
  limits.shares.reserved = {2, 100, 1, 100};
  Start(limits);
  for (int i = 0; i < 4; ++i) {
    ASSERT_OK(Set(kClientA, absl::StrCat("a", i), "v"));
  }
  EXPECT_THAT(Set(kClientA, "a4", "v"),
              StatusIs(kExhausted,
                       HasSubstr("client node 4294967297 would hold 5 keys, "
                                 "over the limit of 4 per caller; key \"a4\" "
                                 "not set")));
  ASSERT_OK(Set(kClientB, "b0", "v"));
  // The anonymous callers are one account.
  ASSERT_OK(Set(kAnonymous, "n0", "v"));
  EXPECT_EQ(state_->held(kAnonymous).keys, 1);
  // Rewriting a key charges its new writer; deleting gives it back.
  ASSERT_OK(Set(kClientB, "a0", "w"));
  EXPECT_EQ(state_->held(kClientA).keys, 3);
  EXPECT_EQ(state_->held(kClientB).keys, 2);
  ASSERT_OK(Set(kClientA, "a4", "v"));
  ASSERT_OK(Delete(kClientA, "a4"));
  EXPECT_EQ(state_->held(kClientA).keys, 3);
  // The job's share: 6 keys held; four more clients fill it.
  for (uint64_t n = 10; n < 14; ++n) {
    StoreCaller c{(uint64_t{1} << 32) + n, false};
    ASSERT_OK(Set(c, absl::StrCat("c", n), "v"));
  }
  EXPECT_THAT(Set(kClientB, "b1", "v"),
              StatusIs(kExhausted, HasSubstr("over the limit of 10 per job")));
  // A worker's agreement keys go to the reserved share.
  ASSERT_OK(Set(kWorker1, "ferry/agree/g/1", "1:0,1"));
  ASSERT_OK(Set(kWorker1, "ferry/agree/g/2", "1:0,1"));
  EXPECT_EQ(state_->reserved_held().keys, 2);
  // A client's "ferry/" key is its own (no reserved share for it).
  EXPECT_THAT(Set(kClientB, "ferry/x", "v"), StatusIs(kExhausted));
  // The reserved share full, a worker's key goes to its own account,
  // within the job's.
  EXPECT_THAT(Set(kWorker1, "ferry/agree/g/3", "1:0,1"),
              StatusIs(kExhausted, HasSubstr("per job")));
  ASSERT_OK(Delete(kClientB, "b0"));
  ASSERT_OK(Set(kWorker1, "ferry/agree/g/3", "1:0,1"));
  EXPECT_EQ(state_->held(kWorker1).keys, 1);
  // Waits: per caller, then the job's; a worker's waits on "ferry/" keys
  // have the reserved one.
  Get(kClientA, "x1");
  Get(kClientA, "x2");
  EXPECT_THAT(*Get(kClientA, "x3")->status,
              StatusIs(kExhausted, HasSubstr("3 waiting calls, over the limit "
                                             "of 2 per caller")));
  Get(kClientB, "x3");
  Get(kClientB, "x4");
  EXPECT_THAT(*Get(kAnonymous, "x5")->status,
              StatusIs(kExhausted, HasSubstr("per job")));
  Call* sys = Get(kWorker1, "ferry/agree/g/4");
  EXPECT_FALSE(sys->status.has_value());
  EXPECT_EQ(state_->reserved_held().waits, 1);
  state_->Stop();
  EXPECT_THAT(*sys->status, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(state_->reserved_held().waits, 0);
  EXPECT_EQ(state_->job_held().waits, 0);
}

// Bytes count too: a larger value needs room for the difference.
TEST_F(StoreStateTest, BytesAreChargedToTheWriter) {
  StoreLimits limits;
  limits.shares.caller.bytes = 20;
  Start(limits);
  ASSERT_OK(Set(kClientA, "k", std::string(10, 'x')));
  EXPECT_EQ(state_->held(kClientA).bytes, 11);
  ASSERT_OK(Set(kClientA, "k", std::string(19, 'x')));
  EXPECT_THAT(Set(kClientA, "k", std::string(20, 'x')),
              StatusIs(kExhausted, HasSubstr("would hold 21 bytes of keys and "
                                             "values, over the limit of 20")));
  EXPECT_EQ(state_->held(kClientA).bytes, 20);
}

TEST_F(StoreStateTest, OnlyWorkersChangeTheAgreementsKeys) {
  Start({});
  const std::string key = absl::StrCat(StoreState::kWorkersOnly, "w/t:1");
  EXPECT_THAT(Set(kClientA, key, "1:0"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("the caller (client node 4294967297) is "
                                 "none")));
  EXPECT_THAT(Delete(kAnonymous, key),
              StatusIs(absl::StatusCode::kPermissionDenied));
  ASSERT_OK(Set(kWorker1, key, "1:0"));
}

}  // namespace
}  // namespace ferry
