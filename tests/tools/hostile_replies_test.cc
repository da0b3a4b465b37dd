// What a caller can make a worker keep after its calls were answered,
// against real ferryd daemons (issue 49, R1 and R8). Each case is what an
// attacker did on 1dde932:
//
//   R1: a caller that grants no HTTP/2 window never receives a reply, and
//       the worker kept every one (48 `zeros` of 32 MiB: +897 MiB), since
//       a call left its caller's count when answered, before its reply
//       was sent. Now a call counts against its caller until its reply
//       was written, replies not sent are bounded in bytes per caller,
//       and a reply that does not leave within --reply_ttl_ms has its call
//       cancelled.
//   R8: 600 `add` calls with a sampled trace and a 512 KiB caller_name
//       kept +305 MiB after they returned; ferry.trace handed the name
//       back, and an unknown 256 KiB function name was kept as a span's.
//
// The first case of each is sized by flags that exist on 1dde932, so that
// run against it the test shows the old behaviour, not an unknown flag.
#include <signal.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/stalled_http2.h"

namespace ferry {
namespace {

using ::ferry::testing::DaemonCluster;
using ::ferry::testing::kCallMethod;
using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::ferry::testing::StalledHttp2Client;
using ::testing::AllOf;
using ::testing::HasSubstr;
namespace wire = ::ferry::testing::wire;

constexpr int64_t kMiB = int64_t{1} << 20;
// Bounds only a hang: every case is answered long before.
constexpr absl::Duration kBound = absl::Seconds(60);

std::unique_ptr<RawClient> Registered(const DaemonCluster& job) {
  absl::StatusOr<std::unique_ptr<RawClient>> raw =
      RawClient::Registered(job.address(0), job.token());
  EXPECT_TRUE(raw.ok()) << raw.status();
  return raw.ok() ? *std::move(raw) : std::make_unique<RawClient>("");
}

// A stalled connection speaking as `as` (its token and credential).
std::unique_ptr<StalledHttp2Client> StalledAs(const DaemonCluster& job,
                                              const RawClient& as) {
  absl::StatusOr<std::unique_ptr<StalledHttp2Client>> c =
      StalledHttp2Client::Connect(job.address(0),
                                  {{"authorization", "Bearer " + job.token()},
                                   {"ferry-credential", as.credential()}});
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

// Whether worker0 still runs, and the end of its log: why a connection
// closed under a stalled caller (once in a loaded fresh-clone CI run, the
// worker's side unseen).
std::string Worker0State(const DaemonCluster& job) {
  const bool runs = ::kill(job.pid(0), 0) == 0;
  std::ifstream file(absl::StrCat(job.dir(), "/worker0.log"));
  std::stringstream text;
  text << file.rdbuf();
  std::string log = text.str();
  if (log.size() > 4000) log = log.substr(log.size() - 4000);
  return absl::StrCat("worker0 ", runs ? "runs" : "is gone",
                      "; its log ends:\n", log);
}

// `zeros([n])`: n float32 zeros, 4n bytes of reply.
std::string Zeros(uint64_t caller, int64_t n) {
  return wire::CallRequest("zeros", {wire::List({wire::Int(n)})}, caller);
}

int64_t Heap(RawClient& raw) {
  absl::StatusOr<proto::WorkerStatus> s = raw.Status();
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? s->heap_bytes() : 0;
}

void ExpectServed(RawClient& raw) {
  RawReply r = raw.Unary(
      kCallMethod,
      wire::CallRequest("add", {wire::Int(1), wire::Int(2)}, raw.node()),
      kBound);
  EXPECT_TRUE(r.status.ok())
      << r.status.error_code() << ": " << r.status.error_message();
}

std::string TestName() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// ---- R1: replies a caller never reads ----

// The attack, at a quarter of its size: 48 calls of 8 MiB replies
// from a caller allowed 4 in flight that never reads. The first 4 are
// answered and held (their replies cannot leave); the rest are refused,
// since those 4 still count against their caller. On 1dde932 all 48 ran
// and the worker held 384 MiB.
TEST(HostileRepliesTest, RepliesACallerNeverReadsHoldOnlyItsSlots) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(1, {"--max_alloc_mb=8", "--max_inflight_per_peer=4"});
  ASSERT_TRUE(job.ok()) << job.status();
  std::unique_ptr<RawClient> attacker = Registered(**job);
  std::unique_ptr<RawClient> honest = Registered(**job);
  constexpr int64_t kFloats = 2 * kMiB;  // 8 MiB.
  // Warm: the worker's first large reply sizes its allocator.
  ASSERT_TRUE(honest->Unary(kCallMethod, Zeros(honest->node(), kFloats), kBound)
                  .status.ok());
  const int64_t before = Heap(*honest);
  std::unique_ptr<StalledHttp2Client> stalled = StalledAs(**job, *attacker);
  ASSERT_NE(stalled, nullptr);
  // Four at a time, each four once answered (their headers came; their
  // messages cannot).
  for (int i = 0; i < 48; ++i) {
    ASSERT_TRUE(
        stalled->Call(kCallMethod, Zeros(attacker->node(), kFloats)).ok())
        << Worker0State(**job);
    if (i % 4 == 3) {
      ASSERT_TRUE(stalled->AwaitAnswered(i + 1, kBound)) << stalled->answered();
    }
  }
  // Every call answered: 44 refused whole (their trailers need no
  // window), 4 waiting for a window that never comes.
  EXPECT_TRUE(stalled->AwaitEnded(44, kBound)) << stalled->ended();
  EXPECT_EQ(stalled->data_bytes(), 0);
  const int64_t after = Heap(*honest);
  std::cout << TestName() << ": worker heap " << before / kMiB << " MiB -> "
            << after / kMiB << " MiB with 48 unread 8 MiB replies asked\n";
  EXPECT_LT(after - before, 64 * kMiB);
  // The attacker's own calls wait for its slots; everyone else is served.
  RawReply refused = attacker->Unary(
      kCallMethod,
      wire::CallRequest("add", {wire::Int(1), wire::Int(2)}, attacker->node()),
      kBound);
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.status.error_message(),
              HasSubstr("(--max_inflight_per_peer=4)"));
  ExpectServed(*honest);
}

// A reply that has not left --reply_ttl_ms after its answer has its call
// cancelled: what it held goes back, and its caller's slots with it.
TEST(HostileRepliesTest, RepliesThatDoNotLeaveAreCancelledAtTheirTtl) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job = DaemonCluster::Up(
      1,
      {"--max_alloc_mb=8", "--max_inflight_per_peer=2", "--reply_ttl_ms=1500"});
  ASSERT_TRUE(job.ok()) << job.status();
  std::unique_ptr<RawClient> attacker = Registered(**job);
  std::unique_ptr<StalledHttp2Client> stalled = StalledAs(**job, *attacker);
  ASSERT_NE(stalled, nullptr);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(
        stalled->Call(kCallMethod, Zeros(attacker->node(), 2 * kMiB)).ok())
        << Worker0State(**job);
  }
  ASSERT_TRUE(stalled->AwaitResets(2, kBound)) << stalled->resets();
  EXPECT_EQ(stalled->data_bytes(), 0);
  EXPECT_FALSE(stalled->closed());  // The calls end, not the connection.
  proto::WorkerStatus s = attacker->AwaitStatus(
      [](const proto::WorkerStatus& s) { return s.reply_bytes() == 0; },
      kBound);
  EXPECT_EQ(s.reply_bytes(), 0);
  ExpectServed(*attacker);  // Its slots are back.
}

