// Ray's peer program for ferry_bench --peers (tools/bench/peers/ray_bench.py)
// under the peers environment's Python, which has Ray: an actor call as the
// RPC suite's echo, ray.util.collective's ops as the collectives suite's,
// answered as rows (or "unsupported", naming why). Skipped where the peers
// environment is not installed (tools/dev test installs it first).
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tools/bench/peer_process.h"
#include "tools/bench/peer_setup.h"
#include "tools/bench/row.h"

namespace ferry {
namespace bench {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

// Ray's start (its GCS, raylet and workers) on a loaded 2-core host.
constexpr absl::Duration kStart = absl::Minutes(3);
constexpr absl::Duration kBound = absl::Minutes(1);

// Ray (ray_bench.py) under the peers environment's Python, which has it
// (FERRY_PEERS_PYTHON: tools/dev passes it to the tests).
class RayPeersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* python = std::getenv("FERRY_PEERS_PYTHON");
    if (python == nullptr || *python == '\0') {
      GTEST_SKIP() << "the peers environment is not installed (tools/dev "
                      "peers; tools/dev test sets FERRY_PEERS_PYTHON)";
    }
    setup_ = {.python = python,
              .dir = absl::StrCat(std::getenv("TEST_SRCDIR"),
                                  "/ferry/tools/bench/peers")};
  }

  PeerSetup setup_;
};

TEST_F(RayPeersTest, ActorPeerMeasuresEchoesAsRows) {
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<PeerProcess> peer,
      PeerProcess::Start(
          setup_.Command("ray_bench.py", {"--serve", "--system=ray_actor"}),
          kStart));
  ASSERT_OK_AND_ASSIGN(std::vector<Row> latency,
                       peer->Request("latency 20", kBound));
  ASSERT_EQ(latency.size(), 2u);
  EXPECT_EQ(latency[0].metric, "latency_p50_us");
  EXPECT_EQ(latency[0].system, "ray_actor");
  EXPECT_EQ(latency[0].op, "echo");
  EXPECT_GT(latency[0].value, 0);
  EXPECT_LE(latency[0].value, latency[1].value);
  ASSERT_OK_AND_ASSIGN(std::vector<Row> rate,
                       peer->Request("throughput 4 0.05", kBound));
  ASSERT_EQ(rate.size(), 1u);
  EXPECT_EQ(rate[0].metric, "calls_per_s");
  EXPECT_EQ(rate[0].inflight, 4);
  EXPECT_GT(rate[0].value, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<Row> bandwidth,
                       peer->Request("bandwidth 262144 2", kBound));
  ASSERT_EQ(bandwidth.size(), 1u);
  EXPECT_EQ(bandwidth[0].metric, "bandwidth_MBps");
  EXPECT_GT(bandwidth[0].value, 0);
}

TEST_F(RayPeersTest, CollectivePeerTimesOpsOrSaysWhyNot) {
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<PeerProcess> peer,
      PeerProcess::Start(
          setup_.Command("ray_bench.py",
                         {"--serve", "--system=ray_collective", "--world=2"}),
          kStart));
  for (const char* op :
       {"all_gather", "all_reduce", "reduce_scatter", "broadcast"}) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<Row> rows,
        peer->Request(absl::StrCat("time ", op, " 64 3"), kBound));
    ASSERT_EQ(rows.size(), 1u) << op;
    EXPECT_EQ(rows[0].suite, "collectives");
    EXPECT_EQ(rows[0].metric, "op_time_us");
    EXPECT_EQ(rows[0].system, "ray_collective");
    EXPECT_EQ(rows[0].op, op);
    EXPECT_EQ(rows[0].world, 2);
    EXPECT_GT(rows[0].value, 0) << op;
  }
  EXPECT_THAT(
      peer->Request("time all_to_all_single 64 1", kBound),
      StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("no all_to_all")));
  EXPECT_THAT(peer->Request("time all_reduce 0 3", kBound),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("bad request")));
  // Every member is still in step after a refused request.
  ASSERT_OK_AND_ASSIGN(std::vector<Row> rows,
                       peer->Request("time all_reduce 8 1", kBound));
  EXPECT_EQ(rows.size(), 1u);
}

}  // namespace
}  // namespace bench
}  // namespace ferry
