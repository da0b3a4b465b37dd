// What a peer can hold open on a worker, against real ferryd daemons
// (issue 25, part C): streamed-call reservations (F5), lease rounds (F6),
// idle streams, calls that arrive before the job formed, and the files
// ferryd and ferryctl write on a full disk (F11). Each case is what an
// attacker did on 95761cf; the worker must answer with the specific code,
// name the flag that bounds it, and keep serving honest callers.
//
// Flags that exist since 95761cf size the F5 and F6 cases, so that run
// against that build they show the old behaviour, not an unknown flag.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ferry/ferry.h"
#include "gtest/gtest.h"
#include "proto/rref.pb.h"
#include "proto/worker.pb.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/full_disk.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::BackgroundProcess;
using ::ferry::testing::DaemonCluster;
using ::ferry::testing::kCallMethod;
using ::ferry::testing::kCallStreamMethod;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::ferry::testing::Runfile;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace wire = ::ferry::testing::wire;

constexpr int kFloat32 = 9;  // proto/value.proto's DType numbers.
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr char kRenewLeaseMethod[] = "/ferry.proto.RRefs/RenewLease";
constexpr char kFetchMethod[] = "/ferry.proto.RRefs/Fetch";
// Bounds only a hang: every case is answered long before.
constexpr absl::Duration kBound = absl::Seconds(30);

// Polls `s` (the worker's status) until `done` holds or `bound` passed;
// the last status read.
proto::WorkerStatus AwaitStatus(
    RawClient& raw, const std::function<bool(const proto::WorkerStatus&)>& done,
    absl::Duration bound = kBound) {
  proto::WorkerStatus last;
  AwaitTrue(
      [&] {
        absl::StatusOr<proto::WorkerStatus> s = raw.Status();
        if (s.ok()) last = *s;
        return s.ok() && done(last);
      },
      bound, absl::Milliseconds(20));
  return last;
}

// A streamed call's messages: the head, then `request` in 1 MiB chunks.
std::vector<std::string> Streamed(const std::string& request) {
  std::vector<std::string> messages = {wire::StreamHead(request.size())};
  for (size_t at = 0; at < request.size(); at += size_t{1} << 20) {
    messages.push_back(wire::StreamChunk(request.substr(at, size_t{1} << 20)));
  }
  return messages;
}

// An honest streamed echo of 3 MiB from `raw`; OK if answered whole.
void ExpectStreamedEcho(RawClient& raw) {
  const std::string data(size_t{3} << 20, '\x01');
  const std::string request = wire::CallRequest(
      "echo", {wire::Tensor(kFloat32, {int64_t{3} << 18}, data)}, raw.node());
  RawReply r = raw.Stream(kCallStreamMethod, Streamed(request), kBound);
  ASSERT_TRUE(r.status.ok())
      << r.status.error_code() << ": " << r.status.error_message();
  EXPECT_GT(r.bytes.size(), data.size());
}

std::unique_ptr<RawClient> Registered(const DaemonCluster& job) {
  auto raw = std::make_unique<RawClient>(job.address(0), job.token());
  absl::StatusOr<uint64_t> node = raw->Register();
  EXPECT_TRUE(node.ok()) << node.status();
  return raw;
}

void Log(const std::string& what, const RawReply& r) {
  std::cout << ::testing::UnitTest::GetInstance()->current_test_info()->name()
            << ": " << what << ": " << r.status.error_code() << " in "
            << absl::ToInt64Milliseconds(r.elapsed)
            << " ms: " << r.status.error_message().substr(0, 240) << "\n";
}

// ---- F5: streamed-call reservations ----

// Two half-open heads announcing half of --grpc_memory_mb each reserved
// all of it until their sender left: every other caller's streamed call
// was refused. Now a head reserves nothing; bytes are held as they come.
TEST(HostileBudgetTest, HalfOpenStreamHeadsHoldNothing) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(1, {"--grpc_memory_mb=64", "--max_message_mb=64"});
  ASSERT_TRUE(job.ok()) << job.status();
  std::unique_ptr<RawClient> attacker = Registered(**job);
  const uint64_t half = 32 * kMiB - 256;
  auto first = attacker->Hold(kCallStreamMethod, {wire::StreamHead(half)});
  auto second = attacker->Hold(kCallStreamMethod, {wire::StreamHead(half)});
  ASSERT_TRUE(first->AwaitWritten(kBound));
  ASSERT_TRUE(second->AwaitWritten(kBound));
  // A round trip after the heads, so the worker has read them.
  ASSERT_TRUE(attacker->Status().ok());
  absl::StatusOr<proto::WorkerStatus> s = attacker->Status();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->stream_bytes(), 0);
  std::unique_ptr<RawClient> honest = Registered(**job);
  ExpectStreamedEcho(*honest);
}

