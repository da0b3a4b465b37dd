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
using ::testing::AllOf;
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
    EXPECT_EQ(s.value_bytes, 0);
  }

  // Alice's remote(): created, then the function's value arrives.
  void CreateReady(Value v = Value(42)) {
    ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
    EXPECT_OK(table_.Resolve(kRRef, std::move(v)));
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

  // A renewal outside any round: confirms `forks`.
  void Renew(uint64_t holder, std::vector<LeaseListing::Pair> forks) {
    LeaseListing l;
    l.forks = std::move(forks);
    ASSERT_OK(table_.RenewLease(holder, l));
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
  EXPECT_OK(table_.Resolve(kRRef, Value(1)));
  table_.DeleteFork(kRRef, kAliceFork, false);
  EXPECT_EQ(table_.stats().owned, 1);  // Bob's fork keeps it.
  table_.DeleteFork(kRRef, kBobFork, false);
}

TEST_F(OwnerTableTest, FetchBeforeCreationAndBeforeValue) {
  Outcome<absl::StatusOr<Value>> fetched;
  table_.Fetch(kRRef, kAliceFork, clock_.Now() + kLease, fetched.Callback());
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  EXPECT_FALSE(fetched.result.has_value());  // Created, value not there yet.
  EXPECT_OK(table_.Resolve(kRRef, Value("v")));
  ASSERT_TRUE(fetched.result.has_value());
  EXPECT_EQ(**fetched.result, Value("v"));
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, FailedCreationReachesFetchers) {
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  Outcome<absl::StatusOr<Value>> fetched;
  table_.Fetch(kRRef, kAliceFork, clock_.Now() + kLease, fetched.Callback());
  EXPECT_THAT(table_.Resolve(kRRef, absl::InternalError("boom")),
              StatusIs(absl::StatusCode::kInternal));
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
  EXPECT_OK(table_.Resolve(kRRef, Value(std::string(1 << 20, 'x'))));
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
    Renew(kAlice, {{kRRef, kAliceFork}});
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
    Renew(kBob, {});
    Renew(kAlice, {{kRRef, kAliceFork}});
    table_.Sweep();
  }
  EXPECT_EQ(table_.stats().forks, 1);
  EXPECT_EQ(table_.stats().unconfirmed, 0);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, RenewalConfirmsListedForks) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  Renew(kBob, {{kRRef, kBobFork}});
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

