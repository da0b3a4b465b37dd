// Collectives across real processes: ferryd daemons driven by `ferryctl
// collective` and scripts. Faults are real: a rank that never joins, and a
// rank killed (-9) while the others wait in an op.
#include <signal.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::DaemonCluster;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::Runfile;
using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Bound for a fault to surface: a hang check, far below the ops' timeouts.
constexpr absl::Duration kFaultBound = absl::Seconds(30);

class CollectiveE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DaemonCluster>> job =
        DaemonCluster::Up(4, {"--heartbeat_timeout_ms=2000"});
    ASSERT_OK(job);
    job_ = *std::move(job);
  }

  // `ferryctl collective OP` with `request` on stdin.
  ProcessResult Collective(const std::string& op, const std::string& request) {
    absl::StatusOr<ProcessResult> r = job_->Ctl({"collective", op}, request);
    EXPECT_OK(r);
    return r.ok() ? *r : ProcessResult();
  }

  // Waits (bounded) until every worker in [0, n) runs a collective.
  bool AwaitInflight(int n) {
    return AwaitTrue(
        [&] {
          absl::StatusOr<ProcessResult> s = job_->Ctl({"status"});
          absl::StatusOr<Value> v =
              s.ok() ? ParseJson(s->out) : absl::StatusOr<Value>(s.status());
          int running = 0;
          if (v.ok() && v->Find("workers") != nullptr) {
            for (const Value& w : v->Find("workers")->as_list()) {
              const Value* k = w.Find("collectives_inflight");
              if (k != nullptr && k->is_int() && k->as_int() > 0) ++running;
            }
          }
          return running >= n;
        },
        kFaultBound, absl::Milliseconds(50));
  }

  std::unique_ptr<DaemonCluster> job_;
};

constexpr char kOnes[] = R"({"dtype":"float32","data":[1,1]})";

std::string AllReduceOfOnes(const std::string& rank1,
                            const std::string& extra = "") {
  return absl::StrCat(R"({"ranks":[)", kOnes, ",", rank1, ",", kOnes, ",",
                      kOnes, "]", extra, "}");
}

// tools/demo.ferry: every seed scenario against real daemons, checked
// with expect, and shown per rank the way the seed pages show them.
TEST_F(CollectiveE2eTest, DemoHoldsEveryExpectationAndShowsEachRank) {
  ASSERT_OK_AND_ASSIGN(ProcessResult run,
                       job_->Ctl({"run", Runfile("tools/demo.ferry")}));
  EXPECT_EQ(run.exit_code, 0) << run.Describe();
  EXPECT_THAT(run.out, EndsWith("\ndemo: all 8 scenarios reproduced\n"));
  // all_to_all with uneven splits, rank 0's output.
  EXPECT_THAT(
      run.out,
      HasSubstr("\n  rank 0: tensor([0, 1, 10, 11, 12, 20, 21, 30, 31])\n"));
  // SparseFeaturesAllToAll: rank 0 holds A's batch of 6 samples.
  EXPECT_THAT(
      run.out,
      HasSubstr("'A'   [100]   None    [101, 102]   [103]   [104]   None\n"));
  // tf all_gather along axis 0 with different sizes.
  EXPECT_THAT(run.out,
              HasSubstr("rank 1: {'a': tensor([0, 1], dtype=int32), 'b': "
                        "tensor([[0, 1], [2, 3], [4, 5]], dtype=int32)}"));
  EXPECT_THAT(run.out, HasSubstr("tensor([6., 6.])"));  // The RRef seed's x.
}

// The jagged all-to-all follows every collective's failure rules: a rank
// that never joins is named; bad features_per_rank fail every rank.
TEST_F(CollectiveE2eTest, SparseFailuresNameTheRankAndField) {
  const std::string kjt =
      R"({"id_list": {"keys": ["a", "b"], "lengths": [1, 2], "values": [1, 2, 3]}})";
  ProcessResult missing = Collective(
      "sparse_features_all_to_all",
      absl::StrCat(
          R"({"id_list_features_per_rank": [1, 1, 0, 0], "timeout_ms": 1000, "ranks": [)",
          kjt, ",", kjt, ",", kjt, ", null]}"));
  EXPECT_EQ(missing.exit_code, 1) << missing.Describe();
  EXPECT_THAT(
      missing.err,
      StartsWith(
          "ferryctl: DEADLINE_EXCEEDED: sparse_features_all_to_all op "));
  EXPECT_THAT(missing.err,
              HasSubstr("rank 3 (worker3) did not join within 1000 ms"));

  ProcessResult bad = Collective(
      "sparse_features_all_to_all",
      absl::StrCat(R"({"id_list_features_per_rank": [1, 0, 0, 0], "ranks": [)",
                   kjt, ",", kjt, ",", kjt, ",", kjt, "]}"));
  EXPECT_EQ(bad.exit_code, 1) << bad.Describe();
  EXPECT_THAT(bad.err,
              HasSubstr("INVALID_ARGUMENT: sparse_features_all_to_all op "));
  EXPECT_THAT(
      bad.err,
      HasSubstr("id_list_features_per_rank adds up to 1 features but id_list "
                "has 2 keys"));
}

