// Helpers for the collectives' in-process tests: tensors built from and
// read back as complex doubles (so expected results are computed in the
// test, independently of collectives/), sample values exact in every dtype,
// reductions done the slow obvious way, and running code on every rank.
#ifndef FERRY_TESTS_COLLECTIVES_COLLECTIVE_TESTING_H_
#define FERRY_TESTS_COLLECTIVES_COLLECTIVE_TESTING_H_

#include <complex>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/collectives.h"
#include "gtest/gtest.h"
#include "rpc/value/dtype.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_builder.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace testing {

using C = std::complex<double>;

// A tensor of `dtype` and `shape` holding `values` (row-major), each
// converted the plain way: bool is "non-zero", integers take the real part,
// complex keeps both parts.
inline Tensor MakeTensor(DType dtype, Shape shape,
                         const std::vector<C>& values) {
  TensorBuilder b = *TensorBuilder::Create(dtype, std::move(shape));
  EXPECT_EQ(b.numel(), static_cast<int64_t>(values.size()));
  VisitDType(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* out = b.template data_as<T>();
    for (int64_t k = 0; k < b.numel(); ++k) {
      const C& x = values[k];
      if constexpr (std::is_same<T, bool>::value) {
        out[k] = x != C(0);
      } else if constexpr (std::is_integral<T>::value) {
        out[k] = static_cast<T>(static_cast<int64_t>(x.real()));
      } else if constexpr (std::is_same<T, Float16>::value ||
                           std::is_same<T, BFloat16>::value) {
        out[k] = T(static_cast<float>(x.real()));
      } else if constexpr (std::is_floating_point<T>::value) {
        out[k] = static_cast<T>(x.real());
      } else {
        using R = typename T::value_type;
        out[k] = T(static_cast<R>(x.real()), static_cast<R>(x.imag()));
      }
    }
  });
  return std::move(b).Build();
}

// The elements of `t` as complex doubles.
inline std::vector<C> Elements(const Tensor& t) {
  std::vector<C> out(t.numel());
  VisitDType(t.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = t.data_as<T>();
    for (int64_t k = 0; k < t.numel(); ++k) {
      if constexpr (std::is_same<T, bool>::value) {
        out[k] = in[k] ? 1.0 : 0.0;
      } else if constexpr (std::is_same<T, Float16>::value ||
                           std::is_same<T, BFloat16>::value) {
        out[k] = static_cast<double>(static_cast<float>(in[k]));
      } else if constexpr (std::is_arithmetic<T>::value) {
        out[k] = static_cast<double>(in[k]);
      } else {
        out[k] = C(in[k].real(), in[k].imag());
      }
    }
  });
  return out;
}

// Value number `seed` of a sample in `dtype`'s family; small enough that
// sums and products of five of them are exact in every dtype (bfloat16 and
// int8 included), varied enough that bitwise ops and orderings matter.
inline C SampleValue(DType dtype, int64_t seed) {
  const int64_t s = seed < 0 ? -seed : seed;
  switch (KindOf(dtype)) {
    case DTypeKind::kBool:
      return (s * 7 / 3) % 2 == 1 ? 1.0 : 0.0;
    case DTypeKind::kInteger:
      if (dtype == DType::kUInt8) return static_cast<double>(s % 3);
      return static_cast<double>((s * 3) % 5 - 2);
    case DTypeKind::kFloating:
      return static_cast<double>((s * 7) % 9 - 4) * 0.5;
    case DTypeKind::kComplex:
      return C(static_cast<double>(s % 5 - 2),
               static_cast<double>((s * 3 + 1) % 5 - 2));
  }
  return 0;
}

// A sample tensor: element k is SampleValue(dtype, seed + k).
inline Tensor Sample(DType dtype, Shape shape, int64_t seed) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  std::vector<C> v(numel);
  for (int64_t k = 0; k < numel; ++k) v[k] = SampleValue(dtype, seed + k);
  return MakeTensor(dtype, std::move(shape), v);
}