// A stream that stops sending is dropped --stream_ttl_ms after it began,
// and what it held goes back.
TEST(HostileBudgetTest, AHalfSentStreamExpires) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(1, {"--stream_ttl_ms=1500"});
  ASSERT_TRUE(job.ok()) << job.status();
  std::unique_ptr<RawClient> raw = Registered(**job);
  auto held = raw->Hold(
      kCallStreamMethod,
      {wire::StreamHead(10 * kMiB), wire::StreamChunk(std::string(kMiB, 'x'))});
  ASSERT_TRUE(held->AwaitWritten(kBound));
  RawReply r = held->Wait(kBound);
  Log("held stream", r);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("request: 1048576 of 10485760 bytes received"),
                    HasSubstr("(--stream_ttl_ms=1500)")));
  proto::WorkerStatus s = AwaitStatus(*raw, [](const proto::WorkerStatus& s) {
    return s.stream_bytes() == 0 && s.open_streams() == 0;
  });
  EXPECT_EQ(s.stream_bytes(), 0);
  EXPECT_EQ(s.open_streams(), 0);
  // An idle stream (no head at all) expires the same way.
  auto idle = raw->Hold(kCallStreamMethod, {});
  r = idle->Wait(kBound);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("no stream head received"),
                    HasSubstr("(--stream_ttl_ms=1500)")));
}

// One peer holds at most --max_stream_mb_per_peer of streamed requests;
// another peer's calls still fit.
TEST(HostileBudgetTest, OnePeerIsHeldToItsShare) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(1, {"--max_stream_mb_per_peer=8"});
  ASSERT_TRUE(job.ok()) << job.status();
  std::unique_ptr<RawClient> attacker = Registered(**job);
  std::vector<std::string> six = {wire::StreamHead(7 * kMiB)};
  for (int i = 0; i < 6; ++i) {
    six.push_back(wire::StreamChunk(std::string(kMiB, 'x')));
  }
  auto held = attacker->Hold(kCallStreamMethod, six);
  ASSERT_TRUE(held->AwaitWritten(kBound));
  proto::WorkerStatus s =
      AwaitStatus(*attacker, [](const proto::WorkerStatus& s) {
        return s.stream_bytes() >= 6 * kMiB;
      });
  ASSERT_GE(s.stream_bytes(), 6 * kMiB);
  // The same peer's next stream would take it past its share.
  std::vector<std::string> more = {wire::StreamHead(7 * kMiB)};
  for (int i = 0; i < 4; ++i) {
    more.push_back(wire::StreamChunk(std::string(kMiB, 'y')));
  }
  RawReply r = attacker->Stream(kCallStreamMethod, more, kBound);
  Log("second stream", r);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("would hold"),
                    HasSubstr("(--max_stream_mb_per_peer=8)")));
  // Another client's streamed call is not affected.
  std::unique_ptr<RawClient> honest = Registered(**job);
  ExpectStreamedEcho(*honest);
}

// ---- Idle streams ----

// Streams open at once are capped across connections: the one past
// --max_open_streams is refused at once, and a place that frees is usable.
TEST(HostileBudgetTest, OpenStreamsAreCappedAcrossConnections) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(1, {"--max_open_streams=6"});
  ASSERT_TRUE(job.ok()) << job.status();
  // Three connections, two idle streams each.
  std::vector<std::unique_ptr<RawClient>> peers;
  std::vector<std::unique_ptr<RawClient::HeldStream>> held;
  for (int i = 0; i < 3; ++i) {
    peers.push_back(Registered(**job));
    for (int j = 0; j < 2; ++j) {
      held.push_back(peers.back()->Hold(kCallStreamMethod, {}));
    }
  }
  proto::WorkerStatus s = AwaitStatus(
      *peers[0],
      [](const proto::WorkerStatus& s) { return s.open_streams() == 6; });
  ASSERT_EQ(s.open_streams(), 6);
  std::unique_ptr<RawClient> late = Registered(**job);
  RawReply r = late->Stream(kCallStreamMethod, {}, kBound);
  Log("seventh stream", r);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("6 streams open here"),
                    HasSubstr("(--max_open_streams=6)")));
  held.pop_back();  // Cancelled: its place comes back.
  s = AwaitStatus(*peers[0], [](const proto::WorkerStatus& s) {
    return s.open_streams() == 5;
  });
  ASSERT_EQ(s.open_streams(), 5);
  ExpectStreamedEcho(*late);
}