// Replies not sent are bounded per caller in bytes: past
// --max_reply_mb_per_peer the call is answered RESOURCE_EXHAUSTED instead.
TEST(HostileRepliesTest, RepliesNotSentAreBoundedInBytesPerCaller) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
      DaemonCluster::Up(1, {"--max_alloc_mb=8", "--max_inflight_per_peer=4",
                            "--max_reply_mb_per_peer=16"});
  ASSERT_TRUE(job.ok()) << job.status();
  std::unique_ptr<RawClient> attacker = Registered(**job);
  std::unique_ptr<StalledHttp2Client> stalled = StalledAs(**job, *attacker);
  ASSERT_NE(stalled, nullptr);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(
        stalled->Call(kCallMethod, Zeros(attacker->node(), 2 * kMiB - 1024))
            .ok())
        << Worker0State(**job);
  }
  // (Failed once in a fresh-clone CI beside a CPU hog, 2026-12-06: fewer
  // than 4 answered in 60 s. What the client saw, and the worker's state,
  // say more next time.)
  ASSERT_TRUE(stalled->AwaitAnswered(4, kBound))
      << "answered " << stalled->answered() << ", ended " << stalled->ended()
      << ", resets " << stalled->resets() << ", connection "
      << (stalled->closed() ? "closed" : "open") << "\n"
      << Worker0State(**job);
  EXPECT_TRUE(stalled->AwaitEnded(2, kBound)) << stalled->ended();
  proto::WorkerStatus s = attacker->AwaitStatus(
      [](const proto::WorkerStatus& s) { return s.reply_bytes() > 8 * kMiB; },
      kBound);
  EXPECT_GT(s.reply_bytes(), 8 * kMiB);
  EXPECT_LE(s.reply_bytes(), 16 * kMiB);
  EXPECT_EQ(s.limits().at("max_reply_mb_per_peer"), 16);
  // Another caller has a share of its own.
  std::unique_ptr<RawClient> honest = Registered(**job);
  RawReply r =
      honest->Unary(kCallMethod, Zeros(honest->node(), 2 * kMiB), kBound);
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
}

