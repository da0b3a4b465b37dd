// The output forms (into.h): every collective writing into caller memory,
// in place where allowed, on the direct paths and (with a tiny
// direct_bytes) the ring and tree ones, on 1 to 4 ranks.
#include "collectives/into.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/collectives.h"
#include "collectives/op/tensor_out.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/collectives/collective_testing.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::Applies;
using ::ferry::testing::C;
using ::ferry::testing::Elements;
using ::ferry::testing::MakeTensor;
using ::ferry::testing::OnEveryRank;
using ::ferry::testing::SameTensor;
using ::ferry::testing::Sample;
using ::ferry::testing::StatusIs;
using ::ferry::testing::Where;
using ::testing::HasSubstr;

// Memory the test owns, viewed as an input tensor and as an output.
struct Memory {
  std::shared_ptr<char> bytes;
  DType dtype;
  Shape shape;
  size_t nbytes;

  // Starts with `t`'s bytes.
  static Memory Of(const Tensor& t) {
    Memory m = Sized(t.dtype(), t.shape());
    if (t.nbytes() > 0) std::memcpy(m.bytes.get(), t.data(), t.nbytes());
    return m;
  }
  // Starts with garbage (0x5a), so an output left unwritten shows.
  static Memory Sized(DType dtype, Shape shape) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    const size_t n = static_cast<size_t>(numel) * ItemSize(dtype);
    std::shared_ptr<char> bytes(new char[n + 1], std::default_delete<char[]>());
    std::memset(bytes.get(), 0x5a, n + 1);
    return Memory{std::move(bytes), dtype, std::move(shape), n};
  }
  Tensor tensor() const {
    return *Tensor::FromShared(dtype, shape, bytes, bytes.get(), nbytes);
  }
  TensorOut out() const {
    return *OutputOver(dtype, shape, bytes, bytes.get(), nbytes);
  }
};

int64_t Seed(int rank, int which) { return rank * 101 + which * 7; }

// Samples whose bool entries are 0/1 after a round trip through memory.
Tensor Input(DType dtype, Shape shape, int rank, int which = 0) {
  return Sample(dtype, std::move(shape), Seed(rank, which));
}

class IntoTest : public ::ferry::testing::SharedJobTest {};

// The same with a tiny direct_bytes, so payloads of a few hundred bytes
// take the rings and the tree.
class IntoRingTest : public ::ferry::testing::SharedJobTest {
 protected:
  void Configure(WorkerConfig& o) override {
    o.collectives.direct_bytes = 64;
    o.collectives.split_bytes = 32;
    o.collectives.chunk_bytes = 1000;
  }
};

// All-reduce in place: every op on every dtype, the result in the input's
// own memory and right on every rank.
void ExpectAllReduceInPlace(LocalJob& job, int64_t numel) {
  const int n = job.size();
  struct Case {
    DType dtype;
    ReduceOp op;
  };
  std::vector<Case> cases;
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : ::ferry::testing::kAllReduceOps) {
      if (Applies(op, dt)) cases.push_back({dt, op});
    }
  }
  using Results = std::vector<std::pair<absl::StatusOr<Tensor>, Memory>>;
  auto out = OnEveryRank<Results>(job, [&](WorkerImpl& w, int r) {
    Results results;
    for (const Case& c : cases) {
      Memory m = Memory::Of(Input(c.dtype, {numel}, r));
      Work<Tensor> work = AllReduceIntoAsync(w.collectives().world(),
                                             m.tensor(), m.out(), c.op);
      results.emplace_back(work.Wait(absl::Seconds(60)), m);
    }
    return results;
  });
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    std::vector<std::vector<C>> ins;
    for (int i = 0; i < n; ++i)
      ins.push_back(Elements(Input(c.dtype, {numel}, i)));
    const Tensor want = MakeTensor(
        c.dtype, {numel}, ::ferry::testing::Reduce(c.op, c.dtype, ins));
    for (int r = 0; r < n; ++r) {
      const auto& [got, memory] = out[r][k];
      ASSERT_OK(got);
      EXPECT_EQ(got->data(), memory.bytes.get()) << Where(c.dtype, r);
      EXPECT_TRUE(SameTensor(memory.tensor(), want))
          << "world " << n << " " << Where(c.dtype, r) << " op "
          << ReduceOpName(c.op);
    }
  }
}

