// The large-message paths: ring all_gather, reduce_scatter and all_reduce,
// tree broadcast, chunked streaming and receive backpressure. The job is
// configured with a tiny direct_bytes (64) and chunk_bytes (1000), so
// payloads of a few KiB take those paths, mixed with small ones that still
// go direct.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/collectives/collective_testing.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::BothWays;
using ::ferry::testing::C;
using ::ferry::testing::DTypeCase;
using ::ferry::testing::Elements;
using ::ferry::testing::MakeTensor;
using ::ferry::testing::OnEveryRank;
using ::ferry::testing::SameTensor;
using ::ferry::testing::Sample;
using ::ferry::testing::StatusIs;
using ::ferry::testing::Where;
using ::testing::HasSubstr;

constexpr int64_t kDirectBytes = 64;

// One job per world size whose payloads take the ring and tree paths.
class RingTest : public ::ferry::testing::SharedJobTest {
 protected:
  void Configure(WorkerConfig& o) override {
    o.collectives.direct_bytes = kDirectBytes;
    o.collectives.chunk_bytes = 1000;
  }
};

int64_t Seed(int rank, int which) { return rank * 1009 + which * 31; }

// Float sums whose rounding depends on the order of additions: ranks must
// still agree bit for bit.
Tensor Noisy(DType dtype, int64_t numel, int rank) {
  std::vector<C> v(numel);
  for (int64_t k = 0; k < numel; ++k) {
    const double x =
        1.0 / (3.0 + static_cast<double>((k * 7 + rank * 13) % 97));
    v[k] = C(x * (rank % 2 ? -1e3 : 1.0), x * 0.37);
  }
  return MakeTensor(dtype, {numel}, v);
}

// One all_reduce of the checked ones: rank r reduces Sample(dtype, numel).
struct ReduceCase {
  DType dtype;
  ReduceOp op;
  int64_t numel;
};

// Every op on every dtype it applies to, with `numel` elements.
std::vector<ReduceCase> EveryOpAndDType(int64_t numel) {
  std::vector<ReduceCase> cases;
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : ::ferry::testing::kAllReduceOps) {
      if (::ferry::testing::Applies(op, dt)) cases.push_back({dt, op, numel});
    }
  }
  return cases;
}

Tensor CaseInput(const ReduceCase& c, int rank, int which) {
  return Sample(c.dtype, {c.numel}, Seed(rank, which));
}

using Results = std::vector<absl::StatusOr<Tensor>>;

// Each rank's results[k] is the reduction of every rank's input of
// cases[k] (inputs drawn with `which`).
void ExpectReduced(const std::vector<ReduceCase>& cases, int which,
                   const std::vector<Results>& out) {
  const int n = static_cast<int>(out.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    const ReduceCase& c = cases[k];
    std::vector<std::vector<C>> ins;
    for (int i = 0; i < n; ++i) ins.push_back(Elements(CaseInput(c, i, which)));
    const Tensor want = MakeTensor(
        c.dtype, {c.numel}, ::ferry::testing::Reduce(c.op, c.dtype, ins));
    for (int r = 0; r < n; ++r) {
      ASSERT_OK(out[r][k]);
      EXPECT_TRUE(SameTensor(*out[r][k], want))
          << "world " << n << " " << Where(c.dtype, r) << " op "
          << ReduceOpName(c.op);
    }
  }
}

TEST_P(RingTest, AllReduceEveryOpLarge) {
  // 1000 elements: far above direct_bytes in every dtype, not a multiple
  // of the world size (uneven ring segments), and for world size 5 some
  // tiny tensors whose ring segments are empty.
  std::vector<ReduceCase> cases = EveryOpAndDType(1001);
  // Just above direct_bytes, fewer elements than ranks for wide dtypes.
  cases.push_back({DType::kComplex128, ReduceOp::kSum, 5});
  cases.push_back({DType::kInt64, ReduceOp::kMax, 9});
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (const ReduceCase& c : cases)
      results.push_back(AllReduce(World(w), CaseInput(c, r, 1), c.op));
    return results;
  });
  ExpectReduced(cases, 1, out);
}

