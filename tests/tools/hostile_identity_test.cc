// A peer holding the job's token — the right to join — against real ferryd
// daemons (issue 25): what it can still take or replay of others'
// identities. Each case failed on 95761cf (the comment says how) and is
// refused now, the job going on:
//   F2   a held twin of an expired Join was answered with the real worker's
//        credential and the client key;
//   F4   a squatter worker minted a client's credential and shut a worker
//        down;
//   F7   a departed client's credential worked again after 1024 others;
//   F8   what a caller presented to a squatter worked at every other worker;
//   F9   a client took the next client's op id and denied its collective;
//   F10  a replaced incarnation exited at its heartbeat timeout saying the
//        master died;
// and one connection took every client slot (--max_clients), and each
// departing client cost a log line on every worker.
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/rendezvous.grpc.pb.h"
#include "proto/worker.pb.h"
#include "rpc/auth/authenticator.h"
#include "rpc/auth/credential.h"
#include "rpc/auth/node_key.h"
#include "rpc/auth/security.h"
#include "rpc/base/limits.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/secret_files.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::BackgroundProcess;
using ::ferry::testing::DaemonCluster;
using ::ferry::testing::kCallMethod;
using ::ferry::testing::ProcessOptions;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::ferry::testing::Runfile;
using ::ferry::testing::UnusedPort;
using ::ferry::testing::WaitForPidGone;
using ::testing::HasSubstr;
using ::testing::Not;
namespace wire = ::ferry::testing::wire;

constexpr char kJoin[] = "/ferry.proto.Rendezvous/Join";
constexpr char kPoll[] = "/ferry.proto.Rendezvous/Poll";
constexpr char kShutdown[] = "/ferry.proto.Worker/Shutdown";
constexpr absl::Duration kWait = absl::Seconds(30);

std::string TokenOf(const std::string& file) {
  absl::StatusOr<std::string> token = ReadSecretFile(file, "--token_file");
  EXPECT_TRUE(token.ok()) << token.status();
  return token.ok() ? std::string(absl::StripAsciiWhitespace(*token)) : "";
}