TEST_P(IntoTest, AllReduceInPlaceEveryOpAndDType) {
  ExpectAllReduceInPlace(*job_, 5);
}

TEST_P(IntoRingTest, AllReduceInPlaceEveryOpAndDTypeOnTheRing) {
  // 301 elements: the ring (or, on 3+ ranks, never the split form: above
  // direct_bytes), segments of uneven sizes.
  ExpectAllReduceInPlace(*job_, 301);
}

TEST_P(IntoRingTest, AllReduceInPlaceSplitForm) {
  // Between split_bytes (32) and direct_bytes (64): the split form on 3+
  // ranks, where a rank's own segment is reduced over its own input.
  ExpectAllReduceInPlace(*job_, 7);
}

TEST_P(IntoTest, AllReduceIntoAnotherTensor) {
  auto out =
      OnEveryRank<absl::StatusOr<Tensor>>(*job_, [&](WorkerImpl& w, int r) {
        Memory dst = Memory::Sized(DType::kFloat32, {2, 3});
        return AllReduceIntoAsync(w.collectives().world(),
                                  Input(DType::kFloat32, {2, 3}, r), dst.out())
            .Wait(absl::Seconds(60));
      });
  std::vector<std::vector<C>> ins;
  for (int i = 0; i < n_; ++i)
    ins.push_back(Elements(Input(DType::kFloat32, {2, 3}, i)));
  const Tensor want = MakeTensor(
      DType::kFloat32, {2, 3},
      ::ferry::testing::Reduce(ReduceOp::kSum, DType::kFloat32, ins));
  for (int r = 0; r < n_; ++r) {
    ASSERT_OK(out[r]);
    EXPECT_TRUE(SameTensor(*out[r], want)) << "rank " << r;
  }
}

TEST_P(IntoTest, AnOutputOfAnotherShapeIsRefusedNamingIt) {
  auto out = OnEveryRank<absl::Status>(*job_, [&](WorkerImpl& w, int r) {
    Memory dst = Memory::Sized(DType::kFloat32, {r == 0 ? 4 : 3});
    return AllReduceIntoAsync(w.collectives().world(),
                              Input(DType::kFloat32, {3}, r), dst.out())
        .Wait(absl::Seconds(60))
        .status();
  });
  for (int r = 0; r < n_; ++r) {
    EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("output is float32 [4] but the "
                                           "result is float32 [3]")));
  }
}

// all_to_all_single with uneven splits, into an output of the right rows.
void ExpectAllToAllSingle(LocalJob& job) {
  const int n = job.size();
  // Rank r sends (r + to) % 3 + 1 rows of 2 to rank `to`.
  auto rows = [](int from, int to) { return int64_t{(from + to) % 3 + 1}; };
  for (DType dt : {DType::kInt64, DType::kComplex64, DType::kBool}) {
    auto out = OnEveryRank<std::pair<absl::StatusOr<Tensor>, Memory>>(
        job, [&](WorkerImpl& w, int r) {
          std::vector<int64_t> in_splits, out_splits;
          int64_t in_rows = 0, out_rows = 0;
          for (int p = 0; p < n; ++p) {
            in_splits.push_back(rows(r, p));
            out_splits.push_back(rows(p, r));
            in_rows += rows(r, p);
            out_rows += rows(p, r);
          }
          Memory dst = Memory::Sized(dt, {out_rows, 2});
          absl::StatusOr<Tensor> got =
              AllToAllSingleIntoAsync(w.collectives().world(),
                                      Input(dt, {in_rows, 2}, r), dst.out(),
                                      out_splits, in_splits)
                  .Wait(absl::Seconds(60));
          return std::make_pair(std::move(got), dst);
        });
    for (int r = 0; r < n; ++r) {
      // Rows from rank p: rank p's input rows [sum_{q<r} rows(p, q), +rows(p,
      // r)).
      std::vector<C> want;
      for (int p = 0; p < n; ++p) {
        int64_t at = 0;
        for (int q = 0; q < r; ++q) at += rows(p, q);
        int64_t in_rows = 0;
        for (int q = 0; q < n; ++q) in_rows += rows(p, q);
        std::vector<C> e = Elements(Input(dt, {in_rows, 2}, p));
        want.insert(want.end(), e.begin() + at * 2,
                    e.begin() + (at + rows(p, r)) * 2);
      }
      ASSERT_OK(out[r].first);
      EXPECT_EQ(out[r].first->data(), out[r].second.bytes.get());
      EXPECT_EQ(Elements(out[r].second.tensor()), want) << Where(dt, r);
    }
  }
}

