// Protocol tests of the owner table, stepped by hand: messages arrive in
// every order, twice, or never; time moves only when the test says so.
// Every test ends with the table empty (no value outlives its references).
#include "rref/owner_table.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr uint64_t kOwner = 1;
constexpr uint64_t kAlice = 2;
constexpr uint64_t kBob = 3;
constexpr absl::Duration kLease = absl::Seconds(10);

const GlobalId kRRef{kAlice, 1};
const GlobalId kAliceFork{kAlice, 2};
const GlobalId kBobFork{kAlice, 3};

// Records what a callback received.
template <typename T>
struct Outcome {
  std::optional<T> result;
  auto Callback() {
    return [this](T r) { result = std::move(r); };
  }
};

class OwnerTableTest : public ::testing::Test {
 protected:
  OwnerTableTest() : table_(kOwner, &clock_, Options()) {}

  static OwnerOptions Options() {
    OwnerOptions o;
    o.lease = kLease;
    o.max_forks_per_holder = 3;
    o.tombstone_ttl = absl::Seconds(60);
    return o;
  }

  void TearDown() override { AssertNoLeaks(); }

  void AssertNoLeaks() {
    OwnerStats s = table_.stats();
    EXPECT_EQ(s.owned, 0);
    EXPECT_EQ(s.forks, 0);
    EXPECT_EQ(s.parked, 0);
  }

  // Alice's remote(): created, then the function's value arrives.
  void CreateReady(Value v = Value(42)) {
    ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
    table_.Resolve(kRRef, std::move(v));
  }

  absl::Status AddFork(GlobalId fork, uint64_t holder) {
    Outcome<absl::Status> o;
    EXPECT_EQ(table_.AddFork(kRRef, fork, holder, clock_.Now() + kLease,
                             o.Callback()),
              0u);
    EXPECT_TRUE(o.result.has_value());
    return *o.result;
  }

  absl::StatusOr<Value> FetchNow(GlobalId fork) {
    Outcome<absl::StatusOr<Value>> o;
    EXPECT_EQ(table_.Fetch(kRRef, fork, clock_.Now() + kLease, o.Callback()),
              0u);
    EXPECT_TRUE(o.result.has_value());
    return *o.result;
  }

  ManualClock clock_;
  OwnerTable table_;
};

TEST_F(OwnerTableTest, CreateFetchRelease) {
  CreateReady();
  EXPECT_EQ(table_.stats().owned, 1);
  ASSERT_OK_AND_ASSIGN(Value v, FetchNow(kAliceFork));
  EXPECT_EQ(v, Value(42));
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, DuplicateMessagesAreHarmless) {
  CreateReady();
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));  // Retried creation.
  ASSERT_OK(AddFork(kBobFork, kBob));
  ASSERT_OK(AddFork(kBobFork, kBob));  // Retried AddFork.
  EXPECT_EQ(table_.stats().forks, 2);
  ASSERT_OK(table_.ConfirmFork(kRRef, kBobFork, kBob));
  ASSERT_OK(table_.ConfirmFork(kRRef, kBobFork, kBob));
  table_.DeleteFork(kRRef, kBobFork, false);
  table_.DeleteFork(kRRef, kBobFork, false);  // Retried delete.
  EXPECT_EQ(table_.stats().owned, 1);
  table_.DeleteFork(kRRef, kAliceFork, false);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

// A fork registered before the creating call arrived waits for it.
TEST_F(OwnerTableTest, AddForkBeforeCreationIsParked) {
  Outcome<absl::Status> added;
  OwnerTable::WaitId id = table_.AddFork(
      kRRef, kBobFork, kBob, clock_.Now() + kLease, added.Callback());
  EXPECT_NE(id, 0u);
  EXPECT_FALSE(added.result.has_value());
  EXPECT_EQ(table_.stats().parked, 1);
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  ASSERT_TRUE(added.result.has_value());
  EXPECT_OK(*added.result);
  EXPECT_EQ(table_.stats().forks, 2);
  table_.Resolve(kRRef, Value(1));
  table_.DeleteFork(kRRef, kAliceFork, false);
  EXPECT_EQ(table_.stats().owned, 1);  // Bob's fork keeps it.
  table_.DeleteFork(kRRef, kBobFork, false);
}

