// Every collective on world sizes 1 to 5 over all 12 dtypes, with uneven
// and zero-size tensors and splits, against results computed in the test.
// Payloads are small here: the direct algorithms (ring_test.cc covers the
// ring and tree paths).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/collectives.h"
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
using ::ferry::testing::Where;

// One job per world size (SharedJobTest), direct algorithms.
class BreadthTest : public ::ferry::testing::SharedJobTest {};

// Seeds that differ per rank and per use, so no two inputs are alike.
int64_t Seed(int rank, int which) { return rank * 101 + which * 17; }

TEST_P(BreadthTest, AllToAll) {
  // Rank r sends rank i a [(r + 2i) % 3, 2] block: shapes differ per pair,
  // some are empty.
  auto block = [](DType dt, int r, int i) {
    return Sample(dt, {(r + 2 * i) % 3, 2}, Seed(r, i));
  };
  using Results = std::vector<absl::StatusOr<std::vector<Tensor>>>;
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (DType dt : kAllDTypes) {
      std::vector<Tensor> in;
      for (int i = 0; i < n_; ++i) in.push_back(block(dt, r, i));
      results.push_back(AllToAll(World(w), in));
    }
    return results;
  });
  for (int r = 0; r < n_; ++r) {
    for (size_t d = 0; d < std::size(kAllDTypes); ++d) {
      const DType dt = kAllDTypes[d];
      ASSERT_OK(out[r][d]);
      ASSERT_EQ(out[r][d]->size(), static_cast<size_t>(n_));
      for (int i = 0; i < n_; ++i) {
        EXPECT_TRUE(SameTensor((*out[r][d])[i], block(dt, i, r)))
            << Where(dt, r) << " from rank " << i;
      }
    }
  }
}

TEST_P(BreadthTest, AllToAllSingle) {
  // Uneven splits with zeros: rank r sends (r + i) % 3 rows to rank i.
  auto splits = [&](int r) {
    std::vector<int64_t> s;
    for (int i = 0; i < n_; ++i) s.push_back((r + i) % 3);
    return s;
  };
  auto rows = [&](int r) {
    int64_t total = 0;
    for (int64_t s : splits(r)) total += s;
    return total;
  };
  auto input = [&](DType dt, int r) {
    return Sample(dt, {rows(r), 3}, Seed(r, 1));
  };
  // What rank r should get: rank i's rows for r, in source order.
  auto expected = [&](DType dt, int r) {
    std::vector<C> want;
    int64_t total = 0;
    for (int i = 0; i < n_; ++i) {
      std::vector<C> e = Elements(input(dt, i));
      int64_t at = 0;
      for (int j = 0; j < r; ++j) at += splits(i)[j];
      const int64_t count = splits(i)[r];
      want.insert(want.end(), e.begin() + at * 3, e.begin() + (at + count) * 3);
      total += count;
    }
    return MakeTensor(dt, {total, 3}, want);
  };
  enum Variant { kWithOutputSplits, kWithoutOutputSplits, kEven, kEmpty };
  for (Variant v : {kWithOutputSplits, kWithoutOutputSplits, kEven, kEmpty}) {
    SCOPED_TRACE(absl::StrCat("variant ", v));
    using Results = std::vector<absl::StatusOr<Tensor>>;
    auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
      Results results;
      for (DType dt : kAllDTypes) {
        if (v == kEven) {
          // Empty splits: 2 rows to each rank.
          results.push_back(
              AllToAllSingle(World(w), Sample(dt, {2 * n_, 2}, Seed(r, 2))));
        } else if (v == kEmpty) {
          // Zero rows, zero-size splits (and also even splitting of 0).
          results.push_back(AllToAllSingle(World(w), Sample(dt, {0, 4}, 0),
                                           std::vector<int64_t>(n_, 0),
                                           std::vector<int64_t>(n_, 0)));
        } else {
          std::vector<int64_t> output_splits;
          if (v == kWithOutputSplits) {
            for (int i = 0; i < n_; ++i) output_splits.push_back(splits(i)[r]);
          }
          results.push_back(
              AllToAllSingle(World(w), input(dt, r), output_splits, splits(r)));
        }
      }
      return results;
    });
    for (int r = 0; r < n_; ++r) {
      for (size_t d = 0; d < std::size(kAllDTypes); ++d) {
        const DType dt = kAllDTypes[d];
        ASSERT_OK(out[r][d]);
        Tensor want;
        if (v == kEven) {
          std::vector<C> e;
          for (int i = 0; i < n_; ++i) {
            std::vector<C> from = Elements(Sample(dt, {2 * n_, 2}, Seed(i, 2)));
            e.insert(e.end(), from.begin() + r * 4, from.begin() + r * 4 + 4);
          }
          want = MakeTensor(dt, {2 * n_, 2}, e);
        } else if (v == kEmpty) {
          want = MakeTensor(dt, {0, 4}, {});
        } else {
          want = expected(dt, r);
        }
        EXPECT_TRUE(SameTensor(*out[r][d], want)) << Where(dt, r);
      }
    }
  }
}