TEST_P(IntoTest, AllToAllSingleUneven) { ExpectAllToAllSingle(*job_); }
TEST_P(IntoRingTest, AllToAllSingleUneven) { ExpectAllToAllSingle(*job_); }

TEST_P(IntoTest, AllToAllSingleEvenWithoutSplits) {
  auto out = OnEveryRank<std::pair<absl::StatusOr<Tensor>, Memory>>(
      *job_, [&](WorkerImpl& w, int r) {
        Memory dst = Memory::Sized(DType::kFloat32, {2 * n_});
        absl::StatusOr<Tensor> got =
            AllToAllSingleIntoAsync(w.collectives().world(),
                                    Input(DType::kFloat32, {2 * n_}, r),
                                    dst.out())
                .Wait(absl::Seconds(60));
        return std::make_pair(std::move(got), dst);
      });
  for (int r = 0; r < n_; ++r) {
    std::vector<C> want;
    for (int p = 0; p < n_; ++p) {
      std::vector<C> e = Elements(Input(DType::kFloat32, {2 * n_}, p));
      want.insert(want.end(), e.begin() + 2 * r, e.begin() + 2 * r + 2);
    }
    ASSERT_OK(out[r].first);
    EXPECT_EQ(Elements(out[r].second.tensor()), want) << "rank " << r;
  }
}