bool Eventually(const std::function<bool()>& done) {
  return AwaitTrue(done, kWait, absl::Milliseconds(20));
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A job of real ferryd started rank by rank (not by `ferryctl up`), so a
// hostile peer can act before it forms.
class ManualJob {
 public:
  ManualJob(int world, std::vector<std::string> flags = {})
      : world_(world), flags_(std::move(flags)) {
    dir_ =
        std::string(getenv("TEST_TMPDIR")) + "/job" + std::to_string(++count_);
    mkdir(dir_.c_str(), 0700);
    token_file_ = ::ferry::testing::PrivateFile(
        "token" + std::to_string(count_), "hostile-identity-token\n");
    master_ = absl::StrCat("127.0.0.1:", UnusedPort());
  }
  std::unique_ptr<BackgroundProcess> Start(int rank) {
    ProcessOptions options;
    options.output_file = Log(rank);
    options.die_with_parent = true;
    std::vector<std::string> argv = {
        Runfile("tools/ferryd"),
        absl::StrCat("--rank=", rank),
        absl::StrCat("--world_size=", world_),
        absl::StrCat("--master=", master_),
        absl::StrCat("--token_file=", token_file_),
        absl::StrCat("--ready_file=", Ready(rank))};
    argv.insert(argv.end(), flags_.begin(), flags_.end());
    auto p = BackgroundProcess::Start(argv, options);
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }
  bool Joined(int rank) const { return std::ifstream(Ready(rank)).good(); }
  std::string Log(int rank) const {
    return absl::StrCat(dir_, "/worker", rank, ".log");
  }
  std::string Ready(int rank) const {
    return absl::StrCat(dir_, "/worker", rank, ".ready");
  }
  const std::string& master() const { return master_; }
  std::string token() const { return TokenOf(token_file_); }
  const std::string& token_file() const { return token_file_; }

 private:
  static inline int count_ = 0;
  int world_;
  std::vector<std::string> flags_;
  std::string dir_, token_file_, master_;
};

// A Join as a hostile peer sends it, with its key.
proto::JoinRequest JoinOf(int rank, int world, uint64_t incarnation,
                          int64_t timeout_ms, const std::string& address,
                          const NodeKey& key) {
  proto::JoinRequest r;
  r.mutable_worker()->set_name(absl::StrCat("worker", rank));
  r.mutable_worker()->set_rank(rank);
  r.mutable_worker()->set_address(address);
  r.mutable_worker()->set_public_key(key.public_key());
  r.mutable_worker()->set_host("127.0.0.1");
  r.set_world_size(world);
  r.set_incarnation(incarnation);
  r.set_timeout_ms(timeout_ms);
  return r;
}

// Waits until the master of `job` serves (an empty Join is refused).
bool MasterServes(RawClient& raw) {
  return Eventually([&] {
    return raw.Unary(kJoin, "", absl::Seconds(1)).status.error_code() !=
           grpc::StatusCode::UNAVAILABLE;
  });
}

// F2. Before: the twin was answered OK with worker1's credential (and the
// client key) once the real worker1 had joined.
TEST(HostileIdentityTest, F2AHeldJoinIsAnsweredOnlyForTheRanksHolder) {
  ManualJob job(3);
  auto zero = job.Start(0);
  RawClient attacker(job.master(), job.token());
  ASSERT_TRUE(MasterServes(attacker));
  auto key = NodeKey::Generate();
  auto first = std::async(std::launch::async, [&] {
    return attacker.Unary(
        kJoin,
        JoinOf(1, 3, 0xA77AC, 3000, "127.0.0.1:1", *key).SerializeAsString());
  });
  // The two race to the master: either may be held first, and what follows
  // holds for both orders.
  auto twin = std::async(std::launch::async, [&] {
    return attacker.Unary(
        kJoin,
        JoinOf(1, 3, 0xA77AC, 20000, "127.0.0.1:1", *key).SerializeAsString(),
        kWait);
  });
  RawReply expired = first.get();
  RawReply held = twin.get();
  // Whichever the master held last gives the rank up at its expiry, and
  // the other is answered with it: neither holds rank 1 any more.
  EXPECT_NE(expired.status.error_code(), grpc::StatusCode::OK);
  EXPECT_NE(held.status.error_code(), grpc::StatusCode::OK)
      << "the twin join was answered: it would be the rank's holder";
  EXPECT_THAT(expired.status.error_message() + held.status.error_message(),
              HasSubstr("gave the rank up"));
  proto::JoinResponse answer;
  ASSERT_TRUE(answer.ParseFromString(held.bytes));
  EXPECT_EQ(answer.workers_size(), 0);
  // The real workers form the job.
  auto one = job.Start(1);
  auto two = job.Start(2);
  ASSERT_TRUE(Eventually(
      [&] { return job.Joined(0) && job.Joined(1) && job.Joined(2); }));
}

// F4. Before: the squatter's Join answer carried the job's client key,
// and a credential it made with it for any client id shut worker0 down.
TEST(HostileIdentityTest, F4ASquatterCannotPassForAClient) {
  ManualJob job(2);
  auto zero = job.Start(0);
  RawClient attacker(job.master(), job.token());
  ASSERT_TRUE(MasterServes(attacker));
  auto key = NodeKey::Generate();
  RawReply joined = attacker.Unary(
      kJoin,
      JoinOf(1, 2, 0x5EA7, 20000, "127.0.0.1:1", *key).SerializeAsString(),
      kWait);
  ASSERT_TRUE(joined.status.ok()) << joined.status.error_message();
  proto::JoinResponse answer;
  ASSERT_TRUE(answer.ParseFromString(joined.bytes));
  ASSERT_EQ(answer.workers_size(), 2);
  const proto::WorkerInfo& worker0 = answer.workers(0);
  const std::string secret = *key->Agree(worker0.public_key());
  RawClient as(job.master(), job.token());
  // As itself, a worker: clients only.
  PresentedCredential own;
  own.node = 1;
  own.token =
      CallToken(secret, {1, key->public_key()}, {0, worker0.public_key()});
  as.set_credential(FormatCredential(own));
  RawReply shutdown = as.Unary(kShutdown, "");
  EXPECT_EQ(shutdown.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
      << shutdown.status.error_message();
  EXPECT_THAT(shutdown.status.error_message(),
              HasSubstr("is for clients only; the caller is worker1"));
  // As a client id the master would issue, vouched for with its own key as
  // if it were the master.
  const uint64_t client = (uint64_t{1} << 32) + 77;
  PresentedCredential forged;
  forged.node = client;
  forged.token =
      CallToken(secret, {client, key->public_key()}, {0, worker0.public_key()});
  forged.public_key = key->public_key();
  forged.voucher =
      VoucherTag(secret, {0, worker0.public_key()}, {0, worker0.public_key()},
                 {client, key->public_key()});
  as.set_credential(FormatCredential(forged));
  shutdown = as.Unary(kShutdown, "");
  EXPECT_EQ(shutdown.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << shutdown.status.error_message();
  EXPECT_FALSE(zero->Exited());
}

// F7. Before: the departed client's credential worked again once 1024
// others had come and gone (the memory of departed clients was capped).
TEST(HostileIdentityTest, F7ADepartedClientStaysRevoked) {
  ASSERT_OK_AND_ASSIGN(auto job, DaemonCluster::Up(1));
  const std::string token = TokenOf(job->token_file());
  auto register_and_leave = [&]() -> std::unique_ptr<RawClient> {
    auto c = std::make_unique<RawClient>(job->master(), token);
    absl::StatusOr<uint64_t> node = c->Register();
    EXPECT_TRUE(node.ok()) << node.status();
    // Leaves as itself.
    proto::PollRequest poll;
    poll.set_node(*node);
    poll.set_incarnation(c->incarnation());
    poll.set_leaving(true);
    RawReply left = c->Unary(kPoll, poll.SerializeAsString());
    EXPECT_TRUE(left.status.ok()) << left.status.error_message();
    return c;
  };
  std::unique_ptr<RawClient> departed = register_and_leave();
  const std::string request =
      wire::CallRequest("echo", {wire::Int(1)}, departed->node());
  ASSERT_TRUE(Eventually([&] {
    return departed->Unary(kCallMethod, request).status.error_code() ==
           grpc::StatusCode::UNAUTHENTICATED;
  }));
  for (size_t i = 0; i <= Authenticator::kRememberedGone + 4; ++i) {
    register_and_leave();
  }
  RawReply again = departed->Unary(kCallMethod, request);
  EXPECT_EQ(again.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << again.status.error_message();
}

// A squatter's server: records every call's node credential, answers
// UNAVAILABLE.
class Collector final : public grpc::CallbackGenericService {
 public:
  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    {
      absl::MutexLock lock(&mu_);
      auto it = context->client_metadata().find("ferry-credential");
      if (it != context->client_metadata().end()) {
        seen_.emplace_back(it->second.data(), it->second.size());
      }
    }
    class Refuse final : public grpc::ServerGenericBidiReactor {
     public:
      Refuse() { Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "no")); }
      void OnDone() override { delete this; }
    };
    return new Refuse();
  }
  std::vector<std::string> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> seen_;
};

// F8. Before: a squatter collected the bearer credentials of whoever
// called it, and each worked at every other worker (Shutdown included).
TEST(HostileIdentityTest, F8WhatASquatterCollectsIsUselessElsewhere) {
  ManualJob job(3);
  Collector collector;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterCallbackGenericService(&collector);
  std::unique_ptr<grpc::Server> squat = builder.BuildAndStart();
  ASSERT_NE(squat, nullptr);
  auto zero = job.Start(0);
  RawClient attacker(job.master(), job.token());
  ASSERT_TRUE(MasterServes(attacker));
  auto key = NodeKey::Generate();
  auto joined = std::async(std::launch::async, [&] {
    return attacker.Unary(
        kJoin,
        JoinOf(1, 3, 0x5EA7, 20000, absl::StrCat("127.0.0.1:", port), *key)
            .SerializeAsString(),
        kWait);
  });
  auto two = job.Start(2);
  ASSERT_TRUE(joined.get().status.ok());
  ASSERT_TRUE(Eventually([&] { return job.Joined(2); }));
  // An honest client, still connected, calls worker1 (the squatter).
  RpcClientOptions options;
  options.master = job.master();
  ASSERT_OK_AND_ASSIGN(options.security,
                       Security::Load({.token_file = job.token_file()}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientImpl> victim,
                       ClientImpl::Connect(options));
  EXPECT_FALSE(victim->rpc().RpcSync("worker1", "echo", {Value(1)}).ok());
  std::vector<std::string> seen = collector.seen();
  ASSERT_FALSE(seen.empty());
  // Replayed at worker2: Shutdown, for clients only.
  std::string ready = ReadAll(job.Ready(2));
  std::string worker2 = ready.substr(ready.find("\"address\":\"") + 11);
  worker2 = worker2.substr(0, worker2.find('"'));
  for (const std::string& credential : seen) {
    RawClient replay(worker2, job.token());
    replay.set_credential(credential);
    RawReply r = replay.Unary(kShutdown, "");
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << r.status.error_message();
    EXPECT_THAT(r.status.error_message(), HasSubstr("names no live node"));
  }
  EXPECT_FALSE(two->Exited());
  // The victim still reaches the honest workers.
  EXPECT_OK(victim->rpc().RpcSync("worker2", "echo", {Value(1)}).status());
  squat->Shutdown();
}

// F9. Before: op ids were "client<N>.<k>": the attacker, client N-1,
// took the next client's first one, and that client's collective failed.
TEST(HostileIdentityTest, F9AnOpIdIsItsMakersOnly) {
  ASSERT_OK_AND_ASSIGN(auto job, DaemonCluster::Up(2));
  const std::string token = TokenOf(job->token_file());
  RawClient attacker(job->address(0), token);
  ASSERT_OK_AND_ASSIGN(uint64_t me, attacker.Register());
  // The next client to register is the victim.
  const uint64_t victim = me + 1;
  auto take = [&](const std::string& op_id) {
    return attacker.Unary(
        kCallMethod,
        wire::CallRequest("ferry.collective",
                          {wire::Str("all_reduce"), wire::Str(op_id),
                           wire::Tensor(9, {1}, std::string(4, '\0')),
                           wire::Null(), wire::Int(20000)},
                          me),
        kWait);
  };
  // The old guess, and the victim's node with any suffix: not the
  // attacker's to use.
  for (const std::string& op_id :
       {absl::StrCat("client", victim - (uint64_t{1} << 32), ".0"),
        absl::StrCat(victim, ".0000000000000000")}) {
    RawReply refused = take(op_id);
    EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::PERMISSION_DENIED)
        << refused.status.error_message();
    EXPECT_THAT(refused.status.error_message(),
                HasSubstr(absl::StrCat("not to the caller, client node ", me)));
  }
  EXPECT_THAT(take(absl::StrCat(victim, ".1")).status.error_message(),
              HasSubstr(absl::StrCat("belongs to client node ", victim)));
  // The victim's collective runs.
  ASSERT_OK_AND_ASSIGN(ProcessResult reduce,
                       job->Ctl({"collective", "all_reduce"},
                                R"({"ranks": [{"dtype":"float32","data":[1]},
                             {"dtype":"float32","data":[2]}], "op": "sum"})"));
  EXPECT_EQ(reduce.exit_code, 0) << reduce.Describe();
  EXPECT_THAT(reduce.out, HasSubstr("3"));
}

