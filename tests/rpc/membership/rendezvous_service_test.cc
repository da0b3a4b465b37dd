// The master's bounds against a caller that asks for too much: held joins
// and barriers, clients, barrier names. Each refusal is RESOURCE_EXHAUSTED
// naming its flag, and the master serves honest calls again once the
// excess is gone. Its held calls end by their time on its timers' clock,
// which the tests step by hand (nothing here waits for real time to pass).
// And identities: polls and barriers only from the node they name (its
// credential), PERMISSION_DENIED otherwise.
#include "rpc/membership/rendezvous_service.h"

#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/rendezvous.grpc.pb.h"
#include "rpc/auth/authenticator.h"
#include "rpc/auth/credential.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/limits.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/membership_client.h"
#include "rpc/wire/callback_queue.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/served_rendezvous.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::JoinRequestOf;
using ::ferry::testing::ManualClock;
using ::ferry::testing::ManualTimers;
using ::ferry::testing::ServedRendezvous;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uint64_t kIncarnation = 7;
// A new incarnation of a rank (a replacement process).
constexpr uint64_t kReplacement = 99;
// What joins and barriers ask the master to wait, on its clock.
constexpr int64_t kWaitMs = 20000;

// A call held by the master, answered in the background.
template <typename Request, typename Response>
struct Pending {
  grpc::ClientContext context;
  Request request;
  Response response;
  std::promise<grpc::Status> done;
  std::future<grpc::Status> status = done.get_future();

  // Whether it was answered within `wait`.
  bool AnsweredWithin(absl::Duration wait) {
    return status.wait_for(absl::ToChronoMilliseconds(wait)) ==
           std::future_status::ready;
  }
};

class RendezvousServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RendezvousOptions options;
    options.world_size = 2;
    options.heartbeat_timeout = absl::Minutes(10);  // Nobody dies here.
    options.limits.max_held_calls = 4;
    options.limits.max_clients = 3;
    options.limits.max_barriers = 2;
    options.limits.max_clients_per_peer = max_clients_per_peer_;
    options.require_identity = require_identity_;
    options.key = keys_[0];
    ASSERT_OK_AND_ASSIGN(master_, ServedRendezvous::Start(options, &timers_));
    service_ = &master_->service();
    server_address_ = master_->address();
    // Callback calls on channels of its own (rpc/wire/callback_queue.h).
    HoldGrpcCallbackQueue();
    channel_ = master_->NewChannel();
    stub_ = proto::Rendezvous::NewStub(channel_);
  }

  void TearDown() override {
    // Nothing is left held: every call was answered or expired.
    EXPECT_EQ(service_->held_waits(), 0);
    EXPECT_EQ(service_->held_polls(), 0);
    master_.reset();
    timers_.Stop();
  }

  static void Deadline(grpc::ClientContext* context) {
    context->set_deadline(std::chrono::system_clock::now() +
                          std::chrono::seconds(20));
  }

  proto::JoinRequest JoinOf(int rank) {
    return JoinRequestOf(rank, 2, *keys_[rank], kIncarnation + rank, kWaitMs);
  }

  // The key of a new incarnation of rank 1 (a replacement process).
  const NodeKey& ReplacementKey() const { return *replacement_key_; }

  // Joins as incarnation `incarnation` (0: the rank's first one; a
  // replacement, kReplacement, has a key of its own).
  std::unique_ptr<Pending<proto::JoinRequest, proto::JoinResponse>> JoinAsync(
      int rank, uint64_t incarnation = 0) {
    auto p =
        std::make_unique<Pending<proto::JoinRequest, proto::JoinResponse>>();
    Deadline(&p->context);
    p->request = JoinOf(rank);
    if (incarnation != 0) p->request.set_incarnation(incarnation);
    if (incarnation == kReplacement) {
      p->request.mutable_worker()->set_public_key(
          ReplacementKey().public_key());
    }
    return Send(std::move(p));
  }

  // Sends a prepared join.
  std::unique_ptr<Pending<proto::JoinRequest, proto::JoinResponse>> Send(
      std::unique_ptr<Pending<proto::JoinRequest, proto::JoinResponse>> p) {
    auto* raw = p.get();
    stub_->async()->Join(&p->context, &p->request, &p->response,
                         [raw](grpc::Status s) { raw->done.set_value(s); });
    return p;
  }

  // Waits (bounded in real time) until `done()`: gRPC delivers calls on
  // its own threads. Yields rather than sleeps.
  static bool Eventually(const std::function<bool()>& done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      std::this_thread::yield();
    }
    return true;
  }

  // Waits until the master holds `n` joins and barriers.
  bool AwaitHeld(int64_t n) {
    return Eventually([&] { return service_->held_waits() == n; });
  }

  grpc::Status Join(int rank) {
    grpc::ClientContext context;
    Deadline(&context);
    proto::JoinResponse response;
    return stub_->Join(&context, JoinOf(rank), &response);
  }

  // Forms the job (both ranks join); keeps their answers.
  void Form() {
    auto zero = JoinAsync(0);
    grpc::ClientContext context;
    Deadline(&context);
    ASSERT_TRUE(stub_->Join(&context, JoinOf(1), &joined_[1]).ok());
    ASSERT_TRUE(zero->status.get().ok());
    joined_[0] = zero->response;
  }

  // Sends `credential` (if any) as the call's node credential.
  static void Present(grpc::ClientContext* context,
                      const std::string& credential) {
    if (!credential.empty())
      context->AddMetadata(kCredentialHeader, credential);
  }

  std::unique_ptr<Pending<proto::BarrierRequest, proto::BarrierResponse>>
  BarrierAsync(uint64_t node, const std::string& name,
               const std::string& credential = "") {
    auto p = std::make_unique<
        Pending<proto::BarrierRequest, proto::BarrierResponse>>();
    Deadline(&p->context);
    Present(&p->context, credential);
    p->request.set_node(node);
    p->request.set_name(name);
    p->request.set_timeout_ms(kWaitMs);
    auto* raw = p.get();
    stub_->async()->Barrier(&p->context, &p->request, &p->response,
                            [raw](grpc::Status s) { raw->done.set_value(s); });
    return p;
  }

  grpc::Status Barrier(uint64_t node, const std::string& name,
                       const std::string& credential = "") {
    return BarrierAsync(node, name, credential)->status.get();
  }

  // Registers a client with a key of its own (kept: CredentialOf), over
  // `stub` (the fixture's connection if null).
  absl::StatusOr<proto::RegisterClientResponse> RegisterClient(
      proto::Rendezvous::Stub* stub = nullptr) {
    grpc::ClientContext context;
    Deadline(&context);
    auto key = NodeKey::Generate();
    proto::RegisterClientRequest request;
    request.set_description(std::string(10000, 'd'));  // Cut, not kept.
    request.set_public_key(key->public_key());
    proto::RegisterClientResponse response;
    grpc::Status s = (stub != nullptr ? stub : stub_.get())
                         ->RegisterClient(&context, request, &response);
    if (!s.ok()) {
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          s.error_message());
    }
    client_keys_[response.node()] = key;
    return response;
  }

  // What node `node` presents to the master (its credential, made with its
  // key: a worker's first incarnation's, or a registered client's).
  std::string CredentialOf(uint64_t node) {
    const NodeKey& key =
        IsWorkerNode(node) ? *keys_[node] : *client_keys_.at(node);
    return CredentialWith(node, key);
  }
  std::string CredentialWith(uint64_t node, const NodeKey& key) const {
    PresentedCredential c;
    c.node = node;
    c.token = CallToken(*key.Agree(keys_[0]->public_key()),
                        {node, key.public_key()}, {0, keys_[0]->public_key()});
    return FormatCredential(c);
  }

  std::unique_ptr<Pending<proto::PollRequest, proto::PollResponse>> PollAsync(
      uint64_t node, uint64_t incarnation, int64_t since, bool leaving,
      int64_t hold_ms, const std::string& credential = "") {
    auto p =
        std::make_unique<Pending<proto::PollRequest, proto::PollResponse>>();
    Deadline(&p->context);
    Present(&p->context, credential);
    p->request.set_node(node);
    p->request.set_incarnation(incarnation);
    p->request.set_since(since);
    p->request.set_hold_ms(hold_ms);
    p->request.set_leaving(leaving);
    auto* raw = p.get();
    stub_->async()->Poll(&p->context, &p->request, &p->response,
                         [raw](grpc::Status s) { raw->done.set_value(s); });
    return p;
  }

  // A poll the master holds for no time: answered once its (zero) hold is
  // due on the master's clock.
  grpc::Status Poll(uint64_t node, uint64_t incarnation, int64_t since,
                    bool leaving, const std::string& credential = "") {
    auto p =
        PollAsync(node, incarnation, since, leaving, /*hold_ms=*/0, credential);
    while (!p->AnsweredWithin(absl::Milliseconds(1))) timers_.RunDue();
    return p->status.get();
  }

  // A join for rank `rank` by a new incarnation; its answer.
  grpc::Status TakeOver(int rank) {
    proto::JoinRequest takeover = JoinOf(rank);
    takeover.set_incarnation(kReplacement);
    grpc::ClientContext context;
    Deadline(&context);
    proto::JoinResponse response;
    return stub_->Join(&context, takeover, &response);
  }

  // Waits until the master holds `n` polls.
  bool AwaitHeldPolls(int64_t n) {
    return Eventually([&] { return service_->held_polls() == n; });
  }

  bool require_identity_ = false;
  int64_t max_clients_per_peer_ = 16;
  // Rank 0's is the master's own.
  std::shared_ptr<const NodeKey> keys_[2] = {NodeKey::Generate(),
                                             NodeKey::Generate()};
  std::shared_ptr<const NodeKey> replacement_key_ = NodeKey::Generate();
  std::map<uint64_t, std::shared_ptr<const NodeKey>> client_keys_;
  proto::JoinResponse joined_[2];
  ManualClock clock_;
  ManualTimers timers_{&clock_};
  std::unique_ptr<ServedRendezvous> master_;
  RendezvousService* service_ = nullptr;  // master_'s.
  std::string server_address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::Rendezvous::Stub> stub_;
};