// The owner stops: waits fail with its reason, and so do waits that
// arrive afterwards (nobody is left to answer them).
TEST_F(OwnerTableTest, WaitsFailWhenTheOwnerStopsAndLaterOnesAtOnce) {
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  Outcome<absl::StatusOr<Value>> early;
  table_.Fetch(kRRef, kAliceFork, clock_.Now() + kLease, early.Callback());
  table_.FailWaits(absl::UnavailableError("owner is stopping"));
  EXPECT_THAT(*early.result,
              StatusIs(absl::StatusCode::kUnavailable, "owner is stopping"));
  Outcome<absl::StatusOr<Value>> late;
  table_.Fetch(kRRef, kAliceFork, clock_.Now() + kLease, late.Callback());
  ASSERT_TRUE(late.result.has_value());
  EXPECT_THAT(*late.result,
              StatusIs(absl::StatusCode::kUnavailable, "owner is stopping"));
  Outcome<absl::Status> added;
  table_.AddFork(GlobalId{9, 9}, kBobFork, kBob, clock_.Now() + kLease,
                 added.Callback());
  ASSERT_TRUE(added.result.has_value());
  EXPECT_THAT(*added.result, StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(table_.stats().parked, 0);
  table_.DeleteFork(kRRef, kAliceFork, false);
  EXPECT_OK(
      table_.Resolve(kRRef, Value(1)));  // The value, freed as it arrives.
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
  EXPECT_OK(table_.Resolve(kRRef, Value()));
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
  EXPECT_OK(table_.Resolve(kRRef, Value(1)));
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

// ---- Values' bytes (issue 49: a peer's remote() calls made an owner keep
// 3 GiB; only their number was bounded) ----

// A string value's cost (rpc/value/payload_bytes.h): its text and
// 16 bytes.
constexpr int64_t kStringCost = 16;
Value Text(int64_t bytes) {
  return Value(std::string(static_cast<size_t>(bytes - kStringCost), 'x'));
}

class OwnerTableBudgetTest : public ::testing::Test {
 protected:
  // Each creator may keep 100 bytes of values here, all of them 150.
  OwnerTableBudgetTest() : table_(kOwner, &clock_, Options()) {}

  static OwnerOptions Options() {
    OwnerOptions o;
    o.lease = kLease;
    o.max_value_bytes_per_creator = 100;
    o.max_value_bytes = 150;
    return o;
  }

  void TearDown() override {
    EXPECT_EQ(table_.stats().owned, 0);
    EXPECT_EQ(table_.stats().value_bytes, 0);
  }

  // `creator`'s remote() number `n`, resolved to `value`: what it answered.
  absl::Status Keep(uint64_t creator, uint64_t n, absl::StatusOr<Value> value) {
    EXPECT_OK(table_.Create(Id(creator, n), Fork(creator, n), creator));
    return table_.Resolve(Id(creator, n), std::move(value));
  }
  static GlobalId Id(uint64_t creator, uint64_t n) { return {creator, 2 * n}; }
  static GlobalId Fork(uint64_t creator, uint64_t n) {
    return {creator, 2 * n + 1};
  }
  absl::StatusOr<Value> Fetch(uint64_t creator, uint64_t n) {
    Outcome<absl::StatusOr<Value>> o;
    table_.Fetch(Id(creator, n), Fork(creator, n), clock_.Now() + kLease,
                 o.Callback());
    EXPECT_TRUE(o.result.has_value());
    return o.result.has_value() ? *o.result : absl::UnknownError("parked");
  }
  void Release(uint64_t creator, uint64_t n) {
    table_.DeleteFork(Id(creator, n), Fork(creator, n), false);
  }

  ManualClock clock_;
  OwnerTable table_;
};

// A value is charged to its creator from when it is stored until it is
// freed; one that would take the creator past its share is not kept, and
// the RRef holds the error instead.
TEST_F(OwnerTableBudgetTest, ACreatorKeepsOnlyItsShare) {
  ASSERT_OK(Keep(kAlice, 1, Text(60)));
  EXPECT_EQ(table_.value_bytes_of(kAlice), 60);
  EXPECT_THAT(Keep(kAlice, 2, Text(60)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("node 2 would hold 120 B"),
                             HasSubstr("values kept as rrefs"),
                             HasSubstr("(--max_rref_mb_per_peer=0)"))));
  EXPECT_EQ(table_.value_bytes_of(kAlice), 60);
  // The refused RRef exists, holding the error; its value was dropped.
  EXPECT_THAT(Fetch(kAlice, 2),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("keeping rref w2.4 of node 2")));
  EXPECT_EQ(*Fetch(kAlice, 1), Text(60));
  ASSERT_OK(Keep(kAlice, 3, Text(40)));  // What is left of its share.
  EXPECT_EQ(table_.value_bytes_of(kAlice), 100);
  // Another creator has a share of its own.
  ASSERT_OK(Keep(kBob, 1, Text(50)));
  EXPECT_EQ(table_.stats().value_bytes, 150);
  // Released, the bytes come back.
  Release(kAlice, 1);
  EXPECT_EQ(table_.value_bytes_of(kAlice), 40);
  ASSERT_OK(Keep(kAlice, 4, Text(60)));
  for (uint64_t n : {2, 3, 4}) Release(kAlice, n);
  Release(kBob, 1);
}

// All creators together keep at most the table's budget: a creator within
// its share is refused when the others took the rest.
TEST_F(OwnerTableBudgetTest, AllCreatorsTogetherKeepTheTablesBudget) {
  ASSERT_OK(Keep(kAlice, 1, Text(100)));
  EXPECT_THAT(Keep(kBob, 1, Text(60)),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("keeping rref w3.2 of node 3"),
                             HasSubstr("(--max_rref_mb=0)"))));
  ASSERT_OK(Keep(kBob, 2, Text(50)));
  Release(kAlice, 1);
  Release(kBob, 1);
  Release(kBob, 2);
}