TEST_P(BreadthTest, AllGatherList) {
  // Shapes differ per rank ([r % 3, 2]; some empty), and a 0-d tensor.
  ExpectAllGather<DTypeCase>(
      BothWays(kAllDTypes),
      [](const DTypeCase& c, int r) {  // flag: 0-d.
        return c.flag ? Sample(c.dtype, {}, Seed(r, 3))
                      : Sample(c.dtype, {r % 3, 2}, Seed(r, 4));
      },
      [](const DTypeCase& c) {
        return absl::StrCat(DTypeName(c.dtype), c.flag ? " 0-d" : "");
      });
}

TEST_P(BreadthTest, AllGatherAlongAxis) {
  // A nested structure: {"a": [X, Y], "b": {"c": Z}} with sizes along the
  // axis varying per rank (zero included); the other dims equal.
  struct Leaves {
    Tensor x, y, z;
  };
  auto leaves = [](DType dt, int r, int axis) {
    Leaves l;
    if (axis == 0) {
      l.x = Sample(dt, {r % 3, 2}, Seed(r, 5));
      l.y = Sample(dt, {1, 2, 2}, Seed(r, 6));
      l.z = Sample(dt, {r + 1}, Seed(r, 7));
    } else {  // axis 1 (also given as -1: every leaf has rank 2)
      l.x = Sample(dt, {2, r % 3}, Seed(r, 5));
      l.y = Sample(dt, {3, 1}, Seed(r, 6));
      l.z = Sample(dt, {1, r + 1}, Seed(r, 7));
    }
    return l;
  };
  auto nest = [](const Tensor& x, const Tensor& y, const Tensor& z) {
    return Value(
        Value::Map{{"a", Value::List{x, y}}, {"b", Value::Map{{"c", z}}}});
  };
  const std::vector<int> axes = {0, 1, -1};
  using Results = std::vector<absl::StatusOr<Value>>;
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (DType dt : kAllDTypes) {
      for (int axis : axes) {
        Leaves l = leaves(dt, r, axis == 0 ? 0 : 1);
        results.push_back(AllGather(World(w), nest(l.x, l.y, l.z), axis));
      }
      // A single tensor.
      results.push_back(
          AllGather(World(w), Value(Sample(dt, {r % 2, 3}, Seed(r, 8))), 0));
    }
    return results;
  });
  for (int r = 0; r < n_; ++r) {
    size_t k = 0;
    for (DType dt : kAllDTypes) {
      for (int axis : axes) {
        const int a = axis == 0 ? 0 : 1;
        std::vector<Tensor> xs, ys, zs;
        for (int i = 0; i < n_; ++i) {
          Leaves l = leaves(dt, i, a);
          xs.push_back(l.x);
          ys.push_back(l.y);
          zs.push_back(l.z);
        }
        auto joined = [&](const std::vector<Tensor>& parts) {
          Shape shape = parts[0].shape();
          shape[a] = 0;
          for (const Tensor& p : parts) shape[a] += p.dim(a);
          return MakeTensor(dt, shape,
                            ::ferry::testing::ConcatElements(parts, a));
        };
        const absl::StatusOr<Value>& got = out[r][k++];
        ASSERT_OK(got);
        const Value want = nest(joined(xs), joined(ys), joined(zs));
        EXPECT_EQ(*got, want) << Where(dt, r) << " axis " << axis << ": "
                              << ToJson(*got) << " want " << ToJson(want);
      }
      std::vector<Tensor> parts;
      for (int i = 0; i < n_; ++i)
        parts.push_back(Sample(dt, {i % 2, 3}, Seed(i, 8)));
      int64_t rows = 0;
      for (const Tensor& p : parts) rows += p.dim(0);
      const absl::StatusOr<Value>& got = out[r][k++];
      ASSERT_OK(got);
      ASSERT_TRUE(got->is_tensor()) << ToJson(*got);
      EXPECT_TRUE(
          SameTensor(got->as_tensor(),
                     MakeTensor(dt, {rows, 3},
                                ::ferry::testing::ConcatElements(parts, 0))))
          << Where(dt, r);
    }
  }
}

