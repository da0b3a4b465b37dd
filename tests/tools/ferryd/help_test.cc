// ferryd --help (tools/ferryd/help.h): asked for by any of the usual
// spellings, it lists ferryd's flags by section with their defaults, and
// the real binary prints it and exits 0.
#include "tools/ferryd/help.h"

#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"
#include "tools/ferryd/limit_flags.h"

namespace ferry {
namespace {

using ::ferry::testing::Runfile;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

bool Asks(std::vector<std::string> args) {
  args.insert(args.begin(), "ferryd");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return AsksForHelp(static_cast<int>(argv.size()), argv.data());
}

TEST(FerrydHelpTest, EveryUsualSpellingAsks) {
  EXPECT_TRUE(Asks({"--help"}));
  EXPECT_TRUE(Asks({"--rank=0", "-h"}));
  EXPECT_TRUE(Asks({"-help"}));
  EXPECT_TRUE(Asks({"--helpfull"}));
  EXPECT_FALSE(Asks({}));
  EXPECT_FALSE(Asks({"--rank=0", "--world_size=2"}));
  EXPECT_FALSE(Asks({"--", "--help"}));  // An argument, not a flag.
}

TEST(FerrydHelpTest, ListsASectionsFlagsWithDefaultsAndHelp) {
  std::ostringstream out;
  PrintHelp(out, "usage line", {{"tools/ferryd/limit_flags.cc", "Limits"}});
  EXPECT_THAT(out.str(), StartsWith("usage line\n\nLimits:\n"));
  EXPECT_THAT(out.str(),
              AllOf(HasSubstr("\n  --max_args (default: 4096)\n      most "
                              "arguments of one call\n"),
                    Not(HasSubstr("Flags from"))));
  for (absl::string_view line : absl::StrSplit(out.str(), '\n')) {
    EXPECT_LE(line.size(), 80u) << line;
  }
}

TEST(FerrydHelpTest, TheBinaryPrintsItAndExitsZero) {
  absl::StatusOr<testing::ProcessResult> run = testing::RunProcess(
      {Runfile("tools/ferryd"), "--help"}, {}, absl::Seconds(30));
  ASSERT_OK(run);
  EXPECT_EQ(run->exit_code, 0) << run->Describe();
  EXPECT_THAT(run->out,
              AllOf(StartsWith("ferryd: one worker of a ferry job\n"),
                    HasSubstr("\nThe worker and its job:\n  --"),
                    HasSubstr("\n  --rank\n"),
                    HasSubstr("\nLimits: what one peer, call or stream may "
                              "use:\n"),
                    HasSubstr("  --max_open_streams (default: ")));
}

}  // namespace
}  // namespace ferry