// Whether `op` applies to `dtype` (docs/DESIGN.md: no min/max on complex,
// bitwise ops on integers and bool only, avg on floating and complex).
inline bool Applies(ReduceOp op, DType dtype) {
  const DTypeKind kind = KindOf(dtype);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kProd:
      return true;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return kind != DTypeKind::kComplex;
    case ReduceOp::kAvg:
      return kind == DTypeKind::kFloating || kind == DTypeKind::kComplex;
    case ReduceOp::kBand:
    case ReduceOp::kBor:
    case ReduceOp::kBxor:
      return kind == DTypeKind::kBool || kind == DTypeKind::kInteger;
  }
  return false;
}

inline constexpr ReduceOp kAllReduceOps[] = {
    ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMin, ReduceOp::kMax,
    ReduceOp::kAvg, ReduceOp::kBand, ReduceOp::kBor, ReduceOp::kBxor};

// The elementwise reduction of `inputs` (one per rank, same numel), in
// `dtype`'s semantics: bool sum/max/bor are "or", prod/min/band "and", bxor
// parity; integers in int64; the rest in double.
inline std::vector<C> Reduce(ReduceOp op, DType dtype,
                             const std::vector<std::vector<C>>& inputs) {
  std::vector<C> out = inputs.at(0);
  const DTypeKind kind = KindOf(dtype);
  for (size_t k = 0; k < out.size(); ++k) {
    if (kind == DTypeKind::kBool || kind == DTypeKind::kInteger) {
      int64_t acc = static_cast<int64_t>(inputs[0][k].real());
      for (size_t r = 1; r < inputs.size(); ++r) {
        const int64_t x = static_cast<int64_t>(inputs[r][k].real());
        switch (op) {
          case ReduceOp::kSum:
            acc = kind == DTypeKind::kBool ? (acc || x) : acc + x;
            break;
          case ReduceOp::kProd:
            acc *= x;
            break;
          case ReduceOp::kMin:
            acc = std::min(acc, x);
            break;
          case ReduceOp::kMax:
            acc = std::max(acc, x);
            break;
          case ReduceOp::kBand:
            acc &= x;
            break;
          case ReduceOp::kBor:
            acc |= x;
            break;
          case ReduceOp::kBxor:
            acc ^= x;
            break;
          case ReduceOp::kAvg:
            ADD_FAILURE() << "avg on an integer dtype";
            break;
        }
      }
      out[k] = static_cast<double>(acc);
      continue;
    }
    C acc = inputs[0][k];
    for (size_t r = 1; r < inputs.size(); ++r) {
      const C x = inputs[r][k];
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAvg:
          acc += x;
          break;
        case ReduceOp::kProd:
          acc *= x;
          break;
        case ReduceOp::kMin:
          acc = std::min(acc.real(), x.real());
          break;
        case ReduceOp::kMax:
          acc = std::max(acc.real(), x.real());
          break;
        default:
          ADD_FAILURE() << "bitwise op on " << DTypeName(dtype);
      }
    }
    if (op == ReduceOp::kAvg) acc /= static_cast<double>(inputs.size());
    out[k] = acc;
  }
  return out;
}

// Same dtype, shape and element values (-0.0 equals 0.0).
inline ::testing::AssertionResult SameTensor(const Tensor& got,
                                             const Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return ::testing::AssertionFailure()
           << "got " << got.DebugString() << ", want " << want.DebugString();
  }
  std::vector<C> g = Elements(got), w = Elements(want);
  for (size_t k = 0; k < g.size(); ++k) {
    if (g[k] != w[k]) {
      return ::testing::AssertionFailure()
             << got.DebugString() << " element " << k << " is " << g[k]
             << ", want " << w[k];
    }
  }
  return ::testing::AssertionSuccess();
}