TEST_P(BreadthTest, AllReduceEveryOp) {
  // Shapes: an ordinary one, zero-size ones, and 0-d.
  const std::vector<Shape> shapes = {{3, 2}, {0}, {2, 0, 3}, {}};
  struct Case {
    DType dtype;
    ReduceOp op;
    Shape shape;
  };
  std::vector<Case> cases;
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : ::ferry::testing::kAllReduceOps) {
      if (!::ferry::testing::Applies(op, dt)) continue;
      for (const Shape& s : shapes) {
        // Zero-size and 0-d once per dtype is enough.
        if (!s.empty() && s[0] == 3) {
          cases.push_back({dt, op, s});
        } else if (op == ReduceOp::kSum || op == ReduceOp::kProd) {
          cases.push_back({dt, op, s});
        }
      }
    }
  }
  ExpectAllReduce<Case>(
      cases,
      [](const Case& c, int r) { return Sample(c.dtype, c.shape, Seed(r, 9)); },
      [](const Case& c) {
        return absl::StrCat(DTypeName(c.dtype), " op ", ReduceOpName(c.op),
                            " shape ", ShapeString(c.shape));
      });
}

TEST_P(BreadthTest, ReduceScatterList) {
  // Block b has shape [b % 3, 2] (uneven, some empty): rank r gets the
  // reduction of every rank's block r.
  auto blocks = [&](DType dt, int r) {
    std::vector<Tensor> bs;
    for (int b = 0; b < n_; ++b)
      bs.push_back(Sample(dt, {(b + 1) % 3, 2}, Seed(r, 10 + b)));
    return bs;
  };
  ExpectReduceScatterList({std::begin(::ferry::testing::kAllReduceOps),
                           std::end(::ferry::testing::kAllReduceOps)},
                          blocks);
}

