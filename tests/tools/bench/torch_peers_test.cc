// ferry_bench's peer programs (tools/bench/peers/) against the real torch:
// they answer the requests ferry_bench sends with rows it can merge.
// torch is optional (Debian's python3-torch): without it these tests skip.
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

constexpr absl::Duration kStart = absl::Minutes(2);
constexpr absl::Duration kBound = absl::Minutes(1);

class TorchPeersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<PeerSetup> found =
        FindPeers({.dir = absl::StrCat(std::getenv("TEST_SRCDIR"),
                                       "/ferry/tools/bench/peers")});
    if (found.status().code() == absl::StatusCode::kFailedPrecondition) {
      GTEST_SKIP() << "torch is optional and not installed here: "
                   << found.status().message();
    }
    ASSERT_OK_AND_ASSIGN(setup_, std::move(found));
  }

  PeerSetup setup_;
};

TEST_F(TorchPeersTest, GlooPeerTimesCollectivesAsRowsOrSaysWhyNot) {
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<PeerProcess> peer,
      PeerProcess::Start(
          setup_.Command("torch_gloo_bench.py", {"--serve", "--world=2"}),
          kStart));
  for (const char* op :
       {"all_to_all_single", "all_gather", "all_reduce", "broadcast"}) {
    ASSERT_OK_AND_ASSIGN(
        std::vector<Row> rows,
        peer->Request(absl::StrCat("time ", op, " 64 3"), kBound));
    // The time per op, then the CPU time per op of all ranks together.
    ASSERT_EQ(rows.size(), 2u) << op;
    EXPECT_EQ(rows[1].metric, "cpu_us_per_op");
    EXPECT_EQ(rows[1].op, op);
    EXPECT_GT(rows[1].value, 0) << op;
    EXPECT_EQ(rows[0].suite, "collectives");
    EXPECT_EQ(rows[0].metric, "op_time_us");
    EXPECT_EQ(rows[0].system, "torch_gloo");
    EXPECT_EQ(rows[0].op, op);
    EXPECT_EQ(rows[0].size_bytes, 64);
    EXPECT_EQ(rows[0].world, 2);
    EXPECT_GT(rows[0].value, 0) << op;
  }
  EXPECT_THAT(peer->Request("time all_reduce 0 3", kBound),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("bad request")));
  // torch 1.13's Gloo process group has no reduce_scatter; a later torch
  // may.
  absl::StatusOr<std::vector<Row>> scattered =
      peer->Request("time reduce_scatter 64 2", kBound);
  if (!scattered.ok()) {
    EXPECT_THAT(scattered, StatusIs(absl::StatusCode::kUnimplemented,
                                    HasSubstr("reduce_scatter")));
  } else {
    ASSERT_EQ(scattered->size(), 2u);
    EXPECT_EQ((*scattered)[0].op, "reduce_scatter");
  }
  // Every rank is still in step after a refused or unsupported request.
  ASSERT_OK_AND_ASSIGN(std::vector<Row> rows,
                       peer->Request("time all_reduce 8 1", kBound));
  EXPECT_EQ(rows.size(), 2u);
}

TEST_F(TorchPeersTest, RpcPeerMeasuresEchoesAsRows) {
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<PeerProcess> peer,
      PeerProcess::Start(setup_.Command("torch_rpc_bench.py",
                                        {"--serve", "--system=torch_rpc"}),
                         kStart));
  ASSERT_OK_AND_ASSIGN(std::vector<Row> latency,
                       peer->Request("latency 20", kBound));
  ASSERT_EQ(latency.size(), 2u);
  EXPECT_EQ(latency[0].metric, "latency_p50_us");
  EXPECT_EQ(latency[1].metric, "latency_p99_us");
  EXPECT_GT(latency[0].value, 0);
  EXPECT_LE(latency[0].value, latency[1].value);
  EXPECT_EQ(latency[0].system, "torch_rpc");
  EXPECT_EQ(latency[0].size_bytes, 8);
  ASSERT_OK_AND_ASSIGN(std::vector<Row> rate,
                       peer->Request("throughput 4 0.05", kBound));
  ASSERT_EQ(rate.size(), 1u);
  EXPECT_EQ(rate[0].metric, "calls_per_s");
  EXPECT_EQ(rate[0].inflight, 4);
  EXPECT_GT(rate[0].value, 0);
  ASSERT_OK_AND_ASSIGN(std::vector<Row> bandwidth,
                       peer->Request("bandwidth 65536 2", kBound));
  ASSERT_EQ(bandwidth.size(), 1u);
  EXPECT_EQ(bandwidth[0].metric, "bandwidth_MBps");
  EXPECT_EQ(bandwidth[0].size_bytes, 65536);
  EXPECT_GT(bandwidth[0].value, 0);
}

// Debian's Python has no Ray: its peer says so at once, and ferry_bench
// leaves Ray's rows out, saying why.
TEST_F(TorchPeersTest, RayPeerWithoutRaySaysWhyNot) {
  EXPECT_THAT(
      PeerProcess::Start(
          setup_.Command("ray_bench.py", {"--serve", "--system=ray_actor"}),
          kStart),
      StatusIs(absl::StatusCode::kUnimplemented,
               HasSubstr("Ray is not installed")));
}

}  // namespace
}  // namespace bench
}  // namespace ferry
