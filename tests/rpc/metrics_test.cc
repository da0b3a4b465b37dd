// rpc/metrics.h alone: histogram buckets (gRFC A66), counts by function
// and code, the bound on labels, bytes by peer, collectives, the text
// format and merging several workers' texts.
#include "rpc/metrics.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/value.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(HistogramTest, BucketsAreA66sAndInclusive) {
  const std::vector<double>& b = LatencyBounds();
  ASSERT_EQ(b.size(), 41u);
  EXPECT_EQ(b.front(), 0);
  EXPECT_EQ(b[1], 0.00001);
  EXPECT_EQ(b.back(), 100);
  Histogram h;
  h.Observe(absl::ZeroDuration());                          // le 0
  h.Observe(absl::Microseconds(5));                         // le 1e-05
  h.Observe(absl::Milliseconds(1) + absl::Nanoseconds(1));  // le 0.002
  h.Observe(absl::Seconds(1000));                           // +Inf only
  Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.cumulative[0], 1u);   // le 0
  EXPECT_EQ(s.cumulative[1], 2u);   // le 1e-05
  EXPECT_EQ(s.cumulative[7], 2u);   // le 0.001
  EXPECT_EQ(s.cumulative[8], 3u);   // le 0.002
  EXPECT_EQ(s.cumulative[40], 3u);  // le 100
  EXPECT_EQ(s.cumulative[41], 4u);  // +Inf
  EXPECT_NEAR(s.sum_seconds, 1000.001005001, 1e-9);
}

TEST(MetricsTest, CallsByFunctionAndCode) {
  Metrics m({.worker = "worker1", .world_size = 2});
  CallMetrics* add = m.ServerStarted("add");
  EXPECT_EQ(m.ServerStarted("add"), add);  // One slot per function.
  Metrics::Finished(add, absl::StatusCode::kOk, absl::Microseconds(50));
  Metrics::Finished(add, absl::StatusCode::kInvalidArgument,
                    absl::Microseconds(70));
  Metrics::Finished(m.ClientStarted("echo"), absl::StatusCode::kOk,
                    absl::Milliseconds(2));
  const std::string text = m.Text();
  EXPECT_THAT(text, HasSubstr("ferry_rpc_server_calls_started_total{"
                              "function=\"add\",worker=\"worker1\"} 2"));
  EXPECT_THAT(text, HasSubstr("ferry_rpc_server_calls_finished_total{"
                              "code=\"OK\",function=\"add\",worker="
                              "\"worker1\"} 1"));
  EXPECT_THAT(text, HasSubstr("ferry_rpc_server_calls_finished_total{"
                              "code=\"INVALID_ARGUMENT\",function=\"add\","
                              "worker=\"worker1\"} 1"));
  EXPECT_THAT(text, HasSubstr("ferry_rpc_client_call_duration_seconds_count{"
                              "code=\"OK\",function=\"echo\",worker="
                              "\"worker1\"} 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE ferry_rpc_server_call_duration_seconds "
                              "histogram"));
  EXPECT_THAT(text, HasSubstr("le=\"+Inf\""));
}

TEST(MetricsTest, LabelsAreBounded) {
  Metrics m({.worker = "w", .world_size = 1});
  for (size_t i = 0; i < Metrics::kMaxLabels + 10; ++i) {
    m.ClientStarted(absl::StrCat("f", i));
  }
  const std::string text = m.Text();
  EXPECT_THAT(text, HasSubstr("function=\"(other)\",worker=\"w\"} 10"));
  EXPECT_THAT(text, Not(HasSubstr(absl::StrCat(
                        "function=\"f", Metrics::kMaxLabels + 1, "\""))));
}

// Slots are cached per thread by the Metrics they belong to: another
// Metrics (here made where a destroyed one stood) counts its own calls.
TEST(MetricsTest, EachMetricsCountsItsOwnCalls) {
  for (int round = 0; round < 3; ++round) {
    auto m = std::make_unique<Metrics>(
        Metrics::Options{.worker = "w", .world_size = 1});
    for (int i = 0; i <= round; ++i) m->ClientStarted("f");
    auto other = std::make_unique<Metrics>(
        Metrics::Options{.worker = "v", .world_size = 1});
    other->ClientStarted("f");
    EXPECT_THAT(m->Text(),
                HasSubstr(absl::StrCat("ferry_rpc_client_calls_started_total{"
                                       "function=\"f\",worker=\"w\"} ",
                                       round + 1)));
    EXPECT_THAT(other->Text(), HasSubstr("ferry_rpc_client_calls_started_total{"
                                         "function=\"f\",worker=\"v\"} 1"));
    EXPECT_NE(m->ClientStarted("f"), other->ClientStarted("f"));
    EXPECT_NE(m->ClientStarted("f"), m->ServerStarted("f"));
  }
}