// A streamed sleep_ms holds its stream as long as it asks: a few peers
// holding streams open took the whole pool, and every other peer's
// streamed calls and the workers' collective streams were refused. Now
// one peer has at most --max_open_streams_per_peer of them; its next is
// refused naming it, and others are served.
TEST(HostileBudgetTest, OnePeerHasOnlyItsShareOfTheOpenStreams) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(1, {"--max_open_streams_per_peer=2"});
  ASSERT_TRUE(job.ok()) << job.status();
  std::unique_ptr<RawClient> attacker = Registered(**job);
  const std::vector<std::string> sleep = Streamed(wire::CallRequest(
      "sleep_ms", {wire::Int(absl::ToInt64Milliseconds(2 * kBound))},
      attacker->node()));
  std::vector<std::unique_ptr<RawClient::HeldStream>> held;
  for (int i = 0; i < 2; ++i) {
    held.push_back(attacker->Hold(kCallStreamMethod, sleep));
  }
  proto::WorkerStatus s = AwaitStatus(
      *attacker,
      [](const proto::WorkerStatus& s) { return s.open_streams() == 2; });
  ASSERT_EQ(s.open_streams(), 2);
  EXPECT_EQ(s.limits().at("max_open_streams_per_peer"), 2);
  RawReply r = attacker->Stream(kCallStreamMethod, sleep, kBound);
  Log("third stream", r);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr(absl::StrCat("client node ", attacker->node(),
                                           " would have 3 streams open here")),
                    HasSubstr("(--max_open_streams_per_peer=2)")));
  std::unique_ptr<RawClient> honest = Registered(**job);
  ExpectStreamedEcho(*honest);
}

// ---- Calls before the job formed ----