// The seed's uneven all_to_all through `ferryctl collective`, byte for byte.
TEST_F(CollectiveE2eTest, UnevenAllToAllSingleExactly) {
  ProcessResult r = Collective("all_to_all_single", R"({"ranks": [
    {"input": {"dtype":"int64","data":[0,1,2,3,4,5]}, "input_splits": [2,2,1,1]},
    {"input": {"dtype":"int64","data":[10,11,12,13,14,15,16,17,18]}, "input_splits": [3,2,2,2]},
    {"input": {"dtype":"int64","data":[20,21,22,23,24]}, "input_splits": [2,1,1,1]},
    {"input": {"dtype":"int64","data":[30,31,32,33,34,35,36]}, "input_splits": [2,2,2,1]}]})");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out,
            R"({"ranks":[{"dtype":"int64","data":[0,1,10,11,12,20,21,30,31]},)"
            R"({"dtype":"int64","data":[2,3,13,14,22,32,33]},)"
            R"({"dtype":"int64","data":[4,15,16,23,34,35]},)"
            R"({"dtype":"int64","data":[5,17,18,24,36]}]})"
            "\n");
}

TEST_F(CollectiveE2eTest, TfAllGatherDifferentSizesExactly) {
  ProcessResult r =
      Collective("all_gather", R"({"group": [0, 1], "axis": 0, "ranks": [
    {"a": {"dtype":"int32","data":[0]}, "b": {"dtype":"int32","shape":[1,2],"data":[0,1]}},
    {"a": {"dtype":"int32","data":[1]}, "b": {"dtype":"int32","shape":[2,2],"data":[2,3,4,5]}},
    null, null]})");
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  const std::string gathered =
      R"({"a":{"dtype":"int32","data":[0,1]},"b":{"dtype":"int32","shape":[3,2],"data":[0,1,2,3,4,5]}})";
  EXPECT_EQ(r.out, absl::StrCat(R"({"ranks":[)", gathered, ",", gathered,
                                ",null,null]}\n"));
}

// A rank that never joins: DEADLINE_EXCEEDED naming it; then the group
// works again.
TEST_F(CollectiveE2eTest, MissingRankIsNamedAndTheGroupRecovers) {
  ProcessResult missing = Collective(
      "all_reduce", AllReduceOfOnes("null", R"(,"timeout_ms":1500)"));
  EXPECT_EQ(missing.exit_code, 1) << missing.Describe();
  EXPECT_THAT(missing.err,
              StartsWith("ferryctl: DEADLINE_EXCEEDED: all_reduce op "));
  EXPECT_THAT(missing.err,
              HasSubstr("rank 1 (worker1) did not join within 1500 ms"));

  ProcessResult next = Collective("all_reduce", AllReduceOfOnes(kOnes));
  EXPECT_EQ(next.exit_code, 0) << next.Describe();
  const std::string four = R"({"dtype":"float32","data":[4,4]})";
  EXPECT_EQ(next.out, absl::StrCat(R"({"ranks":[)", four, ",", four, ",", four,
                                   ",", four, "]}\n"));
}

// A member is killed while the others wait in an op: they fail with
// UNAVAILABLE naming it, promptly (long before the op's 60 s deadline; the
// master learns it from the dead process's host, not the heartbeat), and
// the survivors can still run collectives among themselves.
TEST_F(CollectiveE2eTest, KilledRankFailsTheOpPromptly) {
  ASSERT_OK_AND_ASSIGN(
      auto waiting,
      job_->CtlInBackground({"collective", "all_reduce"},
                            AllReduceOfOnes("null", R"(,"timeout_ms":60000)")));
  ASSERT_TRUE(AwaitInflight(3)) << "the op never started on the three ranks";
  kill(job_->pid(1), SIGKILL);
  ProcessResult r = waiting->Wait(kFaultBound);
  EXPECT_FALSE(r.timed_out) << r.Describe();
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err, StartsWith("ferryctl: UNAVAILABLE: all_reduce op "));
  EXPECT_THAT(r.err, HasSubstr("rank 1 (worker1) died"));
  // Known from its host's refusal, not from missed heartbeats.
  EXPECT_THAT(r.err, HasSubstr("its process is gone"));

  ProcessResult survivors = Collective(
      "all_reduce", absl::StrCat(R"({"group":[0,2,3],"ranks":[)", kOnes,
                                 ",null,", kOnes, ",", kOnes, "]}"));
  EXPECT_EQ(survivors.exit_code, 0) << survivors.Describe();
  EXPECT_THAT(survivors.out, HasSubstr(R"({"dtype":"float32","data":[3,3]})"));
}

TEST_F(CollectiveE2eTest, BadSplitsFailEveryRankNamingTheField) {
  ProcessResult r = Collective("all_to_all_single", R"({"ranks": [
    {"dtype":"int64","data":[0,1,2,3]},
    {"input": {"dtype":"int64","data":[0,1,2,3]}, "input_splits": [1,1,1]},
    {"dtype":"int64","data":[0,1,2,3]}, {"dtype":"int64","data":[0,1,2,3]}]})");
  EXPECT_EQ(r.exit_code, 1) << r.Describe();
  EXPECT_THAT(r.err,
              StartsWith("ferryctl: INVALID_ARGUMENT: all_to_all_single op "));
  EXPECT_THAT(r.err, HasSubstr("rank 1 (worker1): input_splits has 3 entries"));
}

}  // namespace
}  // namespace ferry
