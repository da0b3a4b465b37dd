// The jagged all-to-all (TorchRec's KJTAllToAll / SparseFeaturesAllToAll):
// the seed page's example exactly, stagger, zero features, empty and uneven
// batches, weights, world sizes 1-5 against a reference, and bad inputs.
#include "collectives/sparse.h"

#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/collectives/spmd.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::Spmd;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

using Lists = std::vector<std::vector<int64_t>>;  // Per sample, its ids.

// A KJT from, per key, per sample, the ids (weights: id / 100 if asked).
KeyedJaggedTensor Kjt(const std::vector<std::string>& keys,
                      const std::vector<Lists>& per_key, bool weighted = false,
                      int64_t stride = 0) {
  std::vector<int64_t> lengths, values;
  std::vector<float> weights;
  for (const Lists& samples : per_key) {
    for (const std::vector<int64_t>& ids : samples) {
      lengths.push_back(static_cast<int64_t>(ids.size()));
      for (int64_t id : ids) {
        values.push_back(id);
        weights.push_back(static_cast<float>(id) / 100);
      }
    }
  }
  absl::StatusOr<KeyedJaggedTensor> k = KeyedJaggedTensor::Create(
      keys, Tensor::FromVector<int64_t>(lengths),
      Tensor::FromVector<int64_t>(values),
      weighted ? std::optional<Tensor>(Tensor::FromVector<float>(weights))
               : std::nullopt,
      keys.empty() ? std::optional<int64_t>(stride) : std::nullopt);
  EXPECT_OK(k);
  return *k;
}

class SparseTest : public ::ferry::testing::JobTest {};

// A.Vi is id 100 + i, B.Vi 200 + i, C.Vi 300 + i, D.Vi 400 + i.
constexpr int64_t A = 100, B = 200, C = 300, D = 400;

TEST_F(SparseTest, SeedExample) {
  Start(2);
  // Rank 0 and rank 1 inputs, per key and sample, as on the seed page.
  const std::vector<Lists> id_list[2] = {{{{A + 0}, {}, {A + 1, A + 2}},
                                          {{}, {B + 0}, {B + 1}},
                                          {{C + 0}, {C + 1}, {}}},
                                         {{{A + 3}, {A + 4}, {}},
                                          {{}, {B + 2}, {B + 3, B + 4}},
                                          {{C + 2}, {C + 3}, {}}}};
  const std::vector<Lists> d[2] = {{{{}, {D + 0}, {}}},
                                   {{{D + 1}, {D + 2}, {D + 3, D + 4}}}};
  auto out = Spmd<SparseFeatures>(*job_, [&](WorkerImpl& w, int r) {
    std::vector<Lists> scores = id_list[r];
    scores.push_back(d[r][0]);
    SparseFeatures in{Kjt({"A", "B", "C"}, id_list[r]),
                      Kjt({"A", "B", "C", "D"}, scores, /*weighted=*/true)};
    return SparseFeaturesAllToAll(w.collectives().world(), in, {2, 1}, {1, 3});
  });
  ASSERT_OK(out[0]);
  ASSERT_OK(out[1]);
  const Lists a = {{A + 0}, {}, {A + 1, A + 2}, {A + 3}, {A + 4}, {}};
  const Lists b = {{}, {B + 0}, {B + 1}, {}, {B + 2}, {B + 3, B + 4}};
  const Lists c = {{C + 0}, {C + 1}, {}, {C + 2}, {C + 3}, {}};
  const Lists dd = {{}, {D + 0}, {}, {D + 1}, {D + 2}, {D + 3, D + 4}};
  EXPECT_EQ(out[0]->id_list, Kjt({"A", "B"}, {a, b}));
  EXPECT_EQ(out[1]->id_list, Kjt({"C"}, {c}));
  EXPECT_EQ(out[0]->id_score_list, Kjt({"A"}, {a}, true));
  EXPECT_EQ(out[1]->id_score_list, Kjt({"B", "C", "D"}, {b, c, dd}, true));
  // Accessors: rank 0's A, sample 2 holds A.V1, A.V2.
  EXPECT_EQ(out[0]->id_list.ValuesOf(0, 2),
            Tensor::FromVector<int64_t>({A + 1, A + 2}));
  EXPECT_EQ(out[0]->id_list.stride(), 6);
}