// Before, every retried join was held, without bound.
TEST_F(RendezvousServiceTest, HeldJoinsAreBounded) {
  std::vector<std::unique_ptr<Pending<proto::JoinRequest, proto::JoinResponse>>>
      held;
  for (int i = 0; i < 4; ++i) held.push_back(JoinAsync(0));
  ASSERT_TRUE(AwaitHeld(4));
  grpc::Status refused = Join(0);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("(--max_held_calls=4)"));
  for (auto& p : held) EXPECT_FALSE(p->AnsweredWithin(absl::ZeroDuration()));
  // The job still forms (the last join is never refused for room), and
  // every held join is answered.
  ASSERT_TRUE(Join(1).ok());
  for (auto& p : held) EXPECT_TRUE(p->status.get().ok());
  EXPECT_EQ(service_->held_waits(), 0);
}

TEST_F(RendezvousServiceTest, HeldBarriersAreBounded) {
  Form();
  std::vector<
      std::unique_ptr<Pending<proto::BarrierRequest, proto::BarrierResponse>>>
      held;
  for (int i = 0; i < 4; ++i) held.push_back(BarrierAsync(0, "x"));
  ASSERT_TRUE(AwaitHeld(4));
  grpc::Status refused = Barrier(0, "x");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("(--max_held_calls=4)"));
  // Rank 1 arrives: every held call is answered, and room is back.
  EXPECT_TRUE(Barrier(1, "x").ok());
  for (auto& p : held) EXPECT_TRUE(p->status.get().ok());
  EXPECT_TRUE(Barrier(0, "x").ok());  // Finished: passes at once.
  EXPECT_EQ(service_->held_waits(), 0);
}

// Before, every barrier name ever used stayed forever.
TEST_F(RendezvousServiceTest, BarrierNamesAreBounded) {
  Form();
  auto a = BarrierAsync(0, "a");
  auto b = BarrierAsync(0, "b");
  ASSERT_TRUE(AwaitHeld(2));
  grpc::Status refused = Barrier(0, "c");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("(--max_barriers=2)"));
  // "a" finishes: nobody waits at it, so it makes room for "c".
  EXPECT_TRUE(Barrier(1, "a").ok());
  EXPECT_TRUE(a->status.get().ok());
  auto c = BarrierAsync(0, "c");
  ASSERT_TRUE(AwaitHeld(2));
  EXPECT_TRUE(Barrier(1, "c").ok());
  EXPECT_TRUE(c->status.get().ok());
  EXPECT_TRUE(Barrier(1, "b").ok());
  EXPECT_TRUE(b->status.get().ok());
  // Names are bounded in length too.
  EXPECT_EQ(Barrier(0, std::string(1000, 'n')).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// Before, RegisterClient had no bound.
TEST_F(RendezvousServiceTest, ClientsAreBoundedAndForgottenOnceGone) {
  Form();
  std::vector<proto::RegisterClientResponse> clients;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse client,
                         RegisterClient());
    clients.push_back(client);
  }
  EXPECT_THAT(RegisterClient().status(),
              ::ferry::testing::StatusIs(absl::StatusCode::kResourceExhausted,
                                         HasSubstr("(--max_clients=3)")));
  // They leave; once both workers saw it, they are forgotten.
  for (const auto& c : clients) {
    ASSERT_TRUE(Poll(c.node(), c.incarnation(), 0, /*leaving=*/true).ok());
  }
  EXPECT_THAT(RegisterClient().status(),
              ::ferry::testing::StatusIs(absl::StatusCode::kResourceExhausted));
  // (Their registrations and departures: six events.)
  ASSERT_TRUE(Poll(0, kIncarnation, 6, false).ok());
  ASSERT_TRUE(Poll(1, kIncarnation + 1, 6, false).ok());
  EXPECT_OK(RegisterClient().status());
}

// A held barrier ends when the master's clock reaches its timeout, naming
// who did not arrive; not a moment before.
TEST_F(RendezvousServiceTest, AHeldBarrierExpiresWhenTheClockGetsThere) {
  Form();
  auto waiting = BarrierAsync(0, "x");
  ASSERT_TRUE(AwaitHeld(1));
  timers_.Advance(absl::Milliseconds(kWaitMs - 1));
  EXPECT_EQ(service_->held_waits(), 1);
  timers_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(service_->held_waits(), 0);
  grpc::Status expired = waiting->status.get();
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(expired.error_message(),
              HasSubstr("barrier 'x': rank 1 (worker1) did not arrive within "
                        "20000 ms"));
}

