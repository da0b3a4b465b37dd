// Collectives after a replacement, on both membership backends (the
// embedded master, and a real etcd started by the test): worker2 dies, a
// new process takes its rank, and SPMD collectives on the world group and
// on a group holding rank 2 work again for the survivors and the newcomer —
// their sequences restart in the groups' new epoch
// (collectives/transport/op_key.h) — while a group without rank 2 goes on as
// before.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "collectives/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/await.h"
#include "tests/testing/etcd_cluster.h"
#include "tests/testing/etcd_local_job.h"
#include "tests/testing/membership_waits.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::EtcdCluster;
using ::ferry::testing::LocalJobOnEtcd;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(30);

Tensor F32(std::vector<float> v) { return Tensor::FromVector<float>(v); }

enum class Backend { kEmbedded, kEtcd };

class ReplacementTest : public ::testing::TestWithParam<Backend> {
 protected:
  static void TearDownTestSuite() { etcd_.reset(); }

  void SetUp() override {
    if (GetParam() != Backend::kEtcd) return;
    if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
    if (etcd_ == nullptr) {
      auto started = EtcdCluster::Start();
      ASSERT_TRUE(started.ok()) << started.status();
      etcd_ = *std::move(started);
    }
  }

  void Start() {
    LocalJob::Options options;
    if (GetParam() == Backend::kEtcd) {
      ASSERT_OK_AND_ASSIGN(options, LocalJobOnEtcd(*etcd_, absl::Seconds(2)));
    }
    ASSERT_OK_AND_ASSIGN(job_, LocalJob::Start(3, options));
    for (int r = 0; r < 3; ++r) MakeGroups(r);
  }

  // What rank `r`'s program does at its start, in the same order on every
  // rank (a replacement reruns it): the groups it is a member of.
  void MakeGroups(int r) {
    CollectiveContext& c = job_->worker(r).collectives();
    if (r == 1 || r == 2) {
      ASSERT_OK_AND_ASSIGN(pair12_[r], c.NewGroup({1, 2}));
    }
    if (r == 0 || r == 1) {
      ASSERT_OK_AND_ASSIGN(pair01_[r], c.NewGroup({0, 1}));
    }
  }

  // fn(rank) on each of `ranks` at once; the results by rank.
  std::vector<absl::Status> OnRanks(
      const std::vector<int>& ranks,
      const std::function<absl::Status(int)>& fn) {
    std::vector<absl::Status> out(3, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r : ranks) {
      threads.emplace_back([&, r] { out[r] = fn(r); });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  // An all_reduce of (rank + 1) over `group(rank)` on `ranks`: OK if each
  // got the sum.
  std::vector<absl::Status> SumOn(
      const std::vector<int>& ranks,
      const std::function<ProcessGroup&(int)>& group) {
    float want = 0;
    for (int r : ranks) want += static_cast<float>(r + 1);
    return OnRanks(ranks, [&](int r) -> absl::Status {
      absl::StatusOr<Tensor> sum =
          AllReduce(group(r), F32({static_cast<float>(r + 1)}));
      if (!sum.ok()) return sum.status();
      if (*sum != F32({want})) return absl::InternalError(sum->DebugString());
      return absl::OkStatus();
    });
  }

  std::vector<absl::Status> WorldSum() {
    return SumOn({0, 1, 2}, [&](int r) -> ProcessGroup& {
      return job_->worker(r).collectives().world();
    });
  }
  std::vector<absl::Status> Pair12Sum() {
    return SumOn({1, 2}, [&](int r) -> ProcessGroup& { return *pair12_[r]; });
  }
  std::vector<absl::Status> Pair01Sum() {
    return SumOn({0, 1}, [&](int r) -> ProcessGroup& { return *pair01_[r]; });
  }

  // Until every other worker heard that `rank` is gone (its membership's
  // events).
  void AwaitGone(int rank) {
    for (int r = 0; r < 3; ++r) {
      if (r == rank) continue;
      ASSERT_TRUE(::ferry::testing::AwaitGone(job_->worker(r).rpc().events(),
                                              rank, kWait))
          << "worker" << r;
    }
  }

  // Until `rank` is alive again with generation `generation`, as every
  // other worker sees it.
  void AwaitBack(int rank, uint64_t generation) {
    for (int r = 0; r < 3; ++r) {
      if (r == rank) continue;
      RpcAgent& agent = job_->worker(r).rpc();
      ASSERT_TRUE(AwaitTrue(
          [&] {
            return !agent.membership().DownReason(rank).has_value() &&
                   agent.directory().at(rank).generation == generation;
          },
          kWait))
          << "worker" << r;
    }
  }

  // A new process for rank 2, once the old one's rank is free (on etcd,
  // when its lease expired: ALREADY_EXISTS until then).
  void Replace2() {
    absl::Status replaced;
    AwaitTrue(
        [&] { return !absl::IsAlreadyExists(replaced = job_->Replace(2)); },
        kWait, /*every=*/absl::Milliseconds(100));
    ASSERT_OK(replaced);
    MakeGroups(2);
  }

  static std::unique_ptr<EtcdCluster> etcd_;
  std::unique_ptr<LocalJob> job_;
  std::shared_ptr<ProcessGroup> pair12_[3];
  std::shared_ptr<ProcessGroup> pair01_[3];
};

std::unique_ptr<EtcdCluster> ReplacementTest::etcd_;

TEST_P(ReplacementTest, GroupsWorkAgainAfterAReplacement) {
  Start();
  for (int i = 0; i < 2; ++i) {
    for (const absl::Status& s : WorldSum()) EXPECT_OK(s);
  }
  std::vector<absl::Status> pair = Pair12Sum();
  for (int r : {1, 2}) EXPECT_OK(pair[r]);
  job_->worker(2).Stop();
  AwaitGone(2);
  // The survivors go on in their own group; the world's op fails at once,
  // naming the dead rank.
  pair = Pair01Sum();
  for (int r : {0, 1}) EXPECT_OK(pair[r]);
  std::vector<absl::Status> without = OnRanks({0, 1}, [&](int r) {
    return AllReduce(job_->worker(r).collectives().world(), F32({1})).status();
  });
  for (int r : {0, 1}) {
    EXPECT_THAT(without[r], StatusIs(absl::StatusCode::kUnavailable,
                                     HasSubstr("rank 2 (worker2)")));
  }

  Replace2();
  if (GetParam() == Backend::kEmbedded) {
    // The master answers a replacement once every survivor saw it.
    for (int r : {0, 1}) {
      EXPECT_FALSE(job_->worker(r).rpc().membership().DownReason(2));
      EXPECT_EQ(job_->worker(r).rpc().directory().at(2).generation, 1u);
    }
  }
  AwaitBack(2, /*generation=*/1);
  for (int i = 0; i < 2; ++i) {
    std::vector<absl::Status> world = WorldSum();
    for (int r = 0; r < 3; ++r) EXPECT_OK(world[r]);
  }
  pair = Pair12Sum();
  for (int r : {1, 2}) EXPECT_OK(pair[r]);
  pair = Pair01Sum();
  for (int r : {0, 1}) EXPECT_OK(pair[r]);
}

INSTANTIATE_TEST_SUITE_P(Backends, ReplacementTest,
                         ::testing::Values(Backend::kEmbedded, Backend::kEtcd),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kEmbedded
                                      ? "EmbeddedMaster"
                                      : "Etcd";
                         });

}  // namespace
}  // namespace ferry