// The reference: per key, the sources' samples in staggered order.
std::vector<Lists> Expected(const std::vector<std::vector<Lists>>& inputs,
                            int first, int count, int stagger) {
  const int n = static_cast<int>(inputs.size());
  std::vector<Lists> out(count);
  for (int x = 0; x < n / stagger; ++x) {
    for (int y = 0; y < stagger; ++y) {
      const int s = x + (n / stagger) * y;
      for (int f = 0; f < count; ++f) {
        for (const auto& ids : inputs[s][first + f]) out[f].push_back(ids);
      }
    }
  }
  return out;
}

// Every rank has 5 keys and its own batch size (rank r: r + 1 samples,
// rank 0 also tries an empty batch); features are spread unevenly, some
// ranks get none.
void CheckAgainstReference(LocalJob& job, int stagger,
                           bool empty_batch_on_rank0) {
  const int n = job.size();
  const std::vector<std::string> keys = {"k0", "k1", "k2", "k3", "k4"};
  std::vector<std::vector<Lists>> inputs(n);
  for (int r = 0; r < n; ++r) {
    const int batch = (r == 0 && empty_batch_on_rank0) ? 0 : r + 1;
    for (int k = 0; k < 5; ++k) {
      Lists samples;
      for (int s = 0; s < batch; ++s) {
        std::vector<int64_t> ids;
        for (int i = 0; i < (r + k + s) % 3; ++i)
          ids.push_back(r * 1000 + k * 100 + s * 10 + i);
        samples.push_back(ids);
      }
      inputs[r].push_back(samples);
    }
  }
  std::vector<int64_t> fpr(n, 0);  // n = 3, 4, 5: some ranks get no features.
  for (int k = 0; k < 5; ++k) fpr[(k * k + 1) % n] += 1;
  std::vector<int> first(n + 1, 0);
  for (int r = 0; r < n; ++r)
    first[r + 1] = first[r] + static_cast<int>(fpr[r]);
  auto out = Spmd<KeyedJaggedTensor>(job, [&](WorkerImpl& w, int r) {
    return KJTAllToAll(w.collectives().world(), Kjt(keys, inputs[r], true), fpr,
                       stagger);
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(out[r].ok()) << "rank " << r << ": " << out[r].status();
    std::vector<std::string> mine(keys.begin() + first[r],
                                  keys.begin() + first[r + 1]);
    int64_t stride = 0;
    for (int s = 0; s < n; ++s)
      stride += static_cast<int64_t>(inputs[s][0].size());
    KeyedJaggedTensor want =
        Kjt(mine, Expected(inputs, first[r], static_cast<int>(fpr[r]), stagger),
            true, stride);
    EXPECT_EQ(*out[r], want)
        << "rank " << r << " of " << n << ", stagger " << stagger << ": "
        << ToJson(out[r]->ToValue()) << " vs " << ToJson(want.ToValue());
    EXPECT_EQ(out[r]->stride(), stride);
  }
}

TEST_F(SparseTest, WorldSizesOneToFive) {
  for (int n = 1; n <= 5; ++n) {
    Start(n);
    CheckAgainstReference(*job_, 1, false);
    CheckAgainstReference(*job_, 1, true);
    job_.reset();
  }
}

TEST_F(SparseTest, StaggerOnFourRanks) {
  Start(4);
  CheckAgainstReference(*job_, 2, false);
  CheckAgainstReference(*job_, 4, false);
}

TEST_F(SparseTest, BadInputsFailEveryRank) {
  Start(2);
  const std::vector<Lists> two_keys = {{{1}, {2}}, {{3}, {}}};
  struct Case {
    std::string name;
    std::function<KeyedJaggedTensor(int)> input;
    std::vector<int64_t> fpr;
    int stagger;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"sum of features",
       [&](int) {
         return Kjt({"a", "b"}, two_keys);
       },
       {1, 0},
       1,
       "features_per_rank adds up to 1 features but kjt has 2 keys"},
      {"stagger",
       [&](int) {
         return Kjt({"a", "b"}, two_keys);
       },
       {1, 1},
       3,
       "stagger 3 does not divide the group size 2"},
      {"keys differ",
       [&](int r) {
         return Kjt({"a", r == 0 ? "b" : "x"}, two_keys);
       },
       {1, 1},
       1,
       "rank 1 (worker1) has kjt keys [\"a\",\"x\"] but rank 0 (worker0) has "
       "[\"a\",\"b\"]"},
      {"weights on one rank",
       [&](int r) {
         return Kjt({"a", "b"}, two_keys, r == 1);
       },
       {1, 1},
       1,
       "rank 1 (worker1) has kjt weighted true but rank 0 (worker0) has false"},
      {"features that overflow",
       [&](int) {
         return Kjt({"a", "b"}, two_keys);
       },
       {std::numeric_limits<int64_t>::max(), 2},
       1,
       "features_per_rank asks for more features than kjt's 2 keys"},
  };
  for (const Case& c : cases) {
    auto out = Spmd<KeyedJaggedTensor>(*job_, [&](WorkerImpl& w, int r) {
      return KJTAllToAll(w.collectives().world(), c.input(r), c.fpr, c.stagger);
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_THAT(out[r], StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr(c.message)))
          << c.name << ", rank " << r;
    }
  }
  // The group works afterwards.
  auto ok = Spmd<KeyedJaggedTensor>(*job_, [&](WorkerImpl& w, int) {
    return KJTAllToAll(w.collectives().world(), Kjt({"a", "b"}, two_keys),
                       {1, 1});
  });
  EXPECT_OK(ok[0]);
  EXPECT_OK(ok[1]);
}