// A held join ends the same way, naming the missing rank, and frees the
// rank for a restarted process.
TEST_F(RendezvousServiceTest, AHeldJoinExpiresWhenTheClockGetsThere) {
  auto waiting = JoinAsync(1);
  ASSERT_TRUE(AwaitHeld(1));
  timers_.Advance(absl::Milliseconds(kWaitMs - 1));
  EXPECT_EQ(service_->held_waits(), 1);
  timers_.Advance(absl::Milliseconds(1));
  grpc::Status expired = waiting->status.get();
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(expired.error_message(),
              HasSubstr("rank 0 of 2 did not join within 20000 ms"));
  Form();  // Rank 1's slot was freed: the job still forms.
}

// A poll with nothing to report is held for its hold on the master's
// clock, then answered (empty); the node stays alive.
TEST_F(RendezvousServiceTest, AHeldPollIsAnsweredAtTheEndOfItsHold) {
  Form();
  auto poll = PollAsync(WorkerNode(1), kIncarnation + 1, 0, false, 3000);
  ASSERT_TRUE(AwaitHeldPolls(1));
  timers_.Advance(absl::Milliseconds(2999));
  EXPECT_EQ(service_->held_polls(), 1);
  timers_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(service_->held_polls(), 0);
  EXPECT_TRUE(poll->status.get().ok());
  EXPECT_EQ(poll->response.events_size(), 0);
  EXPECT_TRUE(Poll(WorkerNode(1), kIncarnation + 1, 0, false).ok());
}

// A client registering before the job formed retries, with its backoff
// and its timeout on its timers' clock: an hour of it passes as the test
// steps, then DEADLINE_EXCEEDED names the master and the last refusal.
TEST_F(RendezvousServiceTest, RegisteringRetriesUntilItsTimeoutOnTheClock) {
  absl::StatusOr<proto::RegisterClientResponse> registered;
  absl::Notification done;
  std::thread client([&] {
    registered = ::ferry::RegisterClient(channel_, "M", "early",
                                         NodeKey::Generate()->public_key(),
                                         absl::Hours(1), timers_);
    done.Notify();
  });
  while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(1))) {
    timers_.Advance(absl::Minutes(1));
  }
  client.join();
  EXPECT_THAT(registered.status(),
              ::ferry::testing::StatusIs(
                  absl::StatusCode::kDeadlineExceeded,
                  HasSubstr("the master at M was not ready within "
                            "3600000 ms (last error: the job is not formed "
                            "yet (waiting for ranks 0, 1))")));
}

// ---- Replacements ----

// A join for a rank whose holder is alive is refused, whatever the job's
// state: before it formed (a clash) and after (a takeover).
TEST_F(RendezvousServiceTest, ALiveRanksHolderCannotBeReplaced) {
  Form();
  auto holder = PollAsync(WorkerNode(1), kIncarnation + 1, 0, false, 60000);
  ASSERT_TRUE(AwaitHeldPolls(1));
  grpc::Status refused = TakeOver(1);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("rank 1 is already taken by worker1"));
  EXPECT_THAT(refused.error_message(), HasSubstr("which is alive"));
  // The holder goes on untouched.
  EXPECT_EQ(service_->held_polls(), 1);
  EXPECT_TRUE(Poll(WorkerNode(1), kIncarnation + 1, 0, false).ok());
}

