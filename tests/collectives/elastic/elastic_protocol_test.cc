// Agree and Revoke hand-stepped on the fake job
// (tests/testing/fake_collectives.h): the votes and revoke calls between
// members, in queue order and in random orders, with deaths before and
// during an agreement and a revoker that dies while telling the others.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collectives/collectives.h"
#include "collectives/elastic/elastic.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_collectives.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensor_samples.h"

namespace ferry {
namespace {

using ::ferry::testing::FakeCollectives;
using ::ferry::testing::SampleTensor;
using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A job whose workers serve the elastic functions.
FakeCollectives::Options Elastic(int world, uint64_t seed = 0) {
  return {.world_size = world, .shuffle_seed = seed};
}
void Serve(FakeCollectives& job) {
  for (int r = 0; r < job.world_size(); ++r) {
    ASSERT_TRUE(RegisterElasticFunctions(job.shared(r)).ok());
  }
}

std::vector<Future<Agreement>> AgreeOn(FakeCollectives& job,
                                       const std::vector<bool>& flags) {
  std::vector<Future<Agreement>> out;
  for (int r = 0; r < job.world_size(); ++r) {
    if (job.dead(r)) continue;
    out.push_back(AgreeAsync(job.world(r), flags[r]));
  }
  return out;
}

TEST(ElasticProtocolTest, AgreementIsTheAndOfEveryMembersFlag) {
  for (uint64_t seed = 0; seed <= 15; ++seed) {
    FakeCollectives job(Elastic(4, seed));
    Serve(job);
    std::vector<Future<Agreement>> agreed =
        AgreeOn(job, {true, true, false, true});
    ASSERT_TRUE(job.Drain());
    for (const Future<Agreement>& a : agreed) {
      ASSERT_TRUE(a.IsReady()) << "seed " << seed;
      absl::StatusOr<Agreement> got = a.Wait(absl::ZeroDuration());
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_FALSE(got->flag);
      EXPECT_THAT(got->members, ElementsAre(0, 1, 2, 3));
      EXPECT_EQ(got->id, agreed[0].Wait(absl::ZeroDuration())->id);
    }
    EXPECT_TRUE(job.Idle());
  }
}

TEST(ElasticProtocolTest, AMemberDeadBeforehandIsLeftOut) {
  FakeCollectives job(Elastic(4));
  Serve(job);
  job.Kill(3, absl::UnavailableError("killed"));
  std::vector<Future<Agreement>> agreed = AgreeOn(job, {true, true, true});
  ASSERT_TRUE(job.Drain());
  for (const Future<Agreement>& a : agreed) {
    absl::StatusOr<Agreement> got = a.Wait(absl::ZeroDuration());
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(got->flag);
    EXPECT_THAT(got->members, ElementsAre(0, 1, 2));
  }
}

TEST(ElasticProtocolTest, SurvivorsOfADeathMidAgreementDecideAlike) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    FakeCollectives job(Elastic(4, seed));
    Serve(job);
    std::vector<Future<Agreement>> agreed =
        AgreeOn(job, {true, true, true, false});
    for (int i = 0; i < static_cast<int>(seed % 7); ++i) job.Step();
    job.Kill(3, absl::UnavailableError("killed"));
    ASSERT_TRUE(job.Drain());
    absl::StatusOr<Agreement> first = agreed[0].Wait(absl::ZeroDuration());
    ASSERT_TRUE(first.ok()) << "seed " << seed << ": " << first.status();
    for (int r = 1; r < 3; ++r) {
      absl::StatusOr<Agreement> got = agreed[r].Wait(absl::ZeroDuration());
      ASSERT_TRUE(got.ok()) << got.status();
      // One decision for all (the store's), whether 3's vote counted or not.
      EXPECT_EQ(got->flag, first->flag) << "seed " << seed;
      EXPECT_EQ(got->members, first->members) << "seed " << seed;
    }
    // Its flag counts exactly when it is among the members.
    const bool counted = first->members.size() == 4;
    EXPECT_EQ(first->flag, !counted) << "seed " << seed;
  }
}

TEST(ElasticProtocolTest, RevokeFailsEveryMembersPendingAndLaterOps) {
  FakeCollectives job(Elastic(3));
  Serve(job);
  std::vector<Work<Tensor>> pending;
  for (int r : {0, 1}) {
    pending.push_back(
        AllReduceAsync(job.world(r), SampleTensor(DType::kFloat32, {4}, r)));
  }
  ASSERT_TRUE(job.Drain());
  ASSERT_TRUE(Revoke(job.world(2), "rank 2 gives up").ok());
  ASSERT_TRUE(job.Drain());
  for (const Work<Tensor>& w : pending) {
    ASSERT_TRUE(w.IsCompleted());
    EXPECT_THAT(w.status(), StatusIs(absl::StatusCode::kAborted,
                                     HasSubstr("revoked by worker2 (rank 2)")));
  }
  Work<Tensor> later =
      AllReduceAsync(job.world(0), SampleTensor(DType::kFloat32, {4}, 0));
  ASSERT_TRUE(later.IsCompleted());
  EXPECT_THAT(later.status(), StatusIs(absl::StatusCode::kAborted,
                                       HasSubstr("rank 2 gives up")));
  EXPECT_TRUE(job.Idle());
}

TEST(ElasticProtocolTest, ARevokerThatDiesWhileTellingIsRelayed) {
  FakeCollectives job(Elastic(3));
  Serve(job);
  ASSERT_TRUE(Revoke(job.world(0), "stop").ok());
  // Only its call to rank 1 gets out; then rank 0 dies.
  ASSERT_EQ(job.pending(), 2u);
  ASSERT_TRUE(job.Step());
  job.Kill(0, absl::UnavailableError("killed"));
  ASSERT_TRUE(job.Drain());
  std::optional<absl::Status> revoked = job.at(2).Revoked(job.world(2).name());
  ASSERT_TRUE(revoked.has_value());
  EXPECT_THAT(*revoked,
              StatusIs(absl::StatusCode::kAborted,
                       HasSubstr("revoked by worker0 (rank 0, relayed by "
                                 "worker1)")));
}

}  // namespace
}  // namespace ferry