TEST_P(RingTest, AllReduceFloatsAreBitIdenticalOnEveryRank) {
  // Multi-dimensional, large (ring) and small (direct); sums and averages
  // that round.
  const std::vector<DType> dtypes = {DType::kFloat16,   DType::kBFloat16,
                                     DType::kFloat32,   DType::kFloat64,
                                     DType::kComplex64, DType::kComplex128};
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (DType dt : dtypes) {
      for (int64_t numel : {int64_t{3}, int64_t{4099}}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kProd}) {
          Tensor t = *Noisy(dt, numel, r)
                          .Reshape(numel == 3 ? Shape{3, 1} : Shape{1, 4099});
          results.push_back(AllReduce(World(w), t, op));
        }
      }
    }
    return results;
  });
  for (size_t k = 0; k < out[0].size(); ++k) {
    ASSERT_OK(out[0][k]);
    for (int r = 1; r < n_; ++r) {
      ASSERT_OK(out[r][k]);
      EXPECT_EQ(out[r][k]->DebugString(), out[0][k]->DebugString());
      EXPECT_TRUE(out[r][k]->bytes() == out[0][k]->bytes())
          << "case " << k << ": rank " << r << " differs from rank 0";
    }
  }
  // And the sums are right to within rounding.
  for (size_t d = 0; d < dtypes.size(); ++d) {
    const size_t k = d * 6 + 3;  // numel 4099, sum
    std::vector<C> got = Elements(*out[0][k]);
    for (int64_t e = 0; e < 4099; e += 97) {
      C want = 0;
      for (int i = 0; i < n_; ++i)
        want += Elements(Noisy(dtypes[d], 4099, i))[e];
      const double tolerance =
          std::abs(want) * 0.02 + (dtypes[d] == DType::kBFloat16 ? 10 : 0.5);
      EXPECT_LE(std::abs(got[e] - want), tolerance)
          << DTypeName(dtypes[d]) << " element " << e;
    }
  }
}

TEST_P(RingTest, AllGatherMixedSizes) {
  // Rank sizes mix empty, direct (<= 64 bytes) and ring ones; and one round
  // where every rank's tensor is large.
  auto rows = [](int r, bool all_large) -> int64_t {
    if (all_large) return 700 + r;
    switch (r % 4) {
      case 0:
        return 0;
      case 1:
        return 900;
      case 2:
        return 3;  // 24 bytes of float32 × 2: direct
      default:
        return 2500;
    }
  };
  ExpectAllGather<DTypeCase>(
      BothWays({DType::kBool, DType::kInt32, DType::kFloat32, DType::kBFloat16,
                DType::kComplex128}),
      [&](const DTypeCase& c, int r) {  // flag: every rank's is large.
        return Sample(c.dtype, {rows(r, c.flag), 2}, Seed(r, 2));
      },
      [](const DTypeCase& c) {
        return absl::StrCat(DTypeName(c.dtype), c.flag ? " all large" : "");
      });
}

TEST_P(RingTest, AllGatherAlongAxisLarge) {
  // tf form along the last axis: rank 0's value is small (direct), the
  // others' large (ring).
  auto value = [](int r) {
    const int64_t cols = r == 0 ? 1 : 100 + 50 * r;
    return Value(Value::List{Sample(DType::kFloat64, {4, cols}, r),
                             Sample(DType::kInt8, {1, r + 1}, r)});
  };
  auto out = OnEveryRank<absl::StatusOr<Value>>(
      *job_,
      [&](WorkerImpl& w, int r) { return AllGather(World(w), value(r), -1); });
  std::vector<Tensor> big, small;
  for (int i = 0; i < n_; ++i) {
    big.push_back(value(i).as_list()[0].as_tensor());
    small.push_back(value(i).as_list()[1].as_tensor());
  }
  auto joined = [](const std::vector<Tensor>& parts) {
    Shape shape = parts[0].shape();
    shape[1] = 0;
    for (const Tensor& p : parts) shape[1] += p.dim(1);
    return MakeTensor(parts[0].dtype(), shape,
                      ::ferry::testing::ConcatElements(parts, 1));
  };
  for (int r = 0; r < n_; ++r) {
    ASSERT_OK(out[r]);
    EXPECT_EQ(*out[r], Value(Value::List{joined(big), joined(small)}))
        << "rank " << r;
  }
}

