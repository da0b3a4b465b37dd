// The latency schedules on more ranks than breadth_test's: the gather of
// every rank's message in ceil(log2 n) rounds
// (collectives/algorithms/gather_all.h), which all_reduce and all_gather start
// with, on powers of two and between them, broadcast's binomial tree
// (collectives/algorithms/tree.h) and the all-to-alls' gathered headers and
// Bruck rounds (bruck_exchange.h), here from two ranks on (tree_world =
// gather_world = 2). Results are computed in the test; small float sums must be
// the same bits on every rank and those of a reduction in rank order, as when
// every rank sent every other its input.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor_math.h"
#include "tests/collectives/collective_testing.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::OnEveryRank;
using ::ferry::testing::SameTensor;
using ::ferry::testing::Sample;
using ::ferry::testing::StatusIs;
using ::ferry::testing::Where;
using ::testing::HasSubstr;

class ScheduleTest : public ::ferry::testing::SharedJobTest {
 protected:
  void Configure(WorkerConfig& o) override {
    o.collectives.tree_world = 2;
    o.collectives.gather_world = 2;
  }
};

int64_t Seed(int rank, int which) { return rank * 131 + which * 7; }

TEST_P(ScheduleTest, AllReduceEveryOpAndDType) {
  struct Case {
    DType dtype;
    ReduceOp op;
  };
  std::vector<Case> cases;
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : ::ferry::testing::kAllReduceOps) {
      if (::ferry::testing::Applies(op, dt)) cases.push_back({dt, op});
    }
  }
  ExpectAllReduce<Case>(
      cases,
      [](const Case& c, int r) {
        return Sample(c.dtype, {3, 2}, Seed(r, 1));
      },
      [](const Case& c) {
        return absl::StrCat(DTypeName(c.dtype), " op ", ReduceOpName(c.op));
      });
}

// Float sums whose rounding depends on the order of the additions.
template <typename T>
Tensor Noisy(int64_t numel, int rank) {
  std::vector<T> v(numel);
  for (int64_t k = 0; k < numel; ++k) {
    const T x = static_cast<T>(1.0 / (3.0 + (k * 7 + rank * 13) % 97));
    v[k] = rank % 2 ? x * static_cast<T>(-1e3) : x;
  }
  return Tensor::FromVector<T>(v);
}

template <typename T>
void ExpectRankOrderSums(LocalJob& job, int n) {
  constexpr int64_t kNumel = 40;
  auto out = OnEveryRank<absl::StatusOr<Tensor>>(job, [](WorkerImpl& w, int r) {
    return AllReduce(w.collectives().world(), Noisy<T>(kNumel, r));
  });
  std::vector<T> want = Noisy<T>(kNumel, 0).template ToVector<T>();
  for (int r = 1; r < n; ++r) {
    const std::vector<T> x = Noisy<T>(kNumel, r).template ToVector<T>();
    for (int64_t k = 0; k < kNumel; ++k) want[k] = want[k] + x[k];
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_OK(out[r]);
    EXPECT_EQ(out[r]->template ToVector<T>(), want) << "rank " << r;
    EXPECT_EQ(out[r]->bytes(), out[0]->bytes()) << "rank " << r;
  }
}

TEST_P(ScheduleTest, SmallFloatSumsAreInRankOrderOnEveryRank) {
  ExpectRankOrderSums<float>(*job_, n_);
  ExpectRankOrderSums<double>(*job_, n_);
}

TEST_P(ScheduleTest, AllGatherOfUnevenShapes) {
  auto input = [](int r) { return Sample(DType::kInt32, {r % 3, 2}, r); };
  auto out = OnEveryRank<absl::StatusOr<std::vector<Tensor>>>(
      *job_,
      [&](WorkerImpl& w, int r) { return AllGather(World(w), input(r)); });
  for (int r = 0; r < n_; ++r) {
    ASSERT_OK(out[r]);
    ASSERT_EQ(out[r]->size(), static_cast<size_t>(n_));
    for (int i = 0; i < n_; ++i) {
      EXPECT_TRUE(SameTensor((*out[r])[i], input(i)))
          << "rank " << r << " item " << i;
    }
  }
}

// Rank r's block for rank i: (r + i) % 3 rows, its own values.
Tensor Block(int r, int i) {
  return Sample(DType::kInt32, {(r + i) % 3, 2}, r * 17 + i);
}

TEST_P(ScheduleTest, AllToAllOfUnevenBlocksInBrucksRounds) {
  auto out = OnEveryRank<absl::StatusOr<std::vector<Tensor>>>(
      *job_, [&](WorkerImpl& w, int r) {
        std::vector<Tensor> mine;
        for (int i = 0; i < n_; ++i) mine.push_back(Block(r, i));
        return AllToAll(World(w), mine);
      });
  for (int r = 0; r < n_; ++r) {
    ASSERT_OK(out[r]);
    ASSERT_EQ(out[r]->size(), static_cast<size_t>(n_));
    for (int i = 0; i < n_; ++i) {
      EXPECT_TRUE(SameTensor((*out[r])[i], Block(i, r)))
          << "rank " << r << " from " << i;
    }
  }
}