// F10. Before: the old worker2, resumed, had its polls refused
// PERMISSION_DENIED (its credential was no longer worker2's) and exited at
// its heartbeat timeout, logging "worker0 (the master) died".
TEST(HostileIdentityTest, F10AReplacedIncarnationLearnsItWasReplaced) {
  ASSERT_OK_AND_ASSIGN(auto job,
                       DaemonCluster::Up(3, {"--heartbeat_timeout_ms=2000"}));
  RpcClientOptions options;
  options.master = job->master();
  ASSERT_OK_AND_ASSIGN(options.security,
                       Security::Load({.token_file = job->token_file()}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientImpl> client,
                       ClientImpl::Connect(options));
  const pid_t old = job->pid(2);
  ASSERT_EQ(kill(old, SIGSTOP), 0);
  // Declared dead by the master.
  ASSERT_TRUE(Eventually(
      [&] { return client->rpc().membership().DownReason(2).has_value(); }));
  ProcessOptions replacement_options;
  replacement_options.output_file = job->dir() + "/replacement.log";
  replacement_options.die_with_parent = true;
  ASSERT_OK_AND_ASSIGN(
      auto replacement,
      BackgroundProcess::Start(
          {Runfile("tools/ferryd"), "--rank=2", "--world_size=3",
           absl::StrCat("--master=", job->master()),
           absl::StrCat("--token_file=", job->token_file()),
           "--heartbeat_timeout_ms=2000",
           absl::StrCat("--ready_file=", job->dir(), "/replacement.ready")},
          replacement_options));
  ASSERT_TRUE(Eventually(
      [&] { return std::ifstream(job->dir() + "/replacement.ready").good(); }));
  ASSERT_EQ(kill(old, SIGCONT), 0);
  ASSERT_TRUE(WaitForPidGone(old, kWait));
  const std::string log = ReadAll(job->dir() + "/worker2.log");
  EXPECT_THAT(log, HasSubstr("this incarnation"));
  EXPECT_THAT(log, HasSubstr("was replaced"));
  EXPECT_THAT(log, Not(HasSubstr("master) died")));
  // The replacement serves on.
  ASSERT_OK_AND_ASSIGN(ProcessResult call,
                       job->Ctl({"call", "worker2", "add", "[1, 2]"}));
  EXPECT_EQ(call.exit_code, 0) << call.Describe();
}

// Before: one connection could register --max_clients (here 64) clients
// and keep them, and every other client was refused RESOURCE_EXHAUSTED.
TEST(HostileIdentityTest, OneConnectionCannotTakeEveryClientSlot) {
  ASSERT_OK_AND_ASSIGN(auto job, DaemonCluster::Up(1, {"--max_clients=64"}));
  RawClient attacker(job->master(), TokenOf(job->token_file()));
  absl::Status refused;
  int registered = 0;
  while (registered < 64 && refused.ok()) {
    absl::StatusOr<uint64_t> node = attacker.Register();
    refused = node.status();
    if (node.ok()) ++registered;
  }
  EXPECT_EQ(registered, Limits().max_clients_per_peer);
  EXPECT_THAT(refused, ::ferry::testing::StatusIs(
                           absl::StatusCode::kResourceExhausted,
                           HasSubstr("over the limit of 16 "
                                     "(--max_clients_per_peer=16)")));
  // Anyone else still registers.
  ASSERT_OK_AND_ASSIGN(ProcessResult status, job->Ctl({"status"}));
  EXPECT_EQ(status.exit_code, 0) << status.Describe();
}

// Before: one line per departing client on every worker (~1800 lines a
// second for a token holder churning clients).
TEST(HostileIdentityTest, ChurningClientsCostALinePerInterval) {
  ASSERT_OK_AND_ASSIGN(auto job, DaemonCluster::Up(2));
  const std::string token = TokenOf(job->token_file());
  for (int i = 0; i < 200; ++i) {
    RawClient c(job->master(), token);
    ASSERT_OK_AND_ASSIGN(uint64_t node, c.Register());
    proto::PollRequest poll;
    poll.set_node(node);
    poll.set_incarnation(c.incarnation());
    poll.set_leaving(true);
    ASSERT_TRUE(c.Unary(kPoll, poll.SerializeAsString()).status.ok());
  }
  // Worker1 has seen the last departure once a later client's call
  // passed it without a voucher (the master's announcements come in
  // order); then its log is read.
  RawClient witness(job->master(), token);
  ASSERT_OK_AND_ASSIGN(uint64_t node, witness.Register());
  const proto::WorkerInfo& one = witness.workers()[1];
  PresentedCredential unvouched;
  unvouched.node = node;
  unvouched.token =
      CallToken(*witness.key().Agree(one.public_key()),
                {node, witness.key().public_key()}, {1, one.public_key()});
  RawClient at1(job->address(1), token);
  at1.set_credential(FormatCredential(unvouched));
  ASSERT_TRUE(Eventually([&] {
    return at1
        .Unary(kCallMethod, wire::CallRequest("echo", {wire::Int(1)}, node))
        .status.ok();
  }));
  const std::string log = ReadAll(job->dir() + "/worker1.log");
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, "peer_down") &&
        absl::StrContains(line, "client")) {
      ++lines;
    }
  }
  // The first at once, the rest summarized once per 10 s: far below one a
  // client however slow this machine is.
  EXPECT_GE(lines, 1);
  EXPECT_LE(lines, 10) << log.substr(0, 2000);
}

}  // namespace
}  // namespace ferry