TEST_P(RingTest, ReduceScatterUnevenBlocks) {
  // Block b has b * 300 + (b % 2) elements: the first is empty, some are
  // one element (direct) or a few hundred (ring), so one op mixes both.
  auto numel = [](int b) -> int64_t {
    if (b == 0) return 0;
    if (b == 2) return 3;
    return b * 300 + (b % 2);
  };
  auto blocks = [&](DType dt, int r) {
    std::vector<Tensor> bs;
    for (int b = 0; b < n_; ++b)
      bs.push_back(Sample(dt, {numel(b)}, Seed(r, 10 + b)));
    return bs;
  };
  ExpectReduceScatterList({ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax,
                           ReduceOp::kAvg, ReduceOp::kBxor},
                          blocks);
}

TEST_P(RingTest, ReduceScatterSingleLargeTensor) {
  auto input = [&](int r) {
    return Sample(DType::kFloat32, {n_ * 64, 8}, Seed(r, 3));
  };
  auto out =
      OnEveryRank<absl::StatusOr<Value>>(*job_, [&](WorkerImpl& w, int r) {
        return RunCollective(World(w), "reduce_scatter", Value(input(r)),
                             Value(Value::Map{{"op", "sum"}}));
      });
  for (int r = 0; r < n_; ++r) {
    std::vector<std::vector<C>> ins;
    for (int i = 0; i < n_; ++i) {
      std::vector<C> e = Elements(input(i));
      ins.emplace_back(e.begin() + r * 512, e.begin() + (r + 1) * 512);
    }
    ASSERT_OK(out[r]);
    ASSERT_TRUE(out[r]->is_tensor());
    EXPECT_TRUE(SameTensor(
        out[r]->as_tensor(),
        MakeTensor(
            DType::kFloat32, {64, 8},
            ::ferry::testing::Reduce(ReduceOp::kSum, DType::kFloat32, ins))))
        << "rank " << r;
  }
}

TEST_P(RingTest, TreeBroadcastFromEverySource) {
  // Large values (tree) and a small one (direct), from every rank.
  auto large = [](int src) {
    return Value(Value::Map{
        {"t", Sample(DType::kComplex64, {3000}, src)},
        {"meta", Value::List{src, "large"}},
    });
  };
  using Results = std::vector<absl::StatusOr<Value>>;
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (int src = 0; src < n_; ++src) {
      results.push_back(
          Broadcast(World(w), r == src ? large(src) : Value(), src));
      results.push_back(
          Broadcast(World(w), r == src ? Value(src) : Value(), src));
    }
    return results;
  });
  for (int r = 0; r < n_; ++r) {
    for (int src = 0; src < n_; ++src) {
      ASSERT_OK(out[r][2 * src]);
      EXPECT_EQ(*out[r][2 * src], large(src)) << "rank " << r << " src " << src;
      ASSERT_OK(out[r][2 * src + 1]);
      EXPECT_EQ(*out[r][2 * src + 1], Value(src));
    }
  }
}