TEST_P(BreadthTest, ReduceScatterSingleTensor) {
  // One [2n, 3] tensor, cut evenly on dim 0 (and a [0, 3] one: zero-size
  // blocks).
  struct Case {
    DType dtype;
    ReduceOp op;
    int64_t rows_per_rank;
  };
  std::vector<Case> cases;
  for (DType dt : kAllDTypes) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
      if (::ferry::testing::Applies(op, dt)) cases.push_back({dt, op, 2});
    }
    cases.push_back({dt, ReduceOp::kSum, 0});
  }
  auto input = [&](const Case& c, int r) {
    return Sample(c.dtype, {c.rows_per_rank * n_, 3}, Seed(r, 11));
  };
  using Results = std::vector<absl::StatusOr<Value>>;
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (const Case& c : cases) {
      results.push_back(RunCollective(
          World(w), "reduce_scatter", Value(input(c, r)),
          Value(Value::Map{{"op", std::string(ReduceOpName(c.op))}})));
    }
    return results;
  });
  for (size_t k = 0; k < cases.size(); ++k) {
    const Case& c = cases[k];
    const int64_t block = c.rows_per_rank * 3;
    for (int r = 0; r < n_; ++r) {
      std::vector<std::vector<C>> ins;
      for (int i = 0; i < n_; ++i) {
        std::vector<C> e = Elements(input(c, i));
        ins.emplace_back(e.begin() + r * block, e.begin() + (r + 1) * block);
      }
      const Tensor want =
          MakeTensor(c.dtype, {c.rows_per_rank, 3},
                     ::ferry::testing::Reduce(c.op, c.dtype, ins));
      ASSERT_OK(out[r][k]);
      ASSERT_TRUE(out[r][k]->is_tensor());
      EXPECT_TRUE(SameTensor(out[r][k]->as_tensor(), want))
          << Where(c.dtype, r) << " op " << ReduceOpName(c.op);
    }
  }
}

TEST_P(BreadthTest, Broadcast) {
  // From every src: a tensor of each dtype (zero-size for one dtype), and a
  // nested value. The others pass something else, which is ignored.
  auto value = [](DType dt, int src) {
    return Value(Sample(dt, {dt == DType::kInt16 ? 0 : 2, 3}, Seed(src, 12)));
  };
  auto nested = [](int src) {
    return Value(Value::Map{{"src", src},
                            {"list", Value::List{"x", 1.5, nullptr}},
                            {"t", Sample(DType::kFloat32, {2}, src)}});
  };
  using Results = std::vector<absl::StatusOr<Value>>;
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (int src = 0; src < n_; ++src) {
      for (DType dt : kAllDTypes) {
        results.push_back(Broadcast(
            World(w), r == src ? value(dt, src) : Value("ignored"), src));
      }
      results.push_back(
          Broadcast(World(w), r == src ? nested(src) : Value(), src));
    }
    return results;
  });
  for (int r = 0; r < n_; ++r) {
    size_t k = 0;
    for (int src = 0; src < n_; ++src) {
      for (DType dt : kAllDTypes) {
        const absl::StatusOr<Value>& got = out[r][k++];
        ASSERT_OK(got);
        ASSERT_TRUE(got->is_tensor()) << ToJson(*got);
        EXPECT_TRUE(SameTensor(got->as_tensor(), value(dt, src).as_tensor()))
            << Where(dt, r) << " src " << src;
      }
      const absl::StatusOr<Value>& got = out[r][k++];
      ASSERT_OK(got);
      EXPECT_EQ(*got, nested(src)) << "rank " << r << " src " << src;
    }
  }
}

TEST_P(BreadthTest, Scatter) {
  // Rank src's values[i] on rank i: tensors of varying shape (some empty),
  // and plain values.
  auto piece = [](DType dt, int src, int i) {
    return Value(Sample(dt, {(src + i) % 3, 2}, Seed(src, 20 + i)));
  };
  using Results = std::vector<absl::StatusOr<Value>>;
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (int src = 0; src < n_; ++src) {
      for (DType dt : kAllDTypes) {
        std::vector<Value> values;
        if (r == src) {
          for (int i = 0; i < n_; ++i) values.push_back(piece(dt, src, i));
        }
        results.push_back(Scatter(World(w), values, src));
      }
      std::vector<Value> plain;
      if (r == src) {
        for (int i = 0; i < n_; ++i)
          plain.push_back(Value(absl::StrCat("to ", i, " from ", src)));
      }
      results.push_back(Scatter(World(w), plain, src));
    }
    return results;
  });
  for (int r = 0; r < n_; ++r) {
    size_t k = 0;
    for (int src = 0; src < n_; ++src) {
      for (DType dt : kAllDTypes) {
        const absl::StatusOr<Value>& got = out[r][k++];
        ASSERT_OK(got);
        ASSERT_TRUE(got->is_tensor()) << ToJson(*got);
        EXPECT_TRUE(SameTensor(got->as_tensor(), piece(dt, src, r).as_tensor()))
            << Where(dt, r) << " src " << src;
      }
      const absl::StatusOr<Value>& got = out[r][k++];
      ASSERT_OK(got);
      EXPECT_EQ(*got, Value(absl::StrCat("to ", r, " from ", src)));
    }
  }
}