// The bytes come back however the value goes: its creator's lease runs
// out, its creator is dropped (died or left), or a late value's creator
// already gave up. Errors and this owner's own values are not charged.
TEST_F(OwnerTableBudgetTest, BytesComeBackWhenTheValueGoes) {
  ASSERT_OK(Keep(kAlice, 1, Text(100)));
  clock_.Advance(kLease * 2);  // Alice went silent.
  table_.Sweep();
  EXPECT_EQ(table_.value_bytes_of(kAlice), 0);
  ASSERT_OK(Keep(kAlice, 2, Text(100)));
  table_.DropHolder(kAlice);
  EXPECT_EQ(table_.value_bytes_of(kAlice), 0);
  ASSERT_OK(table_.Create(Id(kAlice, 3), Fork(kAlice, 3), kAlice));
  Release(kAlice, 3);  // Gave up before the value came.
  ASSERT_OK(table_.Resolve(Id(kAlice, 3), Text(100)));
  EXPECT_EQ(table_.stats().owned, 0);
  EXPECT_EQ(table_.value_bytes_of(kAlice), 0);
  EXPECT_THAT(Keep(kAlice, 4, absl::InternalError("boom")),
              StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(table_.value_bytes_of(kAlice), 0);
  Release(kAlice, 4);
  ASSERT_OK(Keep(kOwner, 1, Text(1000)));  // Its own remote() on itself.
  ASSERT_OK(table_.AddLocal(Id(kOwner, 2), Fork(kOwner, 2), Text(1000)));
  EXPECT_EQ(table_.stats().value_bytes, 0);
  Release(kOwner, 1);
  Release(kOwner, 2);
}

// A value shared with another holder stays charged to its creator until
// its last copy goes (the creator made the owner keep it).
TEST_F(OwnerTableBudgetTest, ASharedValueStaysChargedToItsCreator) {
  ASSERT_OK(Keep(kAlice, 1, Text(80)));
  Outcome<absl::Status> added;
  const GlobalId bobs{kAlice, 99};  // Alice's copy for Bob.
  table_.AddFork(Id(kAlice, 1), bobs, kBob, clock_.Now() + kLease,
                 added.Callback());
  ASSERT_TRUE(added.result.has_value());
  ASSERT_OK(*added.result);
  Release(kAlice, 1);
  EXPECT_EQ(table_.value_bytes_of(kAlice), 80);
  EXPECT_EQ(table_.value_bytes_of(kBob), 0);
  table_.DeleteFork(Id(kAlice, 1), bobs, false);
  EXPECT_EQ(table_.value_bytes_of(kAlice), 0);
}

// ---- Races: messages overtaking each other ----

// remote()'s caller dropped its copy at once: the delete overtook the
// creating call. The delete is remembered, and the value freed when the
// function's result comes.
TEST_F(OwnerTableTest, DeleteBeforeCreateFreesTheValueWhenItResolves) {
  table_.DeleteFork(kRRef, kAliceFork, false);
  EXPECT_EQ(table_.stats().early_deletes, 1);
  ASSERT_OK(table_.Create(kRRef, kAliceFork, kAlice));
  EXPECT_EQ(table_.stats().early_deletes, 0);
  EXPECT_EQ(table_.stats().forks, 0);
  EXPECT_EQ(table_.stats().owned, 1);  // Still computing.
  EXPECT_OK(table_.Resolve(kRRef, Value(7)));
  EXPECT_EQ(table_.stats().owned, 0);
}

// A fork whose sender gave up before its AddFork (parked: the RRef not
// created yet) was registered is never registered.
TEST_F(OwnerTableTest, AbandonBeforeParkedAddForkIsRemembered) {
  Outcome<absl::Status> added;
  table_.AddFork(kRRef, kBobFork, kBob, clock_.Now() + kLease,
                 added.Callback());
  table_.DeleteFork(kRRef, kBobFork, /*only_unconfirmed=*/true);
  CreateReady();
  ASSERT_TRUE(added.result.has_value());
  EXPECT_OK(*added.result);
  EXPECT_EQ(table_.stats().forks, 1);  // Alice's only.
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, RememberedDeletesAreBoundedInCountAndTime) {
  OwnerOptions o = Options();
  o.max_early_deletes = 2;
  o.early_delete_ttl = absl::Seconds(5);
  OwnerTable table(kOwner, &clock_, o);
  table.DeleteFork({kAlice, 100}, {kAlice, 101}, false);
  table.DeleteFork({kAlice, 102}, {kAlice, 103}, false);
  table.DeleteFork({kAlice, 104}, {kAlice, 105}, false);
  EXPECT_EQ(table.stats().early_deletes, 2);  // The oldest forgotten.
  // The forgotten one registers as usual; a remembered one does not.
  ASSERT_OK(table.Create({kAlice, 100}, {kAlice, 101}, kAlice));
  ASSERT_OK(table.Create({kAlice, 102}, {kAlice, 103}, kAlice));
  EXPECT_EQ(table.stats().forks, 1);
  clock_.Advance(absl::Seconds(6));
  table.Sweep();
  EXPECT_EQ(table.stats().early_deletes, 0);
  EXPECT_OK(table.Resolve({kAlice, 100}, Value(1)));
  EXPECT_OK(table.Resolve({kAlice, 102}, Value(1)));
  table.DeleteFork({kAlice, 100}, {kAlice, 101}, false);
  EXPECT_EQ(table.stats().owned, 0);
}

// Deletes for an id already freed are not remembered (the tombstone
// answers them).
TEST_F(OwnerTableTest, LateDeleteOfAFreedRRefIsNotRemembered) {
  CreateReady();
  table_.DeleteFork(kRRef, kAliceFork, false);
  table_.DeleteFork(kRRef, kAliceFork, false);
  EXPECT_EQ(table_.stats().early_deletes, 0);
}

// The sender's call failed after Bob got the fork: Bob's confirm comes
// after the abandon and wins.
TEST_F(OwnerTableTest, ConfirmAfterAbandonKeepsTheFork) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  table_.DeleteFork(kRRef, kBobFork, /*only_unconfirmed=*/true);
  EXPECT_EQ(table_.stats().abandoned, 1);
  ASSERT_OK(table_.ConfirmFork(kRRef, kBobFork, kBob));
  EXPECT_EQ(table_.stats().abandoned, 0);
  clock_.Advance(kLease * 3);
  Renew(kBob, {{kRRef, kBobFork}});
  Renew(kAlice, {{kRRef, kAliceFork}});
  table_.Sweep();
  EXPECT_EQ(table_.stats().forks, 2);
  table_.DropHolder(kBob);
  table_.DropHolder(kAlice);
}