// A crashed holder's poll may still look open: one held longer than
// kNudgeAfter is answered, to see whether the holder polls again, and the
// replacement is told to retry. A live holder polls again, and the retry
// is refused.
TEST_F(RendezvousServiceTest,
       AContestedHoldersOldPollIsAnsweredToAskIfItLives) {
  Form();
  auto old_poll = PollAsync(WorkerNode(1), kIncarnation + 1, 0, false, 60000);
  ASSERT_TRUE(AwaitHeldPolls(1));
  timers_.Advance(RendezvousService::kNudgeAfter + absl::Milliseconds(1));
  grpc::Status asked = TakeOver(1);
  EXPECT_EQ(asked.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(asked.error_message(),
              HasSubstr("asking it whether it is alive"));
  EXPECT_TRUE(old_poll->status.get().ok());
  auto again = PollAsync(WorkerNode(1), kIncarnation + 1, 0, false, 60000);
  ASSERT_TRUE(AwaitHeldPolls(1));
  EXPECT_EQ(TakeOver(1).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  timers_.Advance(absl::Seconds(60));  // The end of its hold.
  EXPECT_TRUE(again->status.get().ok());
}

// A holder out of contact (no poll open: its connection was reset) is
// never called alive: the replacement is told to retry (UNAVAILABLE, which
// the joiner does until its startup deadline) until the holder is
// declared dead.
TEST_F(RendezvousServiceTest, AReplacementForAHolderOutOfContactRetries) {
  Form();
  timers_.Advance(absl::Seconds(3));
  grpc::Status wait = TakeOver(1);
  EXPECT_EQ(wait.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(wait.error_message(),
              HasSubstr("rank 1 is still held by worker1"));
  EXPECT_THAT(wait.error_message(), HasSubstr("out of contact for 3000 ms"));
  EXPECT_THAT(wait.error_message(), Not(HasSubstr("alive")));
}

// Worker1 leaves; a new process for rank 1 rejoins as a new incarnation:
// the others get a REJOINED event with its entry (next generation, a new
// credential's digest), and its join is answered only once every live
// worker has seen that event.
TEST_F(RendezvousServiceTest, AGoneRankIsTakenByANewIncarnation) {
  Form();
  ASSERT_TRUE(Poll(WorkerNode(1), kIncarnation + 1, 0, /*leaving=*/true).ok());
  auto replacement = JoinAsync(1, kReplacement);
  ASSERT_TRUE(AwaitHeld(1));
  // Worker0's poll brings both events; the join waits for its next poll.
  auto news = PollAsync(WorkerNode(0), kIncarnation, 0, false, 0);
  ASSERT_TRUE(news->status.get().ok());
  ASSERT_EQ(news->response.events_size(), 2);
  EXPECT_EQ(news->response.first(), 0);
  const proto::NodeEvent& rejoined = news->response.events(1);
  EXPECT_EQ(rejoined.kind(), proto::NodeEvent::REJOINED);
  EXPECT_EQ(rejoined.node(), WorkerNode(1));
  EXPECT_EQ(rejoined.worker().name(), "worker1");
  EXPECT_EQ(rejoined.worker().generation(), 1u);
  EXPECT_FALSE(replacement->AnsweredWithin(absl::ZeroDuration()));
  auto next = PollAsync(WorkerNode(0), kIncarnation, 2, false, 1000);
  ASSERT_TRUE(replacement->status.get().ok());
  const proto::JoinResponse& joined = replacement->response;
  EXPECT_EQ(joined.workers(1).public_key(), ReplacementKey().public_key());
  EXPECT_NE(joined.workers(1).public_key(), joined_[1].workers(1).public_key());
  EXPECT_EQ(rejoined.worker().public_key(), joined.workers(1).public_key());
  EXPECT_EQ(joined.workers(1).generation(), 1u);
  EXPECT_EQ(joined.workers(0).generation(), 0u);
  EXPECT_EQ(joined.gone_size(), 0);
  EXPECT_EQ(joined.events_end(), 2);
  // The new incarnation polls from there; the old one is fenced.
  EXPECT_TRUE(Poll(WorkerNode(1), kReplacement, 2, false).ok());
  grpc::Status stale = Poll(WorkerNode(1), kIncarnation + 1, 2, false);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(stale.error_message(),
              HasSubstr("worker1: this incarnation (0000000000000008) was "
                        "replaced"));
  timers_.Advance(absl::Seconds(1));
  EXPECT_TRUE(next->status.get().ok());
}

// The answer tells the replacement who else is gone: polls start after
// those events, so it learns them from the answer.
TEST_F(RendezvousServiceTest, AReplacementLearnsWhoIsGone) {
  Form();
  // Both leave; rank 1 comes back, and nobody live is left to see it.
  ASSERT_TRUE(Poll(WorkerNode(1), kIncarnation + 1, 0, /*leaving=*/true).ok());
  ASSERT_TRUE(Poll(WorkerNode(0), kIncarnation, 1, /*leaving=*/true).ok());
  proto::JoinRequest request = JoinOf(1);
  request.set_incarnation(kReplacement);
  grpc::ClientContext context;
  Deadline(&context);
  proto::JoinResponse joined;
  ASSERT_TRUE(stub_->Join(&context, request, &joined).ok());
  ASSERT_EQ(joined.gone_size(), 1);
  EXPECT_EQ(joined.gone(0).node(), WorkerNode(0));
  EXPECT_EQ(joined.gone(0).kind(), proto::NodeEvent::LEFT);
  EXPECT_EQ(joined.events_end(), 3);
}

TEST_F(RendezvousServiceTest, AReplacementKeepsTheRanksName) {
  Form();
  ASSERT_TRUE(Poll(WorkerNode(1), kIncarnation + 1, 0, /*leaving=*/true).ok());
  proto::JoinRequest request = JoinOf(1);
  request.set_incarnation(kReplacement);
  request.mutable_worker()->set_name("impostor");
  grpc::ClientContext context;
  Deadline(&context);
  proto::JoinResponse response;
  grpc::Status refused = stub_->Join(&context, request, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("a replacement for rank 1 must be named worker1"));
}

// Rank 0 hosts the master: it is never taken over.
TEST_F(RendezvousServiceTest, RankZeroIsNeverReplaced) {
  Form();
  ASSERT_TRUE(Poll(WorkerNode(0), kIncarnation, 0, /*leaving=*/true).ok());
  proto::JoinRequest request = JoinOf(0);
  request.set_incarnation(kReplacement);
  grpc::ClientContext context;
  Deadline(&context);
  proto::JoinResponse response;
  EXPECT_EQ(stub_->Join(&context, request, &response).error_code(),
            grpc::StatusCode::ALREADY_EXISTS);
}

// A worker that never acknowledges the replacement keeps its join waiting
// until the join's timeout on the master's clock, which names it.
TEST_F(RendezvousServiceTest, AReplacementNobodyAcknowledgesTimesOut) {
  Form();
  ASSERT_TRUE(Poll(WorkerNode(1), kIncarnation + 1, 0, /*leaving=*/true).ok());
  auto replacement = JoinAsync(1, kReplacement);
  ASSERT_TRUE(AwaitHeld(1));
  timers_.Advance(absl::Milliseconds(kWaitMs));
  grpc::Status expired = replacement->status.get();
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(expired.error_message(),
              HasSubstr("worker0 did not see worker1 rejoin within 20000 ms"));
}

// Every node presents its credential (the job has a token or TLS).
class RendezvousIdentityTest : public RendezvousServiceTest {
 protected:
  RendezvousIdentityTest() { require_identity_ = true; }
};

// Issue 25 F2: nothing secret is ever in an answer; the directory carries
// each worker's public key, as it joined with it.
TEST_F(RendezvousIdentityTest, AJoinAnswerHoldsOnlyPublicKeys) {
  Form();
  for (int rank : {0, 1}) {
    const proto::JoinResponse& r = joined_[rank];
    ASSERT_EQ(r.workers_size(), 2);
    for (int k : {0, 1}) {
      EXPECT_EQ(r.workers(k).public_key(), keys_[k]->public_key());
    }
    EXPECT_EQ(r.clients_size(), 0);
    EXPECT_TRUE(r.GetReflection()->GetUnknownFields(r).empty());
  }
}

TEST_F(RendezvousIdentityTest, ClientsGetRandomIncarnationsAndVouchers) {
  Form();
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse a, RegisterClient());
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse b, RegisterClient());
  EXPECT_NE(a.incarnation(), b.incarnation());
  EXPECT_NE(a.incarnation(), 0u);
  // For each worker, what the master vouches for the client there: only
  // the master and that worker can make (or check) it.
  ASSERT_EQ(a.vouchers_size(), 2);
  for (int rank : {0, 1}) {
    EXPECT_EQ(
        a.vouchers(rank),
        VoucherTag(*keys_[rank]->Agree(keys_[0]->public_key()),
                   {0, keys_[0]->public_key()},
                   {static_cast<uint64_t>(rank), keys_[rank]->public_key()},
                   {a.node(), client_keys_[a.node()]->public_key()}));
  }
  // A guessed incarnation is not enough to poll as a client.
  EXPECT_EQ(Poll(a.node(), 0, 0, false, CredentialOf(a.node())).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  // A key that is no X25519 key is refused.
  grpc::ClientContext context;
  Deadline(&context);
  proto::RegisterClientRequest bad;
  bad.set_public_key(std::string(32, '\0'));
  proto::RegisterClientResponse response;
  EXPECT_EQ(stub_->RegisterClient(&context, bad, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

// A client's registration is announced to the workers (its key), in the
// order of ids; a replacement learns the live clients from its answer.
TEST_F(RendezvousIdentityTest, ClientsAreAnnouncedToTheWorkers) {
  Form();
  auto news =
      PollAsync(WorkerNode(0), kIncarnation, 0, false, 3000, CredentialOf(0));
  ASSERT_TRUE(AwaitHeldPolls(1));
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse a, RegisterClient());
  ASSERT_TRUE(news->status.get().ok());
  ASSERT_EQ(news->response.events_size(), 1);
  const proto::NodeEvent& e = news->response.events(0);
  EXPECT_EQ(e.kind(), proto::NodeEvent::REGISTERED);
  EXPECT_EQ(e.node(), a.node());
  EXPECT_EQ(e.public_key(), client_keys_[a.node()]->public_key());
  // Worker1 leaves; its replacement's answer lists the live client.
  ASSERT_TRUE(Poll(WorkerNode(1), kIncarnation + 1, 0, /*leaving=*/true,
                   CredentialOf(1))
                  .ok());
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse b, RegisterClient());
  ASSERT_TRUE(
      Poll(b.node(), b.incarnation(), 0, true, CredentialOf(b.node())).ok());
  auto replacement = JoinAsync(1, kReplacement);
  ASSERT_TRUE(AwaitHeld(1));
  // Events: a registered, worker1 left, b registered, b left, worker1
  // rejoined. Worker0 past them all answers the replacement's join.
  auto next =
      PollAsync(WorkerNode(0), kIncarnation, 5, false, 1000, CredentialOf(0));
  ASSERT_TRUE(replacement->status.get().ok());
  const proto::JoinResponse& joined = replacement->response;
  ASSERT_EQ(joined.clients_size(), 1);
  EXPECT_EQ(joined.clients(0).node(), a.node());
  EXPECT_EQ(joined.clients(0).public_key(),
            client_keys_[a.node()]->public_key());
  EXPECT_EQ(joined.clients_end(), b.node() + 1);
  timers_.Advance(absl::Seconds(1));
  EXPECT_TRUE(next->status.get().ok());
}

TEST_F(RendezvousIdentityTest, ALeaveForAnotherClientIsRefused) {
  Form();
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse victim, RegisterClient());
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse attacker,
                       RegisterClient());
  grpc::Status forged = Poll(victim.node(), victim.incarnation(), 0,
                             /*leaving=*/true, CredentialOf(attacker.node()));
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(forged.error_message(),
              HasSubstr(absl::StrCat("claims client node ", victim.node())));
  EXPECT_THAT(forged.error_message(),
              HasSubstr(absl::StrCat("is client node ", attacker.node())));
  EXPECT_EQ(Poll(victim.node(), victim.incarnation(), 0, true).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // The victim is still a member: its own polls go on.
  EXPECT_TRUE(Poll(victim.node(), victim.incarnation(), 0, false,
                   CredentialOf(victim.node()))
                  .ok());
}

TEST_F(RendezvousIdentityTest, ABarrierForAnotherWorkerIsRefused) {
  Form();
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse client, RegisterClient());
  grpc::Status forged = Barrier(1, "b", CredentialOf(0));
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(
      forged.error_message(),
      HasSubstr("barrier: node claims worker1 but the call is worker0"));
  EXPECT_EQ(Barrier(1, "b", CredentialOf(client.node())).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Barrier(1, "b").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(service_->held_waits(), 0);  // Nobody was counted as arrived.
  // The honest barrier still needs both workers, and passes.
  auto zero = BarrierAsync(0, "b", CredentialOf(0));
  ASSERT_TRUE(AwaitHeld(1));
  EXPECT_TRUE(Barrier(1, "b", CredentialOf(1)).ok());
  EXPECT_TRUE(zero->status.get().ok());
}

// ---- Issue 25: identities that cannot be stolen ----

// F2: two joins for rank 1 with one incarnation, the first short; it
// expires and gives the rank up. Before, the second stayed held and was
// answered, once the real worker1 joined, with worker1's credential and
// the client key. Now it is answered ABORTED the moment the rank is given
// up, and a held join is only ever answered for the incarnation holding
// the slot.
TEST_F(RendezvousServiceTest, AHeldJoinIsAnsweredOnlyForTheSlotsHolder) {
  auto attacker = NodeKey::Generate();
  auto join = [&](int64_t timeout_ms) {
    auto p =
        std::make_unique<Pending<proto::JoinRequest, proto::JoinResponse>>();
    Deadline(&p->context);
    p->request = JoinOf(1);
    p->request.set_incarnation(0xA77AC);
    p->request.mutable_worker()->set_public_key(attacker->public_key());
    p->request.set_timeout_ms(timeout_ms);
    return Send(std::move(p));
  };
  auto first = join(100);
  ASSERT_TRUE(AwaitHeld(1));
  auto second = join(kWaitMs);
  ASSERT_TRUE(AwaitHeld(2));
  timers_.Advance(absl::Milliseconds(100));
  EXPECT_EQ(first->status.get().error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  grpc::Status twin = second->status.get();
  EXPECT_EQ(twin.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(twin.error_message(),
              HasSubstr("another join of incarnation 00000000000a77ac for "
                        "rank 1 gave the rank up"));
  EXPECT_EQ(second->response.workers_size(), 0);
  EXPECT_EQ(service_->held_waits(), 0);
  // The real worker1 takes the rank; the job forms with it.
  Form();
  EXPECT_EQ(joined_[0].workers(1).public_key(), keys_[1]->public_key());
}

// Same incarnation, another key: not the holder (it would be answered as
// the holder otherwise).
TEST_F(RendezvousServiceTest, ASlotIsHeldByAnIncarnationAndItsKey) {
  auto held = JoinAsync(1);
  ASSERT_TRUE(AwaitHeld(1));
  proto::JoinRequest twin = JoinOf(1);
  twin.mutable_worker()->set_public_key(NodeKey::Generate()->public_key());
  grpc::ClientContext context;
  Deadline(&context);
  proto::JoinResponse response;
  grpc::Status refused = stub_->Join(&context, twin, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(refused.error_message(),
              HasSubstr("rank 1 is already taken by worker1"));
  ASSERT_TRUE(Join(0).ok());
  EXPECT_TRUE(held->status.get().ok());
}

// Rank 0 is the master itself: only its key, and a real X25519 key.
TEST_F(RendezvousServiceTest, JoinsCarryUsableKeysAndRankZeroTheMasters) {
  proto::JoinRequest impostor = JoinOf(0);
  impostor.mutable_worker()->set_public_key(NodeKey::Generate()->public_key());
  proto::JoinRequest keyless = JoinOf(1);
  keyless.mutable_worker()->set_public_key(std::string(32, '\0'));
  grpc::ClientContext c1, c2;
  Deadline(&c1);
  Deadline(&c2);
  proto::JoinResponse response;
  grpc::Status squat = stub_->Join(&c1, impostor, &response);
  EXPECT_EQ(squat.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(squat.error_message(), HasSubstr("rank 0 is the master itself"));
  grpc::Status bad = stub_->Join(&c2, keyless, &response);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("Join: worker.public_key"));
  EXPECT_EQ(service_->held_waits(), 0);
  Form();
}

// A join whose shape is wrong (world size, rank) is refused for that before
// its key is agreed on: the master spends no ECDH (~35 us) on it. The key
// here is unusable too, and the error names the shape, not the key (before,
// the key was agreed on first, and the error named it).
TEST_F(RendezvousServiceTest, AMalformedJoinIsRefusedBeforeItsKeyAgreement) {
  proto::JoinRequest wrong_world = JoinOf(1);
  wrong_world.set_world_size(3);
  wrong_world.mutable_worker()->set_public_key(std::string(32, '\0'));
  proto::JoinRequest wrong_rank = JoinOf(1);
  wrong_rank.mutable_worker()->set_rank(2);
  wrong_rank.mutable_worker()->set_public_key(std::string(32, '\0'));
  grpc::ClientContext c1, c2;
  Deadline(&c1);
  Deadline(&c2);
  proto::JoinResponse response;
  grpc::Status world = stub_->Join(&c1, wrong_world, &response);
  EXPECT_EQ(world.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(world.error_message(),
              HasSubstr("world_size 3 of worker1 does not match"));
  grpc::Status rank = stub_->Join(&c2, wrong_rank, &response);
  EXPECT_EQ(rank.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(rank.error_message(), HasSubstr("rank 2 is out of range"));
  EXPECT_EQ(service_->held_waits(), 0);
  Form();
}

// F10: a replaced incarnation that polls again (it was paused, say) hears
// that it was replaced, whatever credential it presents: before, its old
// credential was refused PERMISSION_DENIED first, and it retried until it
// took the master for dead.
TEST_F(RendezvousIdentityTest, AReplacedIncarnationIsToldItWasReplaced) {
  Form();
  ASSERT_TRUE(Poll(WorkerNode(1), kIncarnation + 1, 0, /*leaving=*/true,
                   CredentialOf(1))
                  .ok());
  auto replacement = JoinAsync(1, kReplacement);
  ASSERT_TRUE(AwaitHeld(1));
  auto ack =
      PollAsync(WorkerNode(0), kIncarnation, 2, false, 1000, CredentialOf(0));
  ASSERT_TRUE(replacement->status.get().ok());
  for (const std::string& presented :
       {CredentialOf(1), std::string(), std::string("v1.1.junk")}) {
    grpc::Status old =
        Poll(WorkerNode(1), kIncarnation + 1, 2, false, presented);
    EXPECT_EQ(old.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_THAT(old.error_message(),
                HasSubstr("worker1: this incarnation (0000000000000008) was "
                          "replaced"));
    EXPECT_THAT(old.error_message(), HasSubstr("generation 1"));
  }
  // The new incarnation polls on, with its own credential only.
  EXPECT_TRUE(Poll(WorkerNode(1), kReplacement, 2, false,
                   CredentialWith(1, ReplacementKey()))
                  .ok());
  EXPECT_EQ(
      Poll(WorkerNode(1), kReplacement, 2, false, CredentialOf(1)).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);
  timers_.Advance(absl::Seconds(1));
  EXPECT_TRUE(ack->status.get().ok());
}

// One connection registers --max_clients_per_peer live clients at most;
// others still register, and a connection's departed clients make room.
class ClientsPerPeerTest : public RendezvousServiceTest {
 protected:
  ClientsPerPeerTest() { max_clients_per_peer_ = 2; }
};

TEST_F(ClientsPerPeerTest, OneConnectionCannotTakeEveryClientSlot) {
  Form();
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse a, RegisterClient());
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse b, RegisterClient());
  EXPECT_THAT(
      RegisterClient().status(),
      ::ferry::testing::StatusIs(
          absl::StatusCode::kResourceExhausted,
          HasSubstr("2 live clients were registered over this connection")));
  EXPECT_THAT(RegisterClient().status().message(),
              HasSubstr("(--max_clients_per_peer=2)"));
  // Another connection (a channel with a connection of its own).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto other = proto::Rendezvous::NewStub(grpc::CreateCustomChannel(
      server_address_, grpc::InsecureChannelCredentials(), args));
  ASSERT_OK_AND_ASSIGN(proto::RegisterClientResponse c,
                       RegisterClient(other.get()));
  // One of the first connection's leaves: it may register one more (once
  // the workers saw it go, when the master forgets it: --max_clients=3).
  grpc::Status left = Poll(a.node(), a.incarnation(), 0, /*leaving=*/true);
  ASSERT_TRUE(left.ok()) << left.error_message();
  // Every live node saw it go (three registrations, one departure).
  ASSERT_TRUE(Poll(0, kIncarnation, 4, false).ok());
  ASSERT_TRUE(Poll(1, kIncarnation + 1, 4, false).ok());
  ASSERT_TRUE(Poll(b.node(), b.incarnation(), 4, false).ok());
  ASSERT_TRUE(Poll(c.node(), c.incarnation(), 4, false).ok());
  EXPECT_OK(RegisterClient().status());
}

}  // namespace
}  // namespace ferry