TEST_F(OwnerTableTest, FetchBeforeCreationAndBeforeValue) {
  Outcome<absl::StatusOr<Value>> fetched;
  table_.Fetch(kRRef, kAliceFork, clock_.Now() + kLease, fetched.Callback());
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  EXPECT_FALSE(fetched.result.has_value());  // Created, value not there yet.
  table_.Resolve(kRRef, Value("v"));
  ASSERT_TRUE(fetched.result.has_value());
  EXPECT_EQ(**fetched.result, Value("v"));
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, FailedCreationReachesFetchers) {
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  Outcome<absl::StatusOr<Value>> fetched;
  table_.Fetch(kRRef, kAliceFork, clock_.Now() + kLease, fetched.Callback());
  table_.Resolve(kRRef, absl::InternalError("boom"));
  EXPECT_THAT(*fetched.result, StatusIs(absl::StatusCode::kInternal, "boom"));
  EXPECT_THAT(FetchNow(kAliceFork), StatusIs(absl::StatusCode::kInternal));
  table_.DeleteFork(kRRef, kAliceFork, false);
}

// remote() timed out at the caller: its fork goes before the value exists;
// the value is freed when it is produced.
TEST_F(OwnerTableTest, AbandonedCreationFreesTheLateValue) {
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  table_.DeleteFork(kRRef, kAliceFork, false);
  EXPECT_EQ(table_.stats().owned, 1);  // Still computing.
  table_.Resolve(kRRef, Value(std::string(1 << 20, 'x')));
  EXPECT_EQ(table_.stats().owned, 0);
}

// The release overtook the confirmation: the confirmation fails cleanly.
TEST_F(OwnerTableTest, DeleteBeforeConfirm) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  table_.DeleteFork(kRRef, kBobFork, false);
  EXPECT_THAT(
      table_.ConfirmFork(kRRef, kBobFork, kBob),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("not registered")));
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, AbandonOnlyDropsUnconfirmedForks) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  ASSERT_OK(table_.ConfirmFork(kRRef, kBobFork, kBob));
  table_.DeleteFork(kRRef, kBobFork, /*only_unconfirmed=*/true);
  EXPECT_EQ(table_.stats().forks, 2);  // Bob has it: kept.
  table_.DeleteFork(kRRef, kBobFork, false);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, ReleasedIdsFailFastInsteadOfParking) {
  CreateReady();
  table_.DeleteFork(kRRef, kAliceFork, false);
  EXPECT_THAT(AddFork(kBobFork, kBob), StatusIs(absl::StatusCode::kNotFound,
                                                HasSubstr("already released")));
  EXPECT_THAT(FetchNow(kAliceFork), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(OwnerTableTest, SilentHolderLosesItsForksAfterTheLease) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  ASSERT_OK(table_.ConfirmFork(kRRef, kBobFork, kBob));
  for (int i = 0; i < 5; ++i) {  // Alice renews; Bob is silent.
    clock_.Advance(kLease / 2);
    table_.RenewLease(kAlice, {{kRRef, kAliceFork}});
    table_.Sweep();
  }
  EXPECT_EQ(table_.stats().forks, 1);  // Bob's is gone, Alice's stays.
  clock_.Advance(kLease * 2);          // Now Alice is silent too.
  table_.Sweep();
}

TEST_F(OwnerTableTest, UnconfirmedForkExpiresEvenIfItsHolderRenews) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));  // Never arrives at Bob.
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(kLease / 2);
    table_.RenewLease(kBob, {});
    table_.RenewLease(kAlice, {{kRRef, kAliceFork}});
    table_.Sweep();
  }
  EXPECT_EQ(table_.stats().forks, 1);
  EXPECT_EQ(table_.stats().unconfirmed, 0);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, RenewalConfirmsListedForks) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  table_.RenewLease(kBob, {{kRRef, kBobFork}});
  EXPECT_EQ(table_.stats().unconfirmed, 0);
  table_.DropHolder(kBob);
  table_.DropHolder(kAlice);
}