// Bob never got it: his first round sent after the abandon (he saw its
// epoch) settles it.
TEST_F(OwnerTableTest, AbandonedForkGoesAtTheHoldersNextRound) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  table_.DeleteFork(kRRef, kBobFork, /*only_unconfirmed=*/true);
  EXPECT_EQ(table_.stats().forks, 2);  // Bob's word first.
  // A round Bob snapshotted before the abandon (older epoch) proves nothing.
  LeaseListing stale;
  stale.round = 1;
  ASSERT_OK_AND_ASSIGN(uint64_t epoch, table_.RenewLease(kBob, stale));
  EXPECT_EQ(table_.stats().forks, 2);
  LeaseListing fresh;
  fresh.round = 2;
  fresh.epoch = epoch;
  ASSERT_OK(table_.RenewLease(kBob, fresh));
  EXPECT_EQ(table_.stats().forks, 1);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

// Bob holds nothing else here, so he sends no rounds: a lease of silence.
TEST_F(OwnerTableTest, AbandonedForkOfASilentHolderGoesAfterALease) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  clock_.Advance(kLease / 2);
  table_.DeleteFork(kRRef, kBobFork, /*only_unconfirmed=*/true);
  clock_.Advance(kLease / 2 + absl::Seconds(1));
  Renew(kAlice, {{kRRef, kAliceFork}});
  table_.Sweep();
  EXPECT_EQ(table_.stats().forks, 2);  // One lease after the abandon, not
                                       // after the registration.
  clock_.Advance(kLease / 2);
  Renew(kAlice, {{kRRef, kAliceFork}});
  table_.Sweep();
  EXPECT_EQ(table_.stats().forks, 1);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

