// An owner's and a user's RRef context over a real in-process gRPC server,
// on one manual clock: leases, renewal rounds and sweeps happen only when
// the test advances time, and the test waits for each message to be applied
// (an owner hook counts them) — no sleeps. TearDown checks the owner table
// ends empty.
#include "rref/rref_context.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "rpc/auth/security.h"
#include "rpc/channels.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership.h"
#include "rref/fork_codec.h"
#include "rref/rref.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;

constexpr absl::Duration kLease = absl::Seconds(1);
constexpr absl::Duration kPeriod = absl::Milliseconds(250);  // kLease / 4.
constexpr absl::Duration kWait = absl::Seconds(20);

// Counts what the owner applied, by method (renewals: per holder); holds
// one method's messages while asked to.
class Counter {
 public:
  RRefContext::OwnerHook Hook() {
    return [this](absl::string_view method,
                  const google::protobuf::Message& request,
                  absl::AnyInvocable<void() &&> proceed) {
      std::string key(method);
      if (auto* l = dynamic_cast<const proto::LeaseRequest*>(&request)) {
        absl::StrAppend(&key, "/", l->holder());
      }
      {
        absl::MutexLock lock(&mu_);
        if (method == hold_) {
          held_.push_back(std::move(proceed));
          return;
        }
      }
      std::move(proceed)();
      absl::MutexLock lock(&mu_);
      ++applied_[key];
    };
  }
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
  void Hold(std::string method) {
    absl::MutexLock lock(&mu_);
    hold_ = std::move(method);
  }
  // Drops what was held: those messages are lost (their callers see an
  // error and may retry; the retries are applied).
  void Lose() {
    std::vector<absl::AnyInvocable<void() &&>> held;
    {
      absl::MutexLock lock(&mu_);
      held.swap(held_);
      hold_.clear();
    }
    for (auto& p : held) std::move(p)();  // Answered; nothing is kept.
  }

 private:
  absl::Mutex mu_;
  std::string hold_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::AnyInvocable<void() &&>> held_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> applied_ ABSL_GUARDED_BY(mu_);
};

class RRefContextTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(RRefOptions{.lease = kLease}); }

  void Start(RRefOptions options) {
    RRefContext::Host owner;
    owner.node = WorkerNode(1);
    owner.rank = 1;
    owner.name = "worker1";
    owner.directory = &directory_;
    owner.channels = &channels_;
    owner.membership = &membership_;
    owner.timers = &timers_;
    owner_ = RRefContext::ForOwner(owner, options);
    owner_->SetOwnerHookForTesting(counter_.Hook());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(owner_->service());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    directory_ = Directory(
        {WorkerInfo{.name = "worker0", .rank = 0, .address = "127.0.0.1:1"},
         WorkerInfo{.name = "worker1",
                    .rank = 1,
                    .address = absl::StrCat("127.0.0.1:", port)}});
    RRefContext::Host user = owner;
    user.node = WorkerNode(0);
    user.rank = 0;
    user.name = "worker0";
    user_ = RRefContext::ForUser(user, options);
  }

  // An RRef the owner holds, and a copy of it sent to the user (as a call
  // from the owner would); returns once the owner applied the confirm.
  std::pair<RRef, RRef> Share(int v) {
    absl::StatusOr<RRef> mine = owner_->Wrap(Value(v));
    EXPECT_OK(mine);
    absl::StatusOr<Value::RRefPtr> copy;
    {
      std::unique_ptr<RRefCodec> send = owner_->ForPeer(WorkerNode(0));
      absl::StatusOr<proto::RRefHandle> handle =
          send->Encode(mine->AsValue().as_rref());
      EXPECT_OK(handle);
      const int confirms = counter_.applied("ConfirmFork");
      copy = user_->ForPeer(WorkerNode(1))->Decode(*handle);
      EXPECT_OK(copy);
      EXPECT_TRUE(counter_.WaitApplied("ConfirmFork", confirms + 1));
    }  // The call is over.
    absl::StatusOr<RRef> theirs = RRef::FromValue(Value(*copy));
    EXPECT_OK(theirs);
    return {*std::move(mine), *std::move(theirs)};
  }

  // One renewal period; waits until the user's renewal (`chunks` messages)
  // was applied.
  void Renew(int chunks = 1) {
    const int before = counter_.applied("RenewLease/0");
    timers_.Advance(kPeriod);
    ASSERT_TRUE(counter_.WaitApplied("RenewLease/0", before + chunks));
  }

  void TearDown() override {
    counter_.Lose();
    if (user_ != nullptr) user_->Stop();
    if (owner_ != nullptr) {
      EXPECT_EQ(owner_->owner_stats().owned, 0) << "leaked";
      owner_->Stop();
    }
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
    timers_.Stop();
  }

  ManualClock clock_;
  ManualTimers timers_{&clock_};
  ChannelPool channels_{Security::Insecure(), ChannelOptions{}};
  Membership membership_;
  Directory directory_;
  Counter counter_;
  std::shared_ptr<RRefContext> owner_;
  std::shared_ptr<RRefContext> user_;
  std::unique_ptr<grpc::Server> server_;
};