// all_to_all's and all_gather's lists, and gather's at dst: outs[p] holds
// what rank p sent here.
void ExpectLists(LocalJob& job, int64_t numel) {
  const int n = job.size();
  using Got = std::pair<absl::Status, std::vector<Memory>>;
  auto tensor_of = [numel](int from, int to) {
    return Input(DType::kFloat64, {numel + from}, from, to);
  };
  // all_to_all: rank p sends rank r tensor_of(p, r) (sizes differ by sender).
  auto a2a = OnEveryRank<Got>(job, [&](WorkerImpl& w, int r) {
    std::vector<Tensor> in;
    std::vector<Memory> mem;
    std::vector<TensorOut> outs;
    for (int p = 0; p < n; ++p) {
      in.push_back(tensor_of(r, p));
      mem.push_back(Memory::Sized(DType::kFloat64, {numel + p}));
      outs.push_back(mem.back().out());
    }
    absl::Status s = AllToAllIntoAsync(w.collectives().world(), in, outs)
                         .Wait(absl::Seconds(60))
                         .status();
    return Got{s, mem};
  });
  // all_gather: everyone gets tensor_of(p, 0) from rank p.
  auto gathered = OnEveryRank<Got>(job, [&](WorkerImpl& w, int r) {
    std::vector<Memory> mem;
    std::vector<TensorOut> outs;
    for (int p = 0; p < n; ++p) {
      mem.push_back(Memory::Sized(DType::kFloat64, {numel + p}));
      outs.push_back(mem.back().out());
    }
    absl::Status s =
        AllGatherIntoAsync(w.collectives().world(), tensor_of(r, 0), outs)
            .Wait(absl::Seconds(60))
            .status();
    return Got{s, mem};
  });
  // gather at the last rank: tensor_of(p, 0) from rank p.
  const int dst = n - 1;
  auto at_root = OnEveryRank<Got>(job, [&](WorkerImpl& w, int r) {
    std::vector<Memory> mem;
    std::vector<TensorOut> outs;
    for (int p = 0; r == dst && p < n; ++p) {
      mem.push_back(Memory::Sized(DType::kFloat64, {numel + p}));
      outs.push_back(mem.back().out());
    }
    absl::Status s =
        GatherIntoAsync(w.collectives().world(), tensor_of(r, 0), outs, dst)
            .Wait(absl::Seconds(60))
            .status();
    return Got{s, mem};
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_OK(a2a[r].first);
    ASSERT_OK(gathered[r].first);
    ASSERT_OK(at_root[r].first);
    for (int p = 0; p < n; ++p) {
      EXPECT_TRUE(SameTensor(a2a[r].second[p].tensor(), tensor_of(p, r)))
          << "all_to_all rank " << r << " from " << p;
      EXPECT_TRUE(SameTensor(gathered[r].second[p].tensor(), tensor_of(p, 0)))
          << "all_gather rank " << r << " from " << p;
      if (r == dst) {
        EXPECT_TRUE(SameTensor(at_root[r].second[p].tensor(), tensor_of(p, 0)))
            << "gather from " << p;
      }
    }
  }
}

TEST_P(IntoTest, Lists) { ExpectLists(*job_, 3); }
TEST_P(IntoRingTest, Lists) { ExpectLists(*job_, 100); }

TEST_P(IntoTest, AllGatherIntoViewsOfOneTensor) {
  // torch's all_gather_into_tensor: rank p's rows at [p*2, p*2+2).
  auto out = OnEveryRank<std::pair<absl::Status, Memory>>(
      *job_, [&](WorkerImpl& w, int r) {
        Memory flat = Memory::Sized(DType::kInt32, {2 * n_, 3});
        std::vector<TensorOut> outs;
        for (int p = 0; p < n_; ++p) {
          outs.push_back(*OutputOver(DType::kInt32, {2, 3}, flat.bytes,
                                     flat.bytes.get() + p * 2 * 3 * 4,
                                     2 * 3 * 4));
        }
        absl::Status s =
            AllGatherIntoAsync(w.collectives().world(),
                               Input(DType::kInt32, {2, 3}, r), outs)
                .Wait(absl::Seconds(60))
                .status();
        return std::make_pair(s, flat);
      });
  std::vector<Tensor> parts;
  for (int p = 0; p < n_; ++p) parts.push_back(Input(DType::kInt32, {2, 3}, p));
  const std::vector<C> want = ::ferry::testing::ConcatElements(parts, 0);
  for (int r = 0; r < n_; ++r) {
    ASSERT_OK(out[r].first);
    EXPECT_EQ(Elements(out[r].second.tensor()), want) << "rank " << r;
  }
}

void ExpectRooted(LocalJob& job, int64_t numel) {
  const int n = job.size();
  const int root = n / 2;
  struct Got {
    absl::Status broadcast, scatter, reduce, reduce_scatter;
    Memory b, s, red, rs;
  };
  auto out = OnEveryRank<Got>(job, [&](WorkerImpl& w, int r) {
    ProcessGroup& world = w.collectives().world();
    Got g;
    // broadcast in place on the root: every rank's memory holds root's.
    g.b = r == root ? Memory::Of(Input(DType::kBFloat16, {numel}, r))
                    : Memory::Sized(DType::kBFloat16, {numel});
    g.broadcast = BroadcastIntoAsync(world, g.b.tensor(), g.b.out(), root)
                      .Wait(absl::Seconds(60))
                      .status();
    // scatter: rank p gets root's p-th.
    std::vector<Tensor> pieces;
    for (int p = 0; r == root && p < n; ++p)
      pieces.push_back(Input(DType::kInt16, {numel}, root, p));
    g.s = Memory::Sized(DType::kInt16, {numel});
    g.scatter = ScatterIntoAsync(world, pieces, g.s.out(), root)
                    .Wait(absl::Seconds(60))
                    .status();
    // reduce in place at the root; the others keep theirs.
    g.red = Memory::Of(Input(DType::kFloat32, {numel}, r, 3));
    g.reduce = ReduceIntoAsync(world, g.red.tensor(),
                               r == root ? g.red.out() : nullptr, root)
                   .Wait(absl::Seconds(60))
                   .status();
    // reduce_scatter into a separate output.
    std::vector<Tensor> blocks;
    for (int p = 0; p < n; ++p)
      blocks.push_back(Input(DType::kComplex128, {numel}, r, 10 + p));
    g.rs = Memory::Sized(DType::kComplex128, {numel});
    g.reduce_scatter =
        ReduceScatterIntoAsync(world, blocks, g.rs.out(), ReduceOp::kAvg)
            .Wait(absl::Seconds(60))
            .status();
    return g;
  });
  std::vector<std::vector<C>> reduce_ins;
  for (int i = 0; i < n; ++i)
    reduce_ins.push_back(Elements(Input(DType::kFloat32, {numel}, i, 3)));
  const Tensor reduced = MakeTensor(
      DType::kFloat32, {numel},
      ::ferry::testing::Reduce(ReduceOp::kSum, DType::kFloat32, reduce_ins));
  for (int r = 0; r < n; ++r) {
    const Got& g = out[r];
    ASSERT_OK(g.broadcast);
    ASSERT_OK(g.scatter);
    ASSERT_OK(g.reduce);
    ASSERT_OK(g.reduce_scatter);
    EXPECT_TRUE(
        SameTensor(g.b.tensor(), Input(DType::kBFloat16, {numel}, root)))
        << "broadcast on rank " << r;
    EXPECT_TRUE(
        SameTensor(g.s.tensor(), Input(DType::kInt16, {numel}, root, r)))
        << "scatter on rank " << r;
    EXPECT_TRUE(
        SameTensor(g.red.tensor(),
                   r == root ? reduced : Input(DType::kFloat32, {numel}, r, 3)))
        << "reduce on rank " << r;
    std::vector<std::vector<C>> ins;
    for (int i = 0; i < n; ++i)
      ins.push_back(Elements(Input(DType::kComplex128, {numel}, i, 10 + r)));
    EXPECT_TRUE(SameTensor(
        g.rs.tensor(),
        MakeTensor(
            DType::kComplex128, {numel},
            ::ferry::testing::Reduce(ReduceOp::kAvg, DType::kComplex128, ins))))
        << "reduce_scatter on rank " << r;
  }
}

TEST_P(IntoTest, Rooted) { ExpectRooted(*job_, 4); }
TEST_P(IntoRingTest, Rooted) { ExpectRooted(*job_, 200); }

TEST_P(IntoTest, ReduceWithoutOutputReturnsTheReductionAtTheRoot) {
  auto out =
      OnEveryRank<absl::StatusOr<Tensor>>(*job_, [&](WorkerImpl& w, int r) {
        return Reduce(w.collectives().world(), Input(DType::kInt64, {3}, r), 0,
                      ReduceOp::kMax);
      });
  std::vector<std::vector<C>> ins;
  for (int i = 0; i < n_; ++i)
    ins.push_back(Elements(Input(DType::kInt64, {3}, i)));
  for (int r = 0; r < n_; ++r) {
    ASSERT_OK(out[r]);
    EXPECT_TRUE(SameTensor(
        *out[r], r == 0 ? MakeTensor(DType::kInt64, {3},
                                     ::ferry::testing::Reduce(
                                         ReduceOp::kMax, DType::kInt64, ins))
                        : Input(DType::kInt64, {3}, r)))
        << "rank " << r;
  }
}

TEST_P(IntoTest, ReduceWithMismatchedInputsFailsEverywhereNamingTheRank) {
  if (n_ < 2) GTEST_SKIP() << "needs two ranks";
  auto out = OnEveryRank<absl::Status>(*job_, [&](WorkerImpl& w, int r) {
    return Reduce(w.collectives().world(),
                  Input(DType::kInt64, {r == 1 ? 4 : 3}, r), 0)
        .status();
  });
  for (int r = 0; r < n_; ++r) {
    EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("rank 1 (worker1) has input")))
        << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, IntoTest, ::testing::Values(1, 2, 3, 4),
                         ::testing::PrintToStringParamName());
INSTANTIATE_TEST_SUITE_P(WorldSizes, IntoRingTest,
                         ::testing::Values(1, 2, 3, 4),
                         ::testing::PrintToStringParamName());

}  // namespace
}  // namespace ferry
