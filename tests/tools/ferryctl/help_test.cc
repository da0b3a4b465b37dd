// Unit tests of ferryctl's help texts (tools/ferryctl/help.h) and command
// line (tools/ferryctl/cli.h): every command has help with an example, the
// usage lists every command and flag, unknown commands and flags are usage
// errors.
#include "tools/ferryctl/help.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tools/ferryctl/cli.h"

namespace ferry {
namespace ctl {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;
using ::testing::UnorderedElementsAre;

// The lines of the general usage's section `name` ("commands:", …) up to
// the next blank line.
std::vector<std::string> Section(const std::string& name) {
  std::vector<std::string> lines = absl::StrSplit(HelpText(""), '\n');
  std::vector<std::string> out;
  bool in = false;
  for (const std::string& line : lines) {
    if (in && line.empty()) break;
    if (in) out.push_back(line);
    if (line == name) in = true;
  }
  return out;
}

// The commands the general usage lists: the first word of each line of
// its "commands:" section.
std::vector<std::string> ListedCommands() {
  std::vector<std::string> out;
  for (const std::string& line : Section("commands:")) {
    std::vector<std::string> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (!words.empty()) out.push_back(words[0]);
  }
  return out;
}

TEST(HelpTest, UsageListsEveryCommand) {
  EXPECT_THAT(HelpText(""), StartsWith("usage: ferryctl "));
  EXPECT_THAT(ListedCommands(),
              UnorderedElementsAre("up", "down", "status", "functions", "call",
                                   "remote", "rrefs", "collective", "run",
                                   "dump", "analyze", "stacks", "watch"));
  // And ferryctl knows each of them.
  for (const std::string& command : ListedCommands()) {
    EXPECT_NE(CommandFlags(command), nullptr) << command;
  }
}

TEST(HelpTest, CommandListIsAligned) {
  // "  NAME   description": two spaces, then the name, then the
  // descriptions in one column.
  std::vector<std::string> lines = Section("commands:");
  ASSERT_FALSE(lines.empty());
  std::set<size_t> columns;
  for (const std::string& line : lines) {
    EXPECT_THAT(line, StartsWith("  ")) << line;
    EXPECT_NE(line[2], ' ') << "indented by more than 2: '" << line << "'";
    const size_t name_end = line.find(' ', 2);
    columns.insert(line.find_first_not_of(' ', name_end));
  }
  EXPECT_EQ(columns.size(), 1u) << "descriptions not in one column";
}

TEST(HelpTest, UsageListsEveryGlobalFlag) {
  const std::string usage = HelpText("");
  for (const std::string& flag : GlobalFlags()) {
    // Boolean flags take no value.
    EXPECT_THAT(usage, ::testing::AnyOf(HasSubstr("--" + flag + "="),
                                        HasSubstr("--" + flag + " ")))
        << flag;
  }
  EXPECT_THAT(usage, HasSubstr("-h, --help"));
  // Each flag line starts two spaces in (continuations further in).
  for (const std::string& line : Section("global flags:")) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "-")) {
      EXPECT_THAT(line, StartsWith("  -")) << line;
    }
  }
}

TEST(HelpTest, UsageExamplesStartTwoSpacesIn) {
  // Examples start 2 spaces in; a line further in continues a pipe.
  std::vector<std::string> lines = Section("examples:");
  ASSERT_FALSE(lines.empty());
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::StartsWith(lines[i], "   ")) {
      ASSERT_GT(i, 0u) << lines[i];
      EXPECT_TRUE(absl::EndsWith(lines[i - 1], "|"))
          << "'" << lines[i] << "' is indented but continues nothing";
    } else {
      EXPECT_THAT(lines[i], StartsWith("  ")) << lines[i];
    }
  }
}

TEST(HelpTest, EveryCommandHasHelpWithAnExample) {
  for (const std::string& command : ListedCommands()) {
    SCOPED_TRACE(command);
    const std::string help = HelpText(command);
    EXPECT_THAT(help, StartsWith("usage: ferryctl " + command));
    EXPECT_THAT(help, HasSubstr("\nexample"));  // "example:", "examples:"
    EXPECT_TRUE(absl::EndsWith(help, "\n"));
  }
}

TEST(HelpTest, EveryCommandHelpNamesItsFlags) {
  for (const std::string& command : ListedCommands()) {
    SCOPED_TRACE(command);
    const std::vector<std::string>* flags = CommandFlags(command);
    ASSERT_NE(flags, nullptr);
    for (const std::string& flag : *flags) {
      EXPECT_THAT(HelpText(command), HasSubstr("--" + flag)) << flag;
    }
  }
}

TEST(HelpTest, RunHelpListsEveryStatement) {
  const std::string help = HelpText("run");
  for (const char* statement :
       {"call WORKER", "remote WORKER", "fetch $R", "collective OP", "status",
        "functions [WORKER]", "rrefs [WORKER]", "value VALUE", "print VALUE",
        "show VALUE", "echo TEXT", "expect VALUE JSON", "sleep MS"}) {
    EXPECT_THAT(help, HasSubstr(statement)) << statement;
  }
  // Statement lines start 2 spaces in ("  [NAME =] call …", "  print …").
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    if (absl::StrContains(line, "[NAME =]")) {
      EXPECT_THAT(std::string(line), StartsWith("  [NAME =]"));
    }
  }
}

TEST(HelpTest, UnknownCommandHasNoHelp) {
  EXPECT_EQ(HelpText("bogus"), "");
  EXPECT_EQ(HelpText("help"), "");
}

// --- The command line --------------------------------------------------------