TEST_P(RingTest, LargeAllToAllSingleAndScatterGather) {
  // Multi-chunk messages through the pairwise exchange and the direct ones.
  auto splits = [&](int r) {
    std::vector<int64_t> s;
    for (int i = 0; i < n_; ++i) s.push_back(i == r ? 0 : 200 * (i + 1));
    return s;
  };
  auto input = [&](int r) {
    int64_t rows = 0;
    for (int64_t s : splits(r)) rows += s;
    return Sample(DType::kInt32, {rows, 4}, Seed(r, 4));
  };
  struct Out {
    absl::StatusOr<Tensor> a2a = absl::UnknownError("not run");
    absl::StatusOr<Value> scattered = absl::UnknownError("not run");
    absl::StatusOr<std::vector<Value>> gathered = absl::UnknownError("not run");
  };
  auto out = OnEveryRank<Out>(*job_, [&](WorkerImpl& w, int r) {
    Out o;
    o.a2a = AllToAllSingle(World(w), input(r), {}, splits(r));
    std::vector<Value> pieces;
    if (r == n_ - 1) {
      for (int i = 0; i < n_; ++i)
        pieces.push_back(Sample(DType::kFloat64, {500 + i}, i));
    }
    o.scattered = Scatter(World(w), pieces, n_ - 1);
    o.gathered = Gather(World(w), Value(input(r)), 0);
    return o;
  });
  for (int r = 0; r < n_; ++r) {
    std::vector<C> want;
    int64_t rows = 0;
    for (int i = 0; i < n_; ++i) {
      std::vector<C> e = Elements(input(i));
      int64_t at = 0;
      for (int j = 0; j < r; ++j) at += splits(i)[j];
      want.insert(want.end(), e.begin() + at * 4,
                  e.begin() + (at + splits(i)[r]) * 4);
      rows += splits(i)[r];
    }
    ASSERT_OK(out[r].a2a);
    EXPECT_TRUE(
        SameTensor(*out[r].a2a, MakeTensor(DType::kInt32, {rows, 4}, want)))
        << "rank " << r;
    ASSERT_OK(out[r].scattered);
    EXPECT_EQ(*out[r].scattered, Value(Sample(DType::kFloat64, {500 + r}, r)));
    ASSERT_OK(out[r].gathered);
    if (r == 0) {
      ASSERT_EQ(out[r].gathered->size(), static_cast<size_t>(n_));
      for (int i = 0; i < n_; ++i)
        EXPECT_EQ((*out[r].gathered)[i], Value(input(i)));
    } else {
      EXPECT_TRUE(out[r].gathered->empty());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, RingTest, ::testing::Values(1, 2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("world", info.param);
                         });

// A ring all_reduce cut into pieces (a pipeline of rings on steps of
// their own) gives what one ring gives: every op and dtype, pieces with
// fewer elements than ranks, and floats bit-identical on every rank.
TEST(PipelinedRingTest, PiecesReduceLikeOneRing) {
  for (int world : {2, 3, 4}) {
    LocalJob::Options options;
    options.configure = [](WorkerConfig& o) {
      o.collectives.direct_bytes = kDirectBytes;
      o.collectives.chunk_bytes = 1000;
      o.collectives.ring_piece_bytes = 64;  // 8 pieces for most cases.
    };
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                         LocalJob::Start(world, options));
    std::vector<ReduceCase> cases = EveryOpAndDType(1001);
    cases.push_back({DType::kInt64, ReduceOp::kSum, 17});  // 2 small pieces.
    auto out = OnEveryRank<Results>(*job, [&](WorkerImpl& w, int r) {
      Results results;
      for (const ReduceCase& c : cases) {
        results.push_back(
            AllReduce(w.collectives().world(), CaseInput(c, r, 2), c.op));
      }
      // Noisy float sums: every rank gets the same bits.
      results.push_back(AllReduce(w.collectives().world(),
                                  Noisy(DType::kFloat32, 4099, r),
                                  ReduceOp::kAvg));
      return results;
    });
    ExpectReduced(cases, 2, out);
    for (int r = 1; r < world; ++r) {
      ASSERT_OK(out[r].back());
      ASSERT_OK(out[0].back());
      EXPECT_TRUE(out[r].back()->bytes() == out[0].back()->bytes())
          << "world " << world << ": rank " << r << " differs from rank 0";
    }
  }
}

// A split all_reduce (each rank reduces one segment of every input, then
// the segments are exchanged) gives what the whole-input form gives, to
// the bit: every op and dtype, segments with fewer elements than ranks or
// none, and noisy float sums and averages.
TEST(SplitAllReduceTest, SegmentsReduceLikeWholeInputs) {
  const std::vector<DType> floats = {DType::kFloat16, DType::kBFloat16,
                                     DType::kFloat32, DType::kComplex128};
  for (int world : {3, 4, 5}) {
    std::vector<ReduceCase> cases = EveryOpAndDType(1001);
    cases.push_back({DType::kInt64, ReduceOp::kSum, 2});  // Empty segments.
    cases.push_back({DType::kFloat32, ReduceOp::kMax, 0});
    // The noisy ones, on a job that splits and on one that does not.
    std::vector<Results> noisy[2];
    for (bool split : {true, false}) {
      LocalJob::Options options;
      options.configure = [split](WorkerConfig& o) {
        o.collectives.split_bytes = split ? 1 : o.collectives.direct_bytes + 1;
      };
      ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                           LocalJob::Start(world, options));
      auto out = OnEveryRank<Results>(*job, [&](WorkerImpl& w, int r) {
        Results results;
        ProcessGroup& g = w.collectives().world();
        if (split) {
          for (const ReduceCase& c : cases)
            results.push_back(AllReduce(g, CaseInput(c, r, 3), c.op));
        }
        for (DType dt : floats) {
          for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
            Tensor t = *Noisy(dt, 4099, r).Reshape({1, 4099});
            results.push_back(AllReduce(g, t, op));
          }
        }
        return results;
      });
      const size_t first_noisy = split ? cases.size() : 0;
      if (split) {
        std::vector<Results> checked = out;
        for (Results& rs : checked) rs.resize(cases.size());
        ExpectReduced(cases, 3, checked);
      }
      for (Results& rs : out) {
        noisy[split].emplace_back(rs.begin() + first_noisy, rs.end());
      }
    }
    for (int r = 0; r < world; ++r) {
      for (size_t k = 0; k < noisy[1][r].size(); ++k) {
        ASSERT_OK(noisy[1][r][k]);
        ASSERT_OK(noisy[0][r][k]);
        EXPECT_EQ(noisy[1][r][k]->DebugString(), noisy[0][r][k]->DebugString());
        EXPECT_TRUE(noisy[1][r][k]->bytes() == noisy[0][r][k]->bytes())
            << "world " << world << " rank " << r << " case " << k;
      }
    }
  }
}