// A worker that has not joined yet (rank 0 of 2, rank 1 never comes)
// holds calls that arrive for it at most --max_prejoin_calls at once and
// --prejoin_wait_ms each: parked calls, and calls presenting a credential
// (which wait for the Join answer off gRPC's callback threads).
class PrejoinTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags) {
    std::string pattern =
        absl::StrCat(std::getenv("TEST_TMPDIR"), "/prejoin-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    const std::string dir = pattern;
    token_ = "t0ken-for-the-prejoin-test";
    const std::string token_file = dir + "/token";
    std::ofstream(token_file) << token_ << "\n";
    ASSERT_EQ(chmod(token_file.c_str(), 0600), 0);
    const std::string addr = dir + "/w0.addr";
    std::vector<std::string> argv = {Runfile("tools/ferryd"),
                                     "--rank=0",
                                     "--world_size=2",
                                     "--master=127.0.0.1:0",
                                     "--token_file=" + token_file,
                                     "--address_file=" + addr,
                                     "--startup_timeout_ms=120000"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    absl::StatusOr<std::unique_ptr<BackgroundProcess>> p =
        BackgroundProcess::Start(argv);
    ASSERT_TRUE(p.ok()) << p.status();
    ferryd_ = *std::move(p);
    AwaitTrue(
        [&] { return ferryd_->Exited() || access(addr.c_str(), R_OK) == 0; },
        kBound, absl::Milliseconds(20));
    std::ifstream in(addr);
    std::getline(in, address_);
    ASSERT_FALSE(address_.empty())
        << ferryd_->Wait(absl::ZeroDuration()).Describe();
  }

  std::string address_;
  std::string token_;
  std::unique_ptr<BackgroundProcess> ferryd_;
};

// Calls beyond the count are refused at once, naming the flag: three calls
// of each kind with places for two.
TEST_F(PrejoinTest, CallsWaitingForTheJobAreBoundedInNumber) {
  ASSERT_NO_FATAL_FAILURE(
      Start({"--max_prejoin_calls=2", "--prejoin_wait_ms=600000"}));
  RawClient anonymous(address_, token_);
  std::vector<RawReply> parked = anonymous.UnaryMany(
      kCallMethod, wire::CallRequest("echo", {wire::Int(1)}, 0), 3,
      absl::Seconds(3));
  RawClient forger(address_, token_);
  forger.set_credential("c4294967299.made-up");
  std::vector<RawReply> waiting =
      forger.UnaryMany(kFetchMethod, "", 3, absl::Seconds(3));
  for (const auto* replies : {&parked, &waiting}) {
    int refused = 0, expired = 0;
    for (const RawReply& r : *replies) {
      Log("before the job formed", r);
      if (r.status.error_code() == grpc::StatusCode::UNAVAILABLE) {
        ++refused;
        EXPECT_THAT(r.status.error_message(),
                    AllOf(HasSubstr("has not joined the job yet"),
                          HasSubstr("(--max_prejoin_calls=2)")));
        EXPECT_LT(r.elapsed, absl::Seconds(2));
      }
      if (r.status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        ++expired;  // The caller's own deadline: it waited.
      }
    }
    EXPECT_GE(refused, 1);
    EXPECT_EQ(refused + expired, 3);
  }
}

// A call that waited --prejoin_wait_ms is answered UNAVAILABLE naming it.
TEST_F(PrejoinTest, CallsWaitingForTheJobExpire) {
  ASSERT_NO_FATAL_FAILURE(Start({"--prejoin_wait_ms=300"}));
  RawClient anonymous(address_, token_);
  RawReply r = anonymous.Unary(
      kCallMethod, wire::CallRequest("echo", {wire::Int(1)}, 0), kBound);
  Log("parked call", r);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(r.status.error_message(),
              AllOf(HasSubstr("did not join the job within 300 ms"),
                    HasSubstr("(--prejoin_wait_ms=300)")));
  RawClient forger(address_, token_);
  forger.set_credential("c4294967299.made-up");
  r = forger.Unary(kFetchMethod, "", kBound);
  Log("credential call", r);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(r.status.error_message(), HasSubstr("(--prejoin_wait_ms=300)"));
  EXPECT_FALSE(ferryd_->Exited());
}

// ---- F6: lease rounds ----

// One holder's lease round walks that holder's forks only: a flood of
// rounds from a client holding nothing costs the table nothing, however
// many RRefs others hold there (95761cf walked them all, under its lock,
// for every 20-byte round).
TEST(HostileBudgetTest, AFloodOfLeaseRoundsWalksNoOneElsesForks) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job = DaemonCluster::Up(1);
  ASSERT_TRUE(job.ok()) << job.status();
  absl::StatusOr<std::unique_ptr<Client>> honest =
      Client::Connect({.master = (*job)->master(),
                       .security = {.token_file = (*job)->token_file()}});
  ASSERT_TRUE(honest.ok()) << honest.status();
  constexpr int kRRefs = 2000;
  std::vector<RRef> held;
  for (int i = 0; i < kRRefs; ++i) {
    absl::StatusOr<RRef> r =
        (*honest)->Remote("worker0", "echo", {Value(int64_t{i})});
    ASSERT_TRUE(r.ok()) << r.status();
    held.push_back(*std::move(r));
  }
  std::unique_ptr<RawClient> attacker = Registered(**job);
  // The honest client's own rounds walk its forks: the count works.
  proto::WorkerStatus s =
      AwaitStatus(*attacker, [](const proto::WorkerStatus& s) {
        return s.owned_rrefs() >= kRRefs && s.rref_forks_walked() >= kRRefs;
      });
  ASSERT_GE(s.rref_forks_walked(), kRRefs);
  const int64_t before = s.rref_forks_walked();
  constexpr int kRounds = 3000;
  const absl::Time start = absl::Now();
  for (int n = 1; n <= kRounds; ++n) {
    proto::LeaseRequest round;  // Each completes a round of its own.
    round.set_holder(attacker->node());
    round.set_round(n);
    round.set_chunks(1);
    RawReply r = attacker->Unary(kRenewLeaseMethod, round.SerializeAsString());
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
  const absl::Duration flood = absl::Now() - start;
  absl::StatusOr<proto::WorkerStatus> after = attacker->Status();
  ASSERT_TRUE(after.ok()) << after.status();
  const int64_t walked = after->rref_forks_walked() - before;
  std::cout << "flood of " << kRounds << " rounds in "
            << absl::ToInt64Milliseconds(flood) << " ms walked " << walked
            << " forks (" << kRRefs << " held by the honest client)\n";
  // The honest client's own periodic rounds (one per quarter lease) may
  // fall inside the flood; the attacker's rounds walk nothing.
  const int64_t own_rounds = 1 + absl::ToInt64Seconds(flood) / 2 + 1;
  EXPECT_LE(walked, own_rounds * kRRefs);
  // And the honest client's RRefs are intact and usable.
  absl::StatusOr<Value> v = held[7].ToHere();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->as_int(), 7);
}