TEST(CommandLineTest, CommandPositionalsAndFlags) {
  CommandLine cl;
  EXPECT_EQ(ParseCommandLine({"--master=h:1", "call", "worker1", "add",
                              "[1, 2]", "--timeout_ms", "500"},
                             &cl),
            std::nullopt);
  EXPECT_EQ(cl.command, "call");
  EXPECT_THAT(cl.positional, ElementsAre("worker1", "add", "[1, 2]"));
  EXPECT_EQ(cl.Flag("master"), "h:1");
  EXPECT_EQ(cl.Flag("timeout_ms"), "500");
  EXPECT_EQ(cl.Flag("local"), std::nullopt);
  EXPECT_FALSE(cl.help);
}

TEST(CommandLineTest, CommandFlags) {
  CommandLine cl;
  EXPECT_EQ(ParseCommandLine({"status", "--format=table"}, &cl), std::nullopt);
  EXPECT_EQ(cl.Flag("format"), "table");

  CommandLine up;
  EXPECT_EQ(ParseCommandLine({"up", "--world_size", "3", "--port=0", "--",
                              "--heartbeat_timeout_ms=1000", "x"},
                             &up),
            std::nullopt);
  EXPECT_EQ(up.Flag("world_size"), "3");
  EXPECT_EQ(up.Flag("port"), "0");
  EXPECT_THAT(up.passthrough, ElementsAre("--heartbeat_timeout_ms=1000", "x"));
}

TEST(CommandLineTest, GlobalFlagsAreAcceptedByEveryCommand) {
  for (const std::string& command : ListedCommands()) {
    for (const std::string& flag : GlobalFlags()) {
      CommandLine cl;
      EXPECT_EQ(ParseCommandLine({command, "--" + flag + "=1"}, &cl),
                std::nullopt)
          << command << " --" << flag;
    }
  }
}

TEST(CommandLineTest, Help) {
  CommandLine general;
  EXPECT_EQ(ParseCommandLine({"--help"}, &general), std::nullopt);
  EXPECT_TRUE(general.help);
  EXPECT_EQ(general.command, "");

  CommandLine command;
  EXPECT_EQ(ParseCommandLine({"collective", "-h"}, &command), std::nullopt);
  EXPECT_TRUE(command.help);
  EXPECT_EQ(command.command, "collective");
}

TEST(CommandLineTest, Version) {
  CommandLine cl;  // Was "flag --version needs a value".
  EXPECT_EQ(ParseCommandLine({"--version"}, &cl), std::nullopt);
  EXPECT_TRUE(cl.version);
  EXPECT_EQ(cl.command, "");
  EXPECT_THAT(Section("global flags:"), Contains(StartsWith("  --version ")));
}

TEST(CommandLineTest, UnknownCommandIsAUsageError) {
  CommandLine cl;
  std::optional<UsageError> e = ParseCommandLine({"frobnicate", "x"}, &cl);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "unknown command 'frobnicate'");
  EXPECT_EQ(e->command, "");  // The general usage follows.

  CommandLine help;
  e = ParseCommandLine({"frobnicate", "--help"}, &help);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "unknown command 'frobnicate'");
}

TEST(CommandLineTest, NoCommandIsAUsageError) {
  CommandLine cl;
  std::optional<UsageError> e = ParseCommandLine({"--master=h:1"}, &cl);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "no command given");
  EXPECT_EQ(e->command, "");
}

TEST(CommandLineTest, UnknownFlagIsAUsageErrorOfTheCommand) {
  CommandLine cl;
  std::optional<UsageError> e =
      ParseCommandLine({"call", "w", "f", "--bogus=1"}, &cl);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "unknown flag --bogus for 'call'");
  EXPECT_EQ(e->command, "call");  // The command's own usage follows.

  // A command's flag is not another command's.
  CommandLine down;
  e = ParseCommandLine({"down", "--world_size=3"}, &down);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "unknown flag --world_size for 'down'");
  EXPECT_EQ(e->command, "down");
}

TEST(CommandLineTest, FlagWithoutValueIsAUsageError) {
  CommandLine cl;
  std::optional<UsageError> e = ParseCommandLine({"status", "--master"}, &cl);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "flag --master needs a value");

  CommandLine next;
  e = ParseCommandLine({"status", "--master", "--timeout_ms=1"}, &next);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "flag --master needs a value");
}

TEST(CommandLineTest, OnlyUpTakesArgumentsAfterDashDash) {
  CommandLine cl;
  std::optional<UsageError> e =
      ParseCommandLine({"status", "--", "--x=1"}, &cl);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->message, "only 'up' takes arguments after --");
  EXPECT_EQ(e->command, "status");
}

TEST(CommandLineTest, IntFlag) {
  CommandLine cl;
  ASSERT_EQ(ParseCommandLine({"status", "--timeout_ms=250", "--local=x"}, &cl),
            std::nullopt);
  ASSERT_OK_AND_ASSIGN(int64_t timeout_ms, cl.IntFlag("timeout_ms", 1));
  EXPECT_EQ(timeout_ms, 250);
  ASSERT_OK_AND_ASSIGN(int64_t port, cl.IntFlag("port", 29500));
  EXPECT_EQ(port, 29500);
  EXPECT_THAT(cl.IntFlag("local", 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--local=x: expected a non-negative integer"));
  CommandLine negative;
  ASSERT_EQ(ParseCommandLine({"status", "--timeout_ms=-1"}, &negative),
            std::nullopt);
  EXPECT_THAT(negative.IntFlag("timeout_ms", 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--timeout_ms=-1")));
}

TEST(CommandLineTest, UnknownCommandsHaveNoFlags) {
  EXPECT_EQ(CommandFlags("bogus"), nullptr);
  EXPECT_THAT(*CommandFlags("down"), IsEmpty());
}

}  // namespace
}  // namespace ctl
}  // namespace ferry