// A user that renews keeps its copy for many leases; once it goes silent,
// the owner drops its copy one lease later.
TEST_F(RRefContextTest, RenewalsKeepACopyUntilTheUserGoesSilent) {
  auto [mine, theirs] = Share(42);
  for (int i = 0; i < 20; ++i) Renew();  // Five leases.
  EXPECT_EQ(owner_->owner_stats().forks, 2);
  user_->Stop();  // Silent from now on (and its release is never sent).
  theirs = RRef();
  timers_.Advance(kLease / 2);
  EXPECT_EQ(owner_->owner_stats().forks, 2);
  timers_.Advance(kLease);
  EXPECT_EQ(owner_->owner_stats().forks, 1);
  mine = RRef();
}

// The user's confirm is lost; its next renewal round lists the copy, which
// confirms it.
TEST_F(RRefContextTest, ARenewalRoundConfirmsWhatItLists) {
  ASSERT_OK_AND_ASSIGN(RRef mine, owner_->Wrap(Value(1)));
  counter_.Hold("ConfirmFork");
  Value::RRefPtr copy;
  {
    std::unique_ptr<RRefCodec> send = owner_->ForPeer(WorkerNode(0));
    ASSERT_OK_AND_ASSIGN(proto::RRefHandle handle,
                         send->Encode(mine.AsValue().as_rref()));
    ASSERT_OK_AND_ASSIGN(copy, user_->ForPeer(WorkerNode(1))->Decode(handle));
  }
  EXPECT_EQ(owner_->owner_stats().unconfirmed, 1);
  Renew();
  EXPECT_EQ(owner_->owner_stats().unconfirmed, 0);
  counter_.Lose();
  for (int i = 0; i < 8; ++i) Renew();  // Two leases: still there.
  EXPECT_EQ(owner_->owner_stats().forks, 2);
  const int deletes = counter_.applied("DeleteFork");
  copy.reset();
  ASSERT_TRUE(counter_.WaitApplied("DeleteFork", deletes + 1));
  mine = RRef();
}

// remote()'s caller drops its copy at once, and the delete reaches the
// owner before the creating call: the owner remembers it, and frees the
// value when the function's result comes.
TEST_F(RRefContextTest, ADeleteBeforeItsCreateFreesTheValueWhenItResolves) {
  RRefDescriptor d{user_->NewId(), user_->NewId(), "worker1", 1};
  Promise<Done> created;
  {
    ASSERT_OK_AND_ASSIGN(std::shared_ptr<const RRefState> copy,
                         user_->Adopt(d, created.future()));
  }  // Released: the delete goes out.
  ASSERT_TRUE(counter_.WaitApplied("DeleteFork", 1));
  const proto::RRefHandle handle = DescriptorToProto(d);
  ASSERT_OK(owner_->Begin(handle, WorkerNode(0)));  // The call arrives.
  EXPECT_EQ(owner_->owner_stats().owned, 1);        // Computing.
  EXPECT_EQ(owner_->owner_stats().forks, 0);
  owner_->Finish(handle, Value(5));
  EXPECT_EQ(owner_->owner_stats().owned, 0);
  created.Set(Done());
}

class ChunkedRRefContextTest : public RRefContextTest {
 protected:
  void SetUp() override {
    Start(RRefOptions{.lease = kLease, .lease_chunk_handles = 1});
  }
};

// Renewals of one copy a message: a round is three messages, and the owner
// reconciles only when all of a round arrived. The user's delete of one
// copy is lost; the next round drops it.
TEST_F(ChunkedRRefContextTest, RoundsOfManyChunksReconcileLostDeletes) {
  auto [a, a_copy] = Share(1);
  auto [b, b_copy] = Share(2);
  auto [c, c_copy] = Share(3);
  Renew(3);
  EXPECT_EQ(owner_->owner_stats().forks, 6);
  counter_.Hold("DeleteFork");
  a_copy = RRef();
  Renew(2);
  EXPECT_EQ(owner_->owner_stats().forks, 5);
  counter_.Lose();
  for (int i = 0; i < 8; ++i) Renew(2);  // The others stay.
  EXPECT_EQ(owner_->owner_stats().forks, 5);
  const int deletes = counter_.applied("DeleteFork");
  b_copy = RRef();
  c_copy = RRef();
  ASSERT_TRUE(counter_.WaitApplied("DeleteFork", deletes + 2));
  a = RRef();
  b = RRef();
  c = RRef();
}

}  // namespace
}  // namespace ferry