// Rows of rank r's input for rank i: (r + 2i) % 4; rank 0's input for
// rank n-1 is over direct_bytes when `large`, so the blocks follow the
// gathered headers in the direct exchange instead of Bruck's rounds.
TEST_P(ScheduleTest, AllToAllSingleSmallAndLarge) {
  for (bool large : {false, true}) {
    auto rows = [&](int r, int i) -> int64_t {
      if (large && r == 0 && i == n_ - 1) return (1 << 20) / 8 + 1;
      return (r + 2 * i) % 4;
    };
    auto input = [&](int r) {
      int64_t total = 0;
      for (int i = 0; i < n_; ++i) total += rows(r, i);
      return Sample(DType::kInt64, {total, 1}, r);
    };
    auto out =
        OnEveryRank<absl::StatusOr<Tensor>>(*job_, [&](WorkerImpl& w, int r) {
          std::vector<int64_t> in, outs;
          for (int i = 0; i < n_; ++i) {
            in.push_back(rows(r, i));
            outs.push_back(rows(i, r));
          }
          return AllToAllSingle(World(w), input(r), outs, in);
        });
    for (int r = 0; r < n_; ++r) {
      std::vector<Tensor> parts;
      for (int i = 0; i < n_; ++i) {
        int64_t at = 0;
        for (int j = 0; j < r; ++j) at += rows(i, j);
        parts.push_back(*input(i).Rows(at, at + rows(i, r)));
      }
      ASSERT_TRUE(out[r].ok()) << "large " << large << ": " << out[r].status();
      ASSERT_OK_AND_ASSIGN(Tensor want, Concat(parts, 0));
      EXPECT_TRUE(SameTensor(*out[r], want))
          << "rank " << r << " large " << large;
    }
  }
}

// A wrong output_splits on one rank fails the op on every rank, as on the
// direct exchange (errors_test): every rank's header reached every rank.
TEST_P(ScheduleTest, AllToAllSingleWrongOutputSplitsFailEverywhere) {
  if (n_ < 3) GTEST_SKIP() << "needs a third rank";
  auto out =
      OnEveryRank<absl::StatusOr<Tensor>>(*job_, [&](WorkerImpl& w, int r) {
        std::vector<int64_t> outs(n_, 1);
        if (r == 1) outs[2] = 2;
        return AllToAllSingle(World(w), Sample(DType::kInt64, {n_}, r), outs,
                              std::vector<int64_t>(n_, 1));
      });
  for (int r = 0; r < n_; ++r) {
    EXPECT_THAT(out[r],
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("rank 2 (worker2) sent 1 rows to rank 1 "
                                   "(worker1) but its output_splits[2] is 2")))
        << "rank " << r;
  }
}

TEST_P(ScheduleTest, BroadcastDownTheTreeFromEveryRank) {
  // A tensor above direct_bytes (1 MiB) as well, and a nested value.
  auto big = [](int src) {
    return Value(Sample(DType::kUInt8, {(1 << 20) + 3}, src));
  };
  auto nested = [](int src) {
    return Value(
        Value::Map{{"src", src}, {"t", Sample(DType::kFloat64, {2}, src)}});
  };
  using Results = std::vector<absl::StatusOr<Value>>;
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (int src = 0; src < n_; ++src) {
      results.push_back(
          Broadcast(World(w), r == src ? nested(src) : Value(), src));
    }
    results.push_back(
        Broadcast(World(w), r == 1 % n_ ? big(1 % n_) : Value(), 1 % n_));
    return results;
  });
  for (int r = 0; r < n_; ++r) {
    for (int src = 0; src < n_; ++src) {
      ASSERT_OK(out[r][src]);
      EXPECT_EQ(*out[r][src], nested(src)) << "rank " << r << " src " << src;
    }
    ASSERT_OK(out[r][n_]);
    ASSERT_TRUE(out[r][n_]->is_tensor());
    EXPECT_TRUE(SameTensor(out[r][n_]->as_tensor(), big(1 % n_).as_tensor()))
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ScheduleTest,
                         ::testing::Values(2, 3, 6, 8, 9),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("world", info.param);
                         });

// A rank that never joins a broadcast on the tree, or its source: every
// rank that came fails naming it, as on the direct schedule
// (failure_test), and the group works for the next op.
TEST(ScheduleFailureTest, MissingRankOnTheTreeIsNamed) {
  LocalJob::Options options;
  options.configure = [](WorkerConfig& o) { o.collectives.tree_world = 2; };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                       LocalJob::Start(5, options));
  auto run = [&](const std::vector<int>& ranks, int src) {
    std::vector<absl::Status> out(5, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int r : ranks) {
      threads.emplace_back([&, r] {
        out[r] = Broadcast(job->worker(r).collectives().world(), Value(r), src,
                           {.timeout = absl::Milliseconds(500)})
                     .status();
      });
    }
    for (std::thread& t : threads) t.join();
    return out;
  };
  int op = 0;
  for (int missing : {3, 0}) {
    std::vector<int> present;
    for (int r = 0; r < 5; ++r) {
      if (r != missing) present.push_back(r);
    }
    std::vector<absl::Status> out = run(present, 0);
    for (int r : present) {
      EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kDeadlineExceeded,
                                   HasSubstr(absl::StrCat(
                                       "broadcast op ", op, ": rank ", missing,
                                       " (worker", missing, ") did not join"))))
          << "rank " << r << " without rank " << missing;
    }
    // The latecomer's op was aborted by the others.
    EXPECT_THAT(run({missing}, 0)[missing],
                StatusIs(absl::StatusCode::kDeadlineExceeded));
    for (int r = 0; r < 5; ++r) {
      EXPECT_EQ(job->worker(r).collectives().mailbox().held_messages(), 0)
          << "rank " << r;
    }
    ++op;
  }
  std::vector<absl::Status> out = run({0, 1, 2, 3, 4}, 2);
  for (int r = 0; r < 5; ++r)
    EXPECT_TRUE(out[r].ok()) << "rank " << r << ": " << out[r];
}

}  // namespace
}  // namespace ferry