// ---- R8: what a finished call leaves behind ----

constexpr char kTraceId[] = "4bf92f3577b34da6a3ce929d0e0e4736";

// The spans of trace kTraceId the worker kept (ferry.trace), as `raw`.
std::vector<proto::Value> SpansOfTrace(RawClient& raw) {
  RawReply r = raw.Unary(
      kCallMethod,
      wire::CallRequest("ferry.trace", {wire::Str(kTraceId)}, raw.node()),
      kBound);
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  absl::StatusOr<proto::Value> v = ::ferry::testing::ParseResult(r.bytes);
  if (!v.ok()) return {};
  return {v->list().items().begin(), v->list().items().end()};
}

std::string Field(const proto::Value& span, const std::string& key) {
  auto it = span.map().entries().find(key);
  return it == span.map().entries().end() ? "" : it->second.string_value();
}

TEST(HostileRepliesTest, WhatACallerSizedIsNotKept) {
  absl::StatusOr<std::unique_ptr<DaemonCluster>> job = DaemonCluster::Up(1);
  ASSERT_TRUE(job.ok()) << job.status();
  std::unique_ptr<RawClient> raw = Registered(**job);
  raw->add_metadata("traceparent",
                    absl::StrCat("00-", kTraceId, "-00f067aa0ba902b7-01"));
  ExpectServed(*raw);  // Warm.
  const int64_t before = Heap(*raw);
  const std::string name(512 << 10, 'w');
  for (int i = 0; i < 200; ++i) {
    RawReply r =
        raw->Unary(kCallMethod,
                   wire::CallRequest("add", {wire::Int(1), wire::Int(2)},
                                     raw->node(), name),
                   kBound);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
  const int64_t after = Heap(*raw);
  std::cout << TestName() << ": worker heap " << before / kMiB << " MiB -> "
            << after / kMiB << " MiB after 200 calls named by 512 KiB\n";
  EXPECT_LT(after - before, 32 * kMiB);  // 100 MiB kept on 1dde932.
  // On 1dde932 the whole name came back in the status, past what a gRPC
  // client takes (RESOURCE_EXHAUSTED "received initial metadata size
  // exceeds limit").
  RawReply unknown = raw->Unary(
      kCallMethod,
      wire::CallRequest(std::string(256 << 10, 'f'), {}, raw->node()), kBound);
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(
      unknown.status.error_message(),
      AllOf(HasSubstr("(262144 bytes)"), HasSubstr("no such function")));
  EXPECT_LT(unknown.status.error_message().size(), 512u);
  std::vector<proto::Value> spans = SpansOfTrace(*raw);
  ASSERT_GE(spans.size(), 200u);
  const std::string self =
      absl::StrCat("client", raw->node() - (uint64_t{1} << 32));
  for (const proto::Value& span : spans) {
    // Compared, never printed whole: on 1dde932 each was 512 KiB.
    const std::string name = Field(span, "name"), peer = Field(span, "peer");
    EXPECT_LE(name.size(), 300u) << name.substr(0, 64);
    if (name == "add") {
      EXPECT_TRUE(peer == self)
          << "peer of " << peer.size() << " bytes: " << peer.substr(0, 64);
    }
  }
}

}  // namespace
}  // namespace ferry