// What all_reduce by `op` gives every rank of `n` when rank i gives
// input(i) (all of input(0)'s dtype and shape).
inline Tensor AllReduced(ReduceOp op, int n,
                         const std::function<Tensor(int)>& input) {
  std::vector<std::vector<C>> ins;
  for (int i = 0; i < n; ++i) ins.push_back(Elements(input(i)));
  const Tensor first = input(0);
  return MakeTensor(first.dtype(), first.shape(),
                    Reduce(op, first.dtype(), ins));
}

// Whether `got`, one rank's all_gather (list form) among `n` ranks, holds
// input(i) from each rank i.
inline ::testing::AssertionResult Gathered(
    const absl::StatusOr<std::vector<Tensor>>& got, int n,
    const std::function<Tensor(int)>& input) {
  if (!got.ok()) return ::testing::AssertionFailure() << got.status();
  if (got->size() != static_cast<size_t>(n)) {
    return ::testing::AssertionFailure()
           << got->size() << " tensors from " << n << " ranks";
  }
  for (int i = 0; i < n; ++i) {
    ::testing::AssertionResult same = SameTensor((*got)[i], input(i));
    if (!same) {
      return ::testing::AssertionFailure()
             << "from rank " << i << ": " << same.message();
    }
  }
  return ::testing::AssertionSuccess();
}

// The elements of `parts` (shapes equal except along `axis`) concatenated
// along `axis`, computed element by element.
inline std::vector<C> ConcatElements(const std::vector<Tensor>& parts,
                                     int axis) {
  std::vector<C> out;
  const Shape& s0 = parts.at(0).shape();
  int64_t outer = 1;
  for (int d = 0; d < axis; ++d) outer *= s0[d];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < s0.size(); ++d) inner *= s0[d];
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor& p : parts) {
      std::vector<C> e = Elements(p);
      const int64_t chunk = p.dim(axis) * inner;
      out.insert(out.end(), e.begin() + o * chunk, e.begin() + (o + 1) * chunk);
    }
  }
  return out;
}

// A case of a test that tries each dtype two ways (`flag`: 0-d, all
// large, …), and the cases of `dtypes`: each without, then with the flag.
struct DTypeCase {
  DType dtype;
  bool flag;
};
inline std::vector<DTypeCase> BothWays(absl::Span<const DType> dtypes) {
  std::vector<DTypeCase> cases;
  for (DType dt : dtypes) {
    for (bool flag : {false, true}) cases.push_back({dt, flag});
  }
  return cases;
}