TEST(KjtTest, Validation) {
  auto lengths = Tensor::FromVector<int64_t>({1, 2, 0, -1});
  EXPECT_THAT(KeyedJaggedTensor::Create({"a", "b"}, lengths,
                                        Tensor::FromVector<int64_t>({1, 2}),
                                        std::nullopt, std::nullopt, "id_list"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("id_list.lengths[3] is negative (-1)")));
  EXPECT_THAT(
      KeyedJaggedTensor::Create({"a", "b"},
                                Tensor::FromVector<int64_t>({1, 2, 0}),
                                Tensor::FromVector<int64_t>({1, 2, 3})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(
                   "kjt.lengths has 3 entries, not a multiple of the 2 keys")));
  EXPECT_THAT(
      KeyedJaggedTensor::Create({"a"}, Tensor::FromVector<int64_t>({1, 2}),
                                Tensor::FromVector<int64_t>({1, 2})),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          HasSubstr("kjt.values has 2 entries but the lengths add up to 3")));
  EXPECT_THAT(KeyedJaggedTensor::Create({"a"}, Tensor::FromVector<int64_t>({2}),
                                        Tensor::FromVector<int64_t>({1, 2}),
                                        Tensor::FromVector<float>({1})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kjt.weights must be")));
  // Lengths that overflow when added are refused, not wrapped around.
  const int64_t big = std::numeric_limits<int64_t>::max();
  EXPECT_THAT(KeyedJaggedTensor::Create(
                  {"a", "b", "c"}, Tensor::FromVector<int64_t>({big, big, 2}),
                  Tensor::FromVector<int64_t>({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kjt.lengths add up to")));
  ASSERT_OK_AND_ASSIGN(Value v, ParseJson(R"({"keys": ["a"], "lengths": [1, 1],
                                              "values": [5, 6], "weights": [0.5, 1]})"));
  ASSERT_OK_AND_ASSIGN(KeyedJaggedTensor k,
                       KeyedJaggedTensor::FromValue(v, "x"));
  EXPECT_EQ(k.stride(), 2);
  EXPECT_EQ(
      ToJson(k.ToPlainValue()),
      R"({"keys":["a"],"lengths":[1,1],"values":[5,6],"weights":[0.5,1.0]})");
  ASSERT_OK_AND_ASSIGN(Value bad, ParseJson(R"({"keys": ["a"], "lengths": [1],
                                                "values": [1.5]})"));
  EXPECT_THAT(KeyedJaggedTensor::FromValue(bad, "x"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("x.values[0] must be an integer")));
}

}  // namespace
}  // namespace ferry