TEST(MetricsTest, BytesByPeerAndClients) {
  Metrics m({.worker = "worker0", .world_size = 2});
  m.SetSources(nullptr, [](int rank) { return absl::StrCat("w", rank); });
  m.Sent(1, Metrics::Traffic::kCall, 100);
  m.Received(1, Metrics::Traffic::kCall, 7);
  m.Sent(1, Metrics::Traffic::kCollective, 64);
  m.Received(1, Metrics::Traffic::kCallShm, 1 << 20);
  m.Received(kFirstClientNode + 5, Metrics::Traffic::kCall, 3);
  m.Received(kFirstClientNode + 6, Metrics::Traffic::kCall, 4);
  const std::string text = m.Text();
  EXPECT_THAT(text, HasSubstr("ferry_peer_sent_bytes_total{kind=\"call\","
                              "peer=\"w1\",worker=\"worker0\"} 100"));
  EXPECT_THAT(text, HasSubstr("ferry_peer_received_bytes_total{kind=\"call\","
                              "peer=\"w1\",worker=\"worker0\"} 7"));
  EXPECT_THAT(text, HasSubstr("ferry_peer_sent_bytes_total{kind="
                              "\"collective\",peer=\"w1\",worker=\"worker0\"} "
                              "64"));
  EXPECT_THAT(text, HasSubstr("ferry_peer_received_bytes_total{kind="
                              "\"call_shm\",peer=\"w1\",worker=\"worker0\"} "
                              "1048576"));
  // Every client is one peer label.
  EXPECT_THAT(text, HasSubstr("ferry_peer_received_bytes_total{kind=\"call\","
                              "peer=\"client\",worker=\"worker0\"} 7"));
}

TEST(MetricsTest, CollectivesAndStatusGauges) {
  Metrics m({.worker = "worker0", .world_size = 3});
  m.CollectiveEnded("all_reduce", "world", absl::StatusCode::kOk,
                    absl::Milliseconds(3));
  m.CollectiveEnded("all_reduce", "world", absl::StatusCode::kDeadlineExceeded,
                    absl::Seconds(1));
  m.SetSources(
      [] {
        proto::WorkerStatus s;
        s.set_owned_rrefs(4);
        s.set_user_rrefs(2);
        s.set_mailbox_bytes(1024);
        s.add_dead_peers("worker2");
        return s;
      },
      nullptr);
  const std::string text = m.Text();
  EXPECT_THAT(text, HasSubstr("ferry_collectives_total{code="
                              "\"DEADLINE_EXCEEDED\",group=\"world\",op="
                              "\"all_reduce\",worker=\"worker0\"} 1"));
  EXPECT_THAT(text, HasSubstr("ferry_collective_duration_seconds_count{group="
                              "\"world\",op=\"all_reduce\",worker="
                              "\"worker0\"} 2"));
  EXPECT_THAT(text, HasSubstr("ferry_rrefs_owned{worker=\"worker0\"} 4"));
  EXPECT_THAT(text, HasSubstr("ferry_rref_forks_held{worker=\"worker0\"} 2"));
  EXPECT_THAT(text, HasSubstr("ferry_mailbox_bytes{worker=\"worker0\"} 1024"));
  EXPECT_THAT(text,
              HasSubstr("ferry_peers{state=\"alive\",worker=\"worker0\"} 1"));
  EXPECT_THAT(text,
              HasSubstr("ferry_peers{state=\"dead\",worker=\"worker0\"} 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE ferry_heartbeat_rtt_seconds histogram"));
}

TEST(MergeExpositionsTest, OneHeaderPerFamilyThenEveryWorkersSamples) {
  Metrics a({.worker = "worker0", .world_size = 2});
  Metrics b({.worker = "worker1", .world_size = 2});
  a.ServerStarted("add");
  b.ServerStarted("add");
  const std::string merged = MergeExpositions({a.Text(), b.Text()});
  const std::string help =
      "# HELP ferry_rpc_server_calls_started_total Calls started as the "
      "server, by function\n";
  const size_t first = merged.find(help);
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(merged.find(help, first + 1), std::string::npos);
  const std::string w0 =
      "ferry_rpc_server_calls_started_total{function=\"add\",worker="
      "\"worker0\"} 1\n";
  const std::string w1 =
      "ferry_rpc_server_calls_started_total{function=\"add\",worker="
      "\"worker1\"} 1\n";
  EXPECT_THAT(merged, HasSubstr(help +
                                "# TYPE ferry_rpc_server_calls_started"
                                "_total counter\n" +
                                w0 + w1));
}

}  // namespace
}  // namespace ferry
