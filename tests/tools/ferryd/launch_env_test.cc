// Where ferryd learns its place: flags, then ferry's and the launchers'
// environments; on etcd, no rank at all means the first free one.
#include "tools/ferryd/launch_env.h"

#include <map>
#include <optional>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

Getenv Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LaunchEnvTest, FlagsWinOverLaunchersEnvironments) {
  PlacementFlags flags{.rank = 2, .world_size = 4, .master = "m:1"};
  ASSERT_OK_AND_ASSIGN(Placement p,
                       ResolvePlacement(flags, Env({{"RANK", "1"}})));
  EXPECT_EQ(p.rank, 2);
  EXPECT_EQ(p.name, "worker2");
  ASSERT_OK_AND_ASSIGN(
      p, ResolvePlacement({}, Env({{"SLURM_PROCID", "3"},
                                   {"SLURM_NTASKS", "4"},
                                   {"MASTER_ADDR", "10.0.0.1"}})));
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.source, "SLURM");
  EXPECT_EQ(p.master, "10.0.0.1:29500");
}

// On the embedded master a missing rank is 0 (the master itself).
TEST(LaunchEnvTest, NoRankIsRankZeroOnTheEmbeddedMaster) {
  ASSERT_OK_AND_ASSIGN(Placement p, ResolvePlacement({}, Env({})));
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.name, "worker0");
}

// On etcd a missing rank is the first free one, picked at join (-1), and
// the worker is named after it.
TEST(LaunchEnvTest, NoRankIsTheFirstFreeOneWhereTheBackendAssignsRanks) {
  PlacementFlags flags{
      .world_size = 3, .needs_master = false, .rank_assignable = true};
  ASSERT_OK_AND_ASSIGN(Placement p, ResolvePlacement(flags, Env({})));
  EXPECT_EQ(p.rank, -1);
  EXPECT_EQ(p.world_size, 3);
  EXPECT_EQ(p.name, "");
  ASSERT_OK_AND_ASSIGN(p, ResolvePlacement(flags, Env({{"RANK", "2"}})));
  EXPECT_EQ(p.rank, 2);
  flags.name = "custom";
  EXPECT_THAT(ResolvePlacement(flags, Env({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--name needs --rank")));
}

// Issue 49's R6: a worker's name is data of a fixed alphabet and length,
// never a path (on 1dde932 `--name=../../x` made `ferryctl dump` write
// outside its --out).
TEST(LaunchEnvTest, NamesAreData) {
  for (const char* bad :
       {"../../x", "a/b", "..", ".", "", "two words", "line\n", "\xc3\xa9"}) {
    SCOPED_TRACE(bad);
    PlacementFlags flags{.name = std::string(bad), .rank = 0, .world_size = 1};
    EXPECT_THAT(ResolvePlacement(flags, Env({})),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("--name (or FERRY_NAME): worker name")));
  }
  EXPECT_THAT(ResolvePlacement({.rank = 0, .world_size = 1},
                               Env({{"FERRY_NAME", "../x"}})),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(
      ResolvePlacement(
          {.name = std::string(65, 'a'), .rank = 0, .world_size = 1}, Env({})),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 to 64")));
  ASSERT_OK_AND_ASSIGN(
      Placement p,
      ResolvePlacement({.name = "trainer-0.a_B", .rank = 0, .world_size = 1},
                       Env({})));
  EXPECT_EQ(p.name, "trainer-0.a_B");
}

TEST(LaunchEnvTest, BadValuesAreNamed) {
  EXPECT_THAT(ResolvePlacement({}, Env({{"RANK", "x"}, {"WORLD_SIZE", "2"}})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RANK")));
  EXPECT_THAT(ResolvePlacement({.rank = 5, .world_size = 2}, Env({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 5 is out of range")));
  EXPECT_THAT(ResolvePlacement({.rank = 1, .world_size = 2}, Env({})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("no master address")));
}

}  // namespace
}  // namespace ferry