// A fork in a call that takes longer than a lease: its sender vouches for
// it in every renewal while the call is in flight.
TEST_F(OwnerTableTest, ForkInTransitLivesAsLongAsItsCall) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));  // Alice sends it to Bob.
  LeaseListing alice;
  alice.forks = {{kRRef, kAliceFork}};
  alice.in_transit = {{kRRef, kBobFork}};
  for (int i = 0; i < 6; ++i) {
    clock_.Advance(kLease / 2);
    ASSERT_OK(table_.RenewLease(kAlice, alice));
    table_.Sweep();
  }
  EXPECT_EQ(table_.stats().unconfirmed, 1);  // 3 leases later: still there.
  alice.in_transit.clear();                  // The call ended.
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(kLease / 2);
    ASSERT_OK(table_.RenewLease(kAlice, alice));
    table_.Sweep();
  }
  EXPECT_EQ(table_.stats().forks, 1);  // Never confirmed: gone.
  table_.DeleteFork(kRRef, kAliceFork, false);
}

// A holder vouches only for copies it sent (it made their ids): Bob
// listing Alice's unconfirmed fork to Carol as "in transit" does not keep
// it past Alice's word.
TEST_F(OwnerTableTest, AHolderCannotVouchForAnothersForkInTransit) {
  constexpr uint64_t kCarol = 4;
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kCarol));  // Alice sends it to Carol.
  LeaseListing alice;
  alice.forks = {{kRRef, kAliceFork}};
  LeaseListing bob;
  bob.in_transit = {{kRRef, kBobFork}};  // Made by Alice, not by Bob.
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(kLease / 2);
    ASSERT_OK(table_.RenewLease(kAlice, alice));  // Alice's call is over.
    ASSERT_OK(table_.RenewLease(kBob, bob));
    table_.Sweep();
  }
  EXPECT_EQ(table_.stats().forks, 1);  // Never confirmed: gone all the same.
  EXPECT_EQ(table_.stats().unconfirmed, 0);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

// Who may pass a copy on (rref_service.cc asks): a node with a registered
// fork of the RRef, confirmed or not, and only while it has one.
TEST_F(OwnerTableTest, HoldsCopyNamesOnlyRegisteredHolders) {
  EXPECT_FALSE(table_.HoldsCopy(kRRef, kAlice));  // Not created yet.
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));  // Unconfirmed.
  EXPECT_TRUE(table_.HoldsCopy(kRRef, kAlice));
  EXPECT_TRUE(table_.HoldsCopy(kRRef, kBob));
  EXPECT_FALSE(table_.HoldsCopy(kRRef, kOwner));
  table_.DeleteFork(kRRef, kBobFork, false);
  EXPECT_FALSE(table_.HoldsCopy(kRRef, kBob));
  table_.DeleteFork(kRRef, kAliceFork, false);
  EXPECT_FALSE(table_.HoldsCopy(kRRef, kAlice));  // Freed.
}

// The owner's own sends are vouched for locally.
TEST_F(OwnerTableTest, OwnersOwnSendsAreKeptInTransit) {
  ASSERT_OK(table_.AddLocal(kRRef, {kOwner, 1}, Value(1)));
  Outcome<absl::Status> added;
  table_.AddFork(kRRef, kBobFork, kBob, clock_.Now(), added.Callback());
  ASSERT_OK(*added.result);
  for (int i = 0; i < 4; ++i) {
    clock_.Advance(kLease / 2);
    table_.KeepInTransit({{kRRef, kBobFork}});
    table_.Sweep();
  }
  EXPECT_EQ(table_.stats().forks, 2);
  clock_.Advance(kLease * 2);
  table_.Sweep();
  EXPECT_EQ(table_.stats().forks, 1);
  table_.DeleteFork(kRRef, {kOwner, 1}, false);
}