// A receive buffer far smaller than the messages in flight: senders are
// refused (RESOURCE_EXHAUSTED inside the transport) and retry until the
// receiver asks for the message; everything still arrives.
TEST(RingBackpressureTest, TinyReceiveBuffer) {
  LocalJob::Options options;
  options.configure = [](WorkerConfig& o) {
    o.collectives.direct_bytes = kDirectBytes;
    o.collectives.chunk_bytes = 512;
    // Room for one of the ~2.5 KB messages at a time.
    o.limits.max_mailbox_bytes = 3000;
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                       LocalJob::Start(4, options));
  auto input = [](int r) { return Sample(DType::kInt64, {4 * 300}, r); };
  auto out = OnEveryRank<Results>(*job, [&](WorkerImpl& w, int r) {
    Results results;
    ProcessGroup& g = w.collectives().world();
    for (int round = 0; round < 3; ++round) {
      results.push_back(AllToAllSingle(g, input(r)));
      results.push_back(AllReduce(g, input(r)));
    }
    return results;
  });
  std::vector<std::vector<C>> ins;
  for (int i = 0; i < 4; ++i) ins.push_back(Elements(input(i)));
  const Tensor sum =
      MakeTensor(DType::kInt64, {1200},
                 ::ferry::testing::Reduce(ReduceOp::kSum, DType::kInt64, ins));
  for (int r = 0; r < 4; ++r) {
    for (int round = 0; round < 3; ++round) {
      ASSERT_OK(out[r][2 * round]);
      std::vector<C> want;
      for (int i = 0; i < 4; ++i)
        want.insert(want.end(), ins[i].begin() + r * 300,
                    ins[i].begin() + (r + 1) * 300);
      EXPECT_TRUE(SameTensor(*out[r][2 * round],
                             MakeTensor(DType::kInt64, {1200}, want)));
      ASSERT_OK(out[r][2 * round + 1]);
      EXPECT_TRUE(SameTensor(*out[r][2 * round + 1], sum));
    }
    EXPECT_EQ(job->worker(r).collectives().mailbox().held_bytes(), 0)
        << "rank " << r;
  }
}

// A message over --max_mailbox_mb is refused by its receiver for good: the
// op fails at once on every rank, naming the flag (before, both ranks
// waited for each other's message until the op's deadline and then
// reported DEADLINE_EXCEEDED, "every member joined"). The group and the
// mailbox are fine afterwards.
TEST(RingLimitsTest, MessageOverTheMailboxLimitFailsTheOpNamingIt) {
  LocalJob::Options options;
  options.configure = [](WorkerConfig& o) {
    o.limits.max_mailbox_bytes = 1 << 20;
  };
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                       LocalJob::Start(2, options));
  CollectiveOptions slow;
  slow.timeout = absl::Minutes(5);
  auto out = OnEveryRank<Results>(*job, [&](WorkerImpl& w, int r) {
    ProcessGroup& g = w.collectives().world();
    Results results;
    // 4 MiB to each rank, one message.
    results.push_back(AllToAllSingle(
        g, *Tensor::Zeros(DType::kUInt8, {8 << 20}), {}, {}, slow));
    results.push_back(AllReduce(g, Sample(DType::kInt64, {4}, r)));
    return results;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(out[r][0].status(),
                StatusIs(absl::StatusCode::kResourceExhausted,
                         HasSubstr("--max_mailbox_mb")))
        << "rank " << r;
    EXPECT_TRUE(out[r][1].ok()) << "rank " << r << ": " << out[r][1].status();
    EXPECT_EQ(job->worker(r).collectives().mailbox().held_bytes(), 0)
        << "rank " << r;
  }
}

}  // namespace
}  // namespace ferry