TEST_F(OwnerTableTest, DeadHolderLosesEverythingAtOnce) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  table_.DropHolder(kAlice);
  EXPECT_EQ(table_.stats().owned, 1);
  table_.DropHolder(kBob);
}

TEST_F(OwnerTableTest, ParkedWaitsEndAtTheirDeadline) {
  Outcome<absl::Status> added;
  Outcome<absl::StatusOr<Value>> fetched;
  table_.AddFork(kRRef, kBobFork, kBob, clock_.Now() + absl::Seconds(1),
                 added.Callback());
  table_.Fetch(kRRef, kAliceFork, clock_.Now() + absl::Seconds(2),
               fetched.Callback());
  clock_.Advance(absl::Milliseconds(1500));
  table_.Sweep();
  EXPECT_THAT(*added.result,
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("not created before the deadline")));
  EXPECT_FALSE(fetched.result.has_value());
  clock_.Advance(absl::Seconds(1));
  table_.Sweep();
  EXPECT_THAT(*fetched.result, StatusIs(absl::StatusCode::kDeadlineExceeded));
}

TEST_F(OwnerTableTest, CancelledWaitNeverCallsBack) {
  Outcome<absl::Status> added;
  OwnerTable::WaitId id = table_.AddFork(
      kRRef, kBobFork, kBob, clock_.Now() + kLease, added.Callback());
  EXPECT_TRUE(table_.CancelWait(id));
  EXPECT_FALSE(table_.CancelWait(id));
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  EXPECT_FALSE(added.result.has_value());
  EXPECT_EQ(table_.stats().forks, 1);
  table_.Resolve(kRRef, Value());
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, PerHolderLimit) {
  CreateReady();
  ASSERT_OK(AddFork({kAlice, 10}, kBob));
  ASSERT_OK(AddFork({kAlice, 11}, kBob));
  ASSERT_OK(AddFork({kAlice, 12}, kBob));
  EXPECT_THAT(
      AddFork({kAlice, 13}, kBob),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("limit 3")));
  table_.DropHolder(kBob);
  ASSERT_OK(AddFork({kAlice, 13}, kBob));  // Room again.
  table_.DropHolder(kBob);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, LocalValuesNeverExpire) {
  ASSERT_OK(table_.AddLocal(kRRef, kAliceFork, Value(3)));
  clock_.Advance(kLease * 10);
  table_.Sweep();
  EXPECT_EQ(table_.stats().owned, 1);
  EXPECT_EQ(*FetchNow(GlobalId{}), Value(3));
  table_.DeleteFork(kRRef, kAliceFork, false);
}

// Callbacks run outside the table's lock: one may use the table again.
TEST_F(OwnerTableTest, CallbacksMayReenterTheTable) {
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  bool done = false;
  table_.Fetch(kRRef, kAliceFork, clock_.Now() + kLease,
               [&](absl::StatusOr<Value> v) {
                 EXPECT_OK(v);
                 table_.DeleteFork(kRRef, kAliceFork, false);
                 done = true;
               });
  table_.Resolve(kRRef, Value(1));
  EXPECT_TRUE(done);
}

TEST_F(OwnerTableTest, ListShowsForksAndHolders) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  std::vector<proto::OwnedRRef> rows = table_.List();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id(), GlobalIdString(kRRef));
  EXPECT_EQ(rows[0].state(), "ready");
  EXPECT_EQ(rows[0].forks_size(), 2);
  table_.DropHolder(kBob);
  table_.DropHolder(kAlice);
}

}  // namespace
}  // namespace ferry