// Bob released his copy but the delete was lost: his next complete round
// no longer lists it, and the owner drops it.
TEST_F(OwnerTableTest, RoundsReconcileLostDeletes) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  ASSERT_OK(table_.ConfirmFork(kRRef, kBobFork, kBob, /*round=*/3));
  LeaseListing r2;  // Snapshotted before Bob adopted the fork.
  r2.round = 2;
  ASSERT_OK(table_.RenewLease(kBob, r2));
  EXPECT_EQ(table_.stats().forks, 2);
  LeaseListing r3;  // Bob dropped it since: the delete never came.
  r3.round = 3;
  ASSERT_OK(table_.RenewLease(kBob, r3));
  EXPECT_EQ(table_.stats().forks, 1);
  // Alice's creator fork: listed once, then not.
  LeaseListing a1;
  a1.round = 1;
  a1.forks = {{kRRef, kAliceFork}};
  ASSERT_OK(table_.RenewLease(kAlice, a1));
  EXPECT_EQ(table_.stats().owned, 1);
  LeaseListing a2;
  a2.round = 2;
  ASSERT_OK(table_.RenewLease(kAlice, a2));
  EXPECT_EQ(table_.stats().owned, 0);
}

// A fork never listed and confirmed without a round (the creator's) is not
// dropped by a round that may predate it.
TEST_F(OwnerTableTest, RoundsKeepForksTheyCannotKnowAbout) {
  CreateReady();
  LeaseListing r;
  r.round = 5;
  ASSERT_OK(table_.RenewLease(kAlice, r));
  EXPECT_EQ(table_.stats().forks, 1);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

// A round counts only once every chunk arrived; a chunk of an older round
// completes nothing.
TEST_F(OwnerTableTest, ChunkedRoundReconcilesWhenComplete) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  ASSERT_OK(table_.ConfirmFork(kRRef, kBobFork, kBob, /*round=*/1));
  LeaseListing chunk;
  chunk.round = 2;
  chunk.chunks = 3;
  chunk.chunk = 0;
  ASSERT_OK(table_.RenewLease(kBob, chunk));
  chunk.chunk = 2;
  ASSERT_OK(table_.RenewLease(kBob, chunk));
  ASSERT_OK(table_.RenewLease(kBob, chunk));  // A duplicate.
  EXPECT_EQ(table_.stats().forks, 2);         // Chunk 1 missing.
  LeaseListing old;
  old.round = 1;
  ASSERT_OK(table_.RenewLease(kBob, old));
  EXPECT_EQ(table_.stats().forks, 2);
  chunk.chunk = 1;
  chunk.forks = {{kRRef, kBobFork}};  // Still held: listed in chunk 1.
  ASSERT_OK(table_.RenewLease(kBob, chunk));
  EXPECT_EQ(table_.stats().forks, 2);
  LeaseListing next;
  next.round = 3;
  ASSERT_OK(table_.RenewLease(kBob, next));
  EXPECT_EQ(table_.stats().forks, 1);
  table_.DeleteFork(kRRef, kAliceFork, false);
}