// ---- Values kept as RRefs (issue 49) ----

// A client's remote() calls made a worker keep their values without a
// bound on their bytes (12 `ones` of 256 MiB: 31 MB -> 3.18 GB RSS); only
// their number was bounded (--max_rrefs). Now each creator's values are
// charged to it until freed: past --max_rref_mb_per_peer the value is
// dropped and its remote() fails, naming the worker, the caller and the
// flag; another client keeps its own share, and a release gives the
// bytes back.
TEST(HostileBudgetTest, ValuesKeptAsRRefsAreBoundedPerCreator) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(1, {"--max_rref_mb_per_peer=64"});
  ASSERT_TRUE(job.ok()) << job.status();
  auto connect = [&] {
    return Client::Connect({.master = (*job)->master(),
                            .security = {.token_file = (*job)->token_file()}});
  };
  absl::StatusOr<std::unique_ptr<Client>> attacker = connect();
  ASSERT_TRUE(attacker.ok()) << attacker.status();
  std::unique_ptr<RawClient> observer = Registered(**job);
  // Just under 32 MiB each (a value also costs a few bytes of framing):
  // two fit the attacker's share, the third does not.
  constexpr int64_t kFloats = 8 * kMiB - 1024;
  auto keep = [](Client& c) {
    return c.Remote("worker0", "zeros", {Value(Value::List{Value(kFloats)})});
  };
  const int64_t heap_before = observer->Status()->heap_bytes();
  std::vector<RRef> kept;
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<RRef> r = keep(**attacker);
    ASSERT_TRUE(r.ok()) << r.status();
    kept.push_back(*std::move(r));
    // One at a time: which of them is refused is then known.
    absl::Status created = kept.back().ToHere().status();
    if (i < 2) {
      ASSERT_TRUE(created.ok()) << created;
      continue;
    }
    EXPECT_EQ(created.code(), absl::StatusCode::kResourceExhausted) << created;
    EXPECT_THAT(created.message(),
                AllOf(HasSubstr("worker0"), HasSubstr((*attacker)->name()),
                      HasSubstr("(--max_rref_mb_per_peer=64)")));
  }
  proto::WorkerStatus s = AwaitStatus(
      *observer, [](const auto& s) { return s.rref_value_bytes() > 0; });
  const int64_t heap_after = s.heap_bytes();
  std::cout << "6 remote() of 32 MiB: worker keeps "
            << s.rref_value_bytes() / kMiB << " MiB of values, heap "
            << heap_before / kMiB << " -> " << heap_after / kMiB << " MiB\n";
  EXPECT_LE(s.rref_value_bytes(), 64 * kMiB);
  EXPECT_GT(s.rref_value_bytes(), 60 * kMiB);
  EXPECT_LT(heap_after - heap_before, 100 * kMiB);
  EXPECT_EQ(s.limits().at("max_rref_mb_per_peer"), 64);
  // Another client keeps its own share.
  absl::StatusOr<std::unique_ptr<Client>> honest = connect();
  ASSERT_TRUE(honest.ok()) << honest.status();
  absl::StatusOr<RRef> theirs = keep(**honest);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  ASSERT_TRUE(theirs->ToHere().ok());
  // Released, the attacker's bytes come back, and it may keep values again.
  kept.clear();
  s = AwaitStatus(*observer, [](const auto& s) {
    return s.rref_value_bytes() < 33 * kMiB;
  });
  EXPECT_LT(s.rref_value_bytes(), 33 * kMiB);
  absl::StatusOr<RRef> again = keep(**attacker);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->ToHere().ok());
}

// ---- F11: file writes on a full disk ----