TEST_P(BreadthTest, Gather) {
  auto mine = [](DType dt, int r) {
    return Value(Sample(dt, {r % 3, 2}, Seed(r, 30)));
  };
  using Results = std::vector<absl::StatusOr<std::vector<Value>>>;
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    for (int dst = 0; dst < n_; ++dst) {
      for (DType dt : kAllDTypes)
        results.push_back(Gather(World(w), mine(dt, r), dst));
      results.push_back(Gather(World(w), Value(Value::List{r, "x"}), dst));
    }
    return results;
  });
  for (int r = 0; r < n_; ++r) {
    size_t k = 0;
    for (int dst = 0; dst < n_; ++dst) {
      for (DType dt : kAllDTypes) {
        const absl::StatusOr<std::vector<Value>>& got = out[r][k++];
        ASSERT_OK(got);
        if (r != dst) {
          EXPECT_TRUE(got->empty()) << Where(dt, r) << " dst " << dst;
          continue;
        }
        ASSERT_EQ(got->size(), static_cast<size_t>(n_));
        for (int i = 0; i < n_; ++i) {
          ASSERT_TRUE((*got)[i].is_tensor());
          EXPECT_TRUE(
              SameTensor((*got)[i].as_tensor(), mine(dt, i).as_tensor()))
              << Where(dt, r) << " from rank " << i;
        }
      }
      const absl::StatusOr<std::vector<Value>>& got = out[r][k++];
      ASSERT_OK(got);
      if (r == dst) {
        ASSERT_EQ(got->size(), static_cast<size_t>(n_));
        for (int i = 0; i < n_; ++i)
          EXPECT_EQ((*got)[i], Value(Value::List{i, "x"}));
      } else {
        EXPECT_TRUE(got->empty());
      }
    }
  }
}

TEST_P(BreadthTest, Barrier) {
  auto out =
      OnEveryRank<std::vector<absl::Status>>(*job_, [&](WorkerImpl& w, int) {
        std::vector<absl::Status> results;
        for (int i = 0; i < 5; ++i) results.push_back(Barrier(World(w)));
        return results;
      });
  for (int r = 0; r < n_; ++r) {
    for (const absl::Status& s : out[r]) EXPECT_OK(s);
  }
}

// All collectives back to back on one group, interleaved: every kind of op
// leaves the group ready for any other.
TEST_P(BreadthTest, Interleaved) {
  using Results = std::vector<absl::Status>;
  std::vector<Tensor> sums(n_);
  auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
    Results results;
    ProcessGroup& g = World(w);
    for (int round = 0; round < 3; ++round) {
      Tensor t = Sample(DType::kInt64, {4}, Seed(r, round));
      results.push_back(Barrier(g));
      results.push_back(Broadcast(g, Value(t), round % n_).status());
      results.push_back(AllGather(g, t).status());
      absl::StatusOr<Tensor> sum = AllReduce(g, t);
      results.push_back(sum.status());
      if (sum.ok()) sums[r] = *sum;
      results.push_back(
          AllToAllSingle(g, Sample(DType::kInt8, {n_}, r)).status());
      results.push_back(Gather(g, Value(r), round % n_).status());
    }
    return results;
  });
  for (int r = 0; r < n_; ++r) {
    for (const absl::Status& s : out[r])
      EXPECT_TRUE(s.ok()) << "rank " << r << ": " << s;
    EXPECT_EQ(sums[r], sums[0]);
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, BreadthTest,
                         ::testing::Values(1, 2, 3, 4, 5),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return absl::StrCat("world", info.param);
                         });

}  // namespace
}  // namespace ferry