TEST_F(OwnerTableTest, BadChunkNumbersAreInvalid) {
  LeaseListing l;
  l.round = 1;
  l.chunks = 2;
  l.chunk = 2;
  EXPECT_THAT(
      table_.RenewLease(kBob, l),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("chunk 2 of 2")));
  l.chunks = kMaxLeaseChunks + 1;
  l.chunk = 0;
  EXPECT_THAT(table_.RenewLease(kBob, l),
              StatusIs(absl::StatusCode::kInvalidArgument));
  l.chunks = 0;
  EXPECT_THAT(table_.RenewLease(kBob, l),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Found by lease_rounds_fuzz: a local value whose fork's delete arrived
// first was kept with no fork, forever.
TEST_F(OwnerTableTest, ALocalValueWhoseDeleteCameFirstIsFreed) {
  const GlobalId local{kOwner, 3}, fork{kOwner, 4};
  table_.DeleteFork(local, fork, false);
  ASSERT_OK(table_.AddLocal(local, fork, Value(1)));
  EXPECT_EQ(table_.stats().owned, 0);
  Outcome<absl::StatusOr<Value>> o;
  EXPECT_EQ(table_.Fetch(local, fork, clock_.Now() + kLease, o.Callback()), 0u);
  ASSERT_TRUE(o.result.has_value());
  EXPECT_THAT(*o.result, StatusIs(absl::StatusCode::kNotFound,
                                  HasSubstr("already released")));
}

// Issue 25 (F6): one 20-byte lease round scanned the whole table under its
// lock. A round, a drop or a sweep now walks the holder's own forks (and
// a sweep only what may have expired): a flood of rounds from a holder
// with nothing here costs nothing however large the table is.
TEST(OwnerTableCostTest, ARoundCostsItsHoldersOwnForks) {
  ManualClock clock;
  OwnerOptions options;
  options.lease = kLease;
  OwnerTable table(kOwner, &clock, options);
  constexpr int kForks = 5000;
  LeaseListing alice;
  alice.round = 1;
  for (int i = 0; i < kForks; ++i) {
    const GlobalId rref{kAlice, static_cast<uint64_t>(2 * i + 10)};
    const GlobalId fork{kAlice, static_cast<uint64_t>(2 * i + 11)};
    ASSERT_OK(table.Create(rref, fork, kAlice));
    EXPECT_OK(table.Resolve(rref, Value(i)));
    alice.forks.push_back({rref, fork});
  }
  const int64_t before = table.stats().forks_walked;
  for (uint64_t round = 1; round <= 1000; ++round) {
    LeaseListing flood;  // Bob holds nothing here.
    flood.round = round;
    ASSERT_OK(table.RenewLease(kBob, flood));
  }
  EXPECT_EQ(table.stats().forks_walked, before);
  // Alice's own round walks her forks, once.
  ASSERT_OK(table.RenewLease(kAlice, alice));
  EXPECT_EQ(table.stats().forks_walked, before + kForks);
  // A sweep with every lease alive and every fork confirmed walks nothing.
  clock.Advance(kLease / 2);
  table.Sweep();
  EXPECT_EQ(table.stats().forks_walked, before + kForks);
  EXPECT_EQ(table.stats().forks, kForks);
  // Bob's death walks nothing; Alice's lease running out walks hers.
  table.DropHolder(kBob);
  EXPECT_EQ(table.stats().forks_walked, before + kForks);
  clock.Advance(kLease);
  table.Sweep();
  EXPECT_EQ(table.stats().forks_walked, before + 2 * kForks);
  EXPECT_EQ(table.stats().owned, 0);
}

// The index follows every way a fork comes and goes: registered (confirmed
// or not), confirmed by a confirm or a round, dropped by a delete, a round,
// a sweep or a drop; a holder's limit counts its indexed forks.
TEST_F(OwnerTableTest, TheHolderIndexFollowsEveryFork) {
  CreateReady();
  ASSERT_OK(AddFork(kBobFork, kBob));
  const GlobalId bob2{kAlice, 7}, bob3{kAlice, 8}, bob4{kAlice, 9};
  ASSERT_OK(AddFork(bob2, kBob));
  ASSERT_OK(AddFork(bob3, kBob));
  EXPECT_THAT(AddFork(bob4, kBob),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("already holds 3 rrefs here")));
  ASSERT_OK(table_.ConfirmFork(kRRef, kBobFork, kBob, /*round=*/1));
  LeaseListing r1;
  r1.round = 1;
  r1.forks = {{kRRef, kBobFork}, {kRRef, bob2}};
  ASSERT_OK(table_.RenewLease(kBob, r1));
  EXPECT_EQ(table_.stats().unconfirmed, 1);  // bob3.
  table_.DeleteFork(kRRef, bob2, false);
  ASSERT_OK(AddFork(bob4, kBob));  // A place came free.
  LeaseListing r2;                 // Bob no longer has kBobFork.
  r2.round = 2;
  r2.forks = {{kRRef, bob4}};
  ASSERT_OK(table_.RenewLease(kBob, r2));
  EXPECT_EQ(table_.stats().forks, 3);  // Alice's, bob3, bob4.
  clock_.Advance(kLease / 2);
  LeaseListing renewal;  // Bob alive; Alice silent.
  renewal.forks = {{kRRef, bob4}};
  ASSERT_OK(table_.RenewLease(kBob, renewal));
  clock_.Advance(kLease / 2 + absl::Seconds(1));
  table_.Sweep();  // bob3 was never confirmed; Alice's lease ran out.
  EXPECT_EQ(table_.stats().forks, 1);
  table_.DropHolder(kBob);
}

}  // namespace
}  // namespace ferry