// ferryd on a full disk renamed an empty address file into place and ran
// on; now it exits 1 naming the flag, the file and the OS's reason.
TEST(FullDiskTest, FerrydExitsNamingTheReason) {
  if (absl::Status s = testing::FullDiskAvailable(); !s.ok()) {
    GTEST_SKIP() << s;
  }
  std::string pattern =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/full-XXXXXX");
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::string dir = pattern;
  absl::StatusOr<ProcessResult> r = testing::RunProcess(
      testing::OnFullDisk(
          dir, {Runfile("tools/ferryd"), "--rank=0", "--world_size=1",
                "--master=127.0.0.1:0", "--insecure",
                "--address_file=" + dir + "/worker0.addr",
                "--startup_timeout_ms=10000"}),
      {}, absl::Seconds(20));
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << "ferryd on a full disk: " << r->err;
  EXPECT_FALSE(r->timed_out) << r->Describe();
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_THAT(r->err, AllOf(HasSubstr("ferryd: RESOURCE_EXHAUSTED: "
                                      "--address_file: cannot write '" +
                                      dir + "/worker0.addr.tmp."),
                            HasSubstr("No space left on device")))
      << r->Describe();
}

// ferryctl up on a disk with room for the token, the pid record and the
// log but not the address: the failure says why, whoever hit it.
TEST(FullDiskTest, FerryctlUpSaysWhy) {
  if (absl::Status s = testing::FullDiskAvailable(); !s.ok()) {
    GTEST_SKIP() << s;
  }
  for (int free_pages : {0, 3}) {
    std::string pattern =
        absl::StrCat(std::getenv("TEST_TMPDIR"), "/full-XXXXXX");
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    const std::string dir = pattern;
    testing::ProcessOptions options;
    options.env = {{"FERRYD", Runfile("tools/ferryd")},
                   {"XDG_STATE_HOME", dir + "/state"}};
    absl::StatusOr<ProcessResult> r = testing::RunProcess(
        testing::OnFullDisk(
            dir,
            {Runfile("tools/ferryctl"), "--timeout_ms=10000", "up",
             "--world_size=1", "--port=0", "--dir=" + dir},
            free_pages),
        options, absl::Seconds(30));
    ASSERT_TRUE(r.ok()) << r.status();
    std::cout << "ferryctl up, " << free_pages << " pages free: " << r->err;
    EXPECT_FALSE(r->timed_out) << r->Describe();
    EXPECT_EQ(r->exit_code, 1) << r->Describe();
    EXPECT_THAT(r->err, AllOf(HasSubstr("ferryctl: RESOURCE_EXHAUSTED: "),
                              HasSubstr("No space left on device")))
        << "free pages " << free_pages << ": " << r->Describe();
    if (free_pages == 3) {
      EXPECT_THAT(r->err, HasSubstr("worker0.addr")) << r->Describe();
    }
  }
}

// A daemon that leaves an empty (or garbled) address file is not taken
// for the master: ferryctl up fails naming the file.
TEST(FullDiskTest, FerryctlUpRefusesAnEmptyAddressFile) {
  std::string pattern =
      absl::StrCat(std::getenv("TEST_TMPDIR"), "/fake-XXXXXX");
  ASSERT_NE(mkdtemp(pattern.data()), nullptr);
  const std::string dir = pattern;
  const std::string fake = dir + "/ferryd";
  std::ofstream(fake) << "#!/bin/sh\n"
                         "for a; do case \"$a\" in --address_file=*) "
                         "f=\"${a#--address_file=}\";; esac; done\n"
                         ": > \"$f\"\n"
                         "exec sleep 60\n";
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  testing::ProcessOptions options;
  options.env = {{"FERRYD", fake}, {"XDG_STATE_HOME", dir + "/state"}};
  absl::StatusOr<ProcessResult> r = testing::RunProcess(
      {Runfile("tools/ferryctl"), "--timeout_ms=5000", "up", "--world_size=1",
       "--port=0", "--dir=" + dir + "/job"},
      options, absl::Seconds(30));
  ASSERT_TRUE(r.ok()) << r.status();
  std::cout << "ferryctl up, empty address file: " << r->err;
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_THAT(r->err,
              AllOf(HasSubstr("ferryctl: FAILED_PRECONDITION: worker0 wrote "
                              "'' to " +
                              dir + "/job/worker0.addr, not HOST:PORT")))
      << r->Describe();
}

}  // namespace
}  // namespace ferry