// fn(worker, rank) on every rank of `job` concurrently; results by rank.
template <typename T>
std::vector<T> OnEveryRank(LocalJob& job,
                           const std::function<T(WorkerImpl&, int)>& fn) {
  std::vector<T> results(job.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < job.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = fn(job.worker(r), r); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

inline std::string Where(DType dtype, int rank) {
  return absl::StrCat(DTypeName(dtype), " on rank ", rank);
}

// One job per world size (the test parameter), shared by the tests of that
// size: every test calls the same collectives on every rank, so the world
// group stays in step from one test to the next.
class SharedJobTest : public ::testing::TestWithParam<int> {
 protected:
  static void TearDownTestSuite() { Jobs().clear(); }

  // Adjusts the workers' options before the job starts.
  virtual void Configure(WorkerConfig& /*options*/) {}

  void SetUp() override {
    n_ = GetParam();
    std::unique_ptr<LocalJob>& slot = Jobs()[n_];
    if (slot == nullptr) {
      LocalJob::Options options;
      options.configure = [this](WorkerConfig& o) { Configure(o); };
      absl::StatusOr<std::unique_ptr<LocalJob>> job =
          LocalJob::Start(n_, options);
      ASSERT_TRUE(job.ok()) << job.status();
      slot = *std::move(job);
    }
    job_ = slot.get();
  }

  ProcessGroup& World(WorkerImpl& w) { return w.collectives().world(); }

  // Rank r's blocks (one per rank) for a dtype.
  using Blocks = std::function<std::vector<Tensor>(DType, int rank)>;

  // ReduceScatter of `blocks(dtype, r)` on every rank r, for every dtype
  // and each of `ops` that applies to it: rank r must get the reduction of
  // every rank's block r (shaped like it).
  void ExpectReduceScatterList(const std::vector<ReduceOp>& ops,
                               const Blocks& blocks) {
    struct Case {
      DType dtype;
      ReduceOp op;
    };
    std::vector<Case> cases;
    for (DType dt : kAllDTypes) {
      for (ReduceOp op : ops) {
        if (Applies(op, dt)) cases.push_back({dt, op});
      }
    }
    using Results = std::vector<absl::StatusOr<Tensor>>;
    auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
      Results results;
      for (const Case& c : cases)
        results.push_back(ReduceScatter(World(w), blocks(c.dtype, r), c.op));
      return results;
    });
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      for (int r = 0; r < n_; ++r) {
        std::vector<std::vector<C>> ins;
        for (int i = 0; i < n_; ++i)
          ins.push_back(Elements(blocks(c.dtype, i)[r]));
        const Tensor want = MakeTensor(c.dtype, blocks(c.dtype, 0)[r].shape(),
                                       Reduce(c.op, c.dtype, ins));
        ASSERT_TRUE(out[r][k].ok()) << out[r][k].status();
        EXPECT_TRUE(SameTensor(*out[r][k], want))
            << Where(c.dtype, r) << " op " << ReduceOpName(c.op);
      }
    }
  }

  // AllReduce of every case on every rank r at once (c.op of input(c, r)):
  // each rank must get the reduction of every rank's input (AllReduced),
  // with the same bits as rank 0. `name(c)` says which case failed.
  template <typename Case>
  void ExpectAllReduce(const std::vector<Case>& cases,
                       const std::function<Tensor(const Case&, int)>& input,
                       const std::function<std::string(const Case&)>& name) {
    using Results = std::vector<absl::StatusOr<Tensor>>;
    auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
      Results results;
      for (const Case& c : cases) {
        results.push_back(AllReduce(World(w), input(c, r), c.op));
      }
      return results;
    });
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      const Tensor want =
          AllReduced(c.op, n_, [&](int i) { return input(c, i); });
      for (int r = 0; r < n_; ++r) {
        ASSERT_TRUE(out[r][k].ok())
            << name(c) << " on rank " << r << ": " << out[r][k].status();
        EXPECT_TRUE(SameTensor(*out[r][k], want))
            << name(c) << " on rank " << r;
        EXPECT_EQ(out[r][k]->bytes(), out[0][k]->bytes())
            << name(c) << " on rank " << r << ": not rank 0's bits";
      }
    }
  }

  // AllGather (list form) of every case on every rank r at once
  // (input(c, r)): each rank must get every rank's input (Gathered).
  template <typename Case>
  void ExpectAllGather(const std::vector<Case>& cases,
                       const std::function<Tensor(const Case&, int)>& input,
                       const std::function<std::string(const Case&)>& name) {
    using Results = std::vector<absl::StatusOr<std::vector<Tensor>>>;
    auto out = OnEveryRank<Results>(*job_, [&](WorkerImpl& w, int r) {
      Results results;
      for (const Case& c : cases) {
        results.push_back(AllGather(World(w), input(c, r)));
      }
      return results;
    });
    for (size_t k = 0; k < cases.size(); ++k) {
      for (int r = 0; r < n_; ++r) {
        EXPECT_TRUE(
            Gathered(out[r][k], n_, [&](int i) { return input(cases[k], i); }))
            << name(cases[k]) << " on rank " << r;
      }
    }
  }

  int n_ = 0;
  LocalJob* job_ = nullptr;

 private:
  static std::map<int, std::unique_ptr<LocalJob>>& Jobs() {
    static auto* jobs = new std::map<int, std::unique_ptr<LocalJob>>();
    return *jobs;
  }
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_COLLECTIVES_COLLECTIVE_TESTING_H_
