// Unit tests of ferryctl scripts (tools/ferryctl/script.h): the parser's
// errors, which name FILE:LINE:COL and show the line with a caret under the
// offending character, and the statements that need no job (value, show,
// echo, print, expect, sleep). Run against a fake job that records the
// job statements it is asked to run.
#include "tools/ferryctl/script.h"

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/base/limits.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace ctl {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kCommandList[] =
    "call, collective, echo, expect, fetch, functions, print, remote, rrefs, "
    "show, sleep, status, value";

// A script error taken apart: "FILE:LINE:COL: message\n    SOURCE\n    ^".
struct ScriptErrorParts {
  std::string file;
  int line = 0;
  int column = 0;
  std::string message;
  std::string source;  // The quoted line, without the 4-space indent.
  int caret = 0;       // 1-based column of the caret under it.
};

ScriptErrorParts Split(const absl::Status& status) {
  ScriptErrorParts parts;
  std::vector<std::string> lines = absl::StrSplit(status.message(), '\n');
  EXPECT_EQ(lines.size(), 3u) << status;
  if (lines.size() != 3) return parts;
  std::vector<std::string> head =
      absl::StrSplit(lines[0], absl::MaxSplits(':', 3));
  EXPECT_EQ(head.size(), 4u) << lines[0];
  if (head.size() != 4) return parts;
  parts.file = head[0];
  EXPECT_TRUE(absl::SimpleAtoi(head[1], &parts.line)) << lines[0];
  EXPECT_TRUE(absl::SimpleAtoi(head[2], &parts.column)) << lines[0];
  EXPECT_THAT(head[3], StartsWith(" ")) << lines[0];
  parts.message = head[3].substr(1);
  EXPECT_THAT(lines[1], StartsWith("    ")) << status;
  parts.source = lines[1].substr(std::min<size_t>(4, lines[1].size()));
  EXPECT_THAT(lines[2], StartsWith("    ")) << status;
  const std::string caret =
      lines[2].substr(std::min<size_t>(4, lines[2].size()));
  const size_t at = caret.find('^');
  EXPECT_NE(at, std::string::npos) << status;
  EXPECT_EQ(caret.find_first_not_of(' '), at) << "only spaces before ^";
  EXPECT_EQ(at + 1, caret.size()) << "nothing after ^";
  parts.caret = static_cast<int>(at) + 1;
  return parts;
}

// Parses `text` as file "t.ferry", expects INVALID_ARGUMENT, and checks the
// message's shape: the quoted line is line LINE of the file and the caret
// sits at column COL.
ScriptErrorParts ParseError(const std::string& text) {
  absl::StatusOr<Script> script = Script::Parse("t.ferry", text);
  EXPECT_THAT(script, StatusIs(absl::StatusCode::kInvalidArgument));
  if (script.ok()) return {};
  ScriptErrorParts parts = Split(script.status());
  EXPECT_EQ(parts.file, "t.ferry");
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  EXPECT_GE(parts.line, 1);
  EXPECT_LE(parts.line, static_cast<int>(lines.size()));
  if (parts.line >= 1 && parts.line <= static_cast<int>(lines.size())) {
    EXPECT_EQ(parts.source, lines[parts.line - 1]);
  }
  EXPECT_EQ(parts.caret, parts.column) << script.status();
  return parts;
}

// --- Parser errors ---------------------------------------------------------

TEST(ScriptParseTest, ErrorMessageHasFileLineColumnSourceAndCaret) {
  absl::StatusOr<Script> script =
      Script::Parse("demo.ferry", "# a comment\n\nX = bogus 1\n");
  EXPECT_THAT(script,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("demo.ferry:3:5: unknown command 'bogus' "
                                    "(expected one of: ",
                                    kCommandList,
                                    ")\n"
                                    "    X = bogus 1\n"
                                    "        ^")));
}

TEST(ScriptParseTest, UnknownCommandListsCommandsAndPointsAtTheWord) {
  ScriptErrorParts e = ParseError("frobnicate [1]");
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 1);
  EXPECT_EQ(e.message, absl::StrCat("unknown command 'frobnicate' (expected "
                                    "one of: ",
                                    kCommandList, ")"));

  e = ParseError("print 1\n   frobnicate [1]");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 4);

  e = ParseError("RESULT =   frobnicate [1]");
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 12);
  EXPECT_THAT(e.message, StartsWith("unknown command 'frobnicate'"));
}

TEST(ScriptParseTest, CommandsAreCaseSensitive) {
  ScriptErrorParts e = ParseError("PRINT 1");
  EXPECT_EQ(e.column, 1);
  EXPECT_THAT(e.message, StartsWith("unknown command 'PRINT'"));
}

TEST(ScriptParseTest, AssignmentWithoutCommand) {
  ScriptErrorParts e = ParseError("X =");
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 4);
  EXPECT_EQ(e.message, absl::StrCat("expected a command after 'X =' (one of: ",
                                    kCommandList, ")"));
}

TEST(ScriptParseTest, InvalidVariableName) {
  ScriptErrorParts e = ParseError("print 1\n  1x = value 1");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 3);
  EXPECT_EQ(e.message, "'1x' is not a valid variable name");

  e = ParseError("a-b = value 1");
  EXPECT_EQ(e.column, 1);
  EXPECT_EQ(e.message, "'a-b' is not a valid variable name");
}

TEST(ScriptParseTest, UnknownVariableInJson) {
  // Used before it is set: the whole script is checked before it runs.
  ScriptErrorParts e = ParseError("print $X\nX = value 1");
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 7);
  EXPECT_EQ(e.message, "unknown variable $X (set it first: X = …)");

  e = ParseError("Y = value 1\nprint {\"a\": $Y, \"b\": [1, $Z]}");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 26);
  EXPECT_EQ(e.message, "unknown variable $Z (set it first: Z = …)");
}

TEST(ScriptParseTest, VariableIsNotSetByItsOwnStatement) {
  ScriptErrorParts e = ParseError("X = value [$X]");
  EXPECT_EQ(e.column, 12);
  EXPECT_THAT(e.message, StartsWith("unknown variable $X"));
}

TEST(ScriptParseTest, UnknownVariableAsWorker) {
  ScriptErrorParts e = ParseError("call $W add [1, 2]");
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 6);
  EXPECT_EQ(e.message, "unknown variable $W");

  e = ParseError("functions $W");
  EXPECT_EQ(e.column, 11);
}

TEST(ScriptParseTest, UnknownVariableInMultiLineJson) {
  ScriptErrorParts e = ParseError("print [1,\n  2,\n   $Q]");
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.column, 4);
  EXPECT_THAT(e.message, StartsWith("unknown variable $Q"));
}

TEST(ScriptParseTest, VariableInsideStringIsText) {
  ASSERT_OK_AND_ASSIGN(Script script, Script::Parse("t", "print \"$X\""));
  EXPECT_EQ(script.statements().size(), 1u);
}

TEST(ScriptParseTest, BadJsonPointsAtTheBadCharacter) {
  ScriptErrorParts e = ParseError("print [1, 2,, 3]");
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 13);
  EXPECT_EQ(e.message, "unexpected character ',', expected a value");

  e = ParseError("\n\n   call w f [1, }");
  EXPECT_EQ(e.line, 3);
  EXPECT_EQ(e.column, 17);
  EXPECT_THAT(e.message, HasSubstr("'}'"));
}

TEST(ScriptParseTest, BadJsonOnALaterLineOfAMultiLineArgument) {
  // The argument starts on line 2; the bad 'x' is on line 4, column 5.
  ScriptErrorParts e =
      ParseError("print 1\nprint {\"a\": [1,\n  2,\n  3 x]}\nprint 2");
  EXPECT_EQ(e.line, 4);
  EXPECT_EQ(e.column, 5);
  EXPECT_EQ(e.message, "expected ',' or ']' in array");
}

TEST(ScriptParseTest, BadJsonInTheSecondArgumentStartingOnALaterLine) {
  // expect's first argument spans two lines; the second starts on line 2.
  ScriptErrorParts e = ParseError("expect [1,\n 2] [3 x]");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 8);
  EXPECT_EQ(e.message, "expected ',' or ']' in array");
}

TEST(ScriptParseTest, BadJsonInTheFirstOfTwoArguments) {
  ScriptErrorParts e = ParseError("expect [1 2] [1, 2]");
  EXPECT_EQ(e.line, 1);
  EXPECT_EQ(e.column, 11);
}

TEST(ScriptParseTest, UnclosedBracketRunsIntoTheNextLine) {
  // The JSON continues while the bracket is open, so the next line is
  // where the parse fails.
  ScriptErrorParts e = ParseError("print [1, 2\nprint 3");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 1);
}

TEST(ScriptParseTest, AssigningACommandThatProducesNoValue) {
  for (const char* text : {"X = print 1", "X = show 1", "X = echo hi",
                           "X = expect 1 1", "X = sleep 1"}) {
    SCOPED_TRACE(text);
    ScriptErrorParts e = ParseError(text);
    EXPECT_EQ(e.line, 1);
    EXPECT_EQ(e.column, 1);
    std::vector<std::string> words = absl::StrSplit(text, ' ');
    EXPECT_EQ(e.message,
              absl::StrCat("'", words[2], "' produces no value to assign"));
  }
}

TEST(ScriptParseTest, MissingArguments) {
  ScriptErrorParts e = ParseError("print");
  EXPECT_EQ(e.column, 6);
  EXPECT_EQ(e.message, "'print' needs more arguments (J)");

  e = ParseError("expect [1]");
  EXPECT_EQ(e.column, 11);
  EXPECT_EQ(e.message, "'expect' needs more arguments (J J)");

  e = ParseError("call worker1");
  EXPECT_EQ(e.column, 13);
  EXPECT_EQ(e.message, "'call' needs more arguments (w w J?)");

  e = ParseError("sleep");
  EXPECT_EQ(e.message, "'sleep' needs more arguments (w)");

  e = ParseError("collective all_reduce");
  EXPECT_EQ(e.message, "'collective' needs more arguments (w J)");

  // The end of a multi-line first argument.
  e = ParseError("expect [1,\n 2]\n");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 4);
  EXPECT_EQ(e.message, "'expect' needs more arguments (J J)");
}

TEST(ScriptParseTest, ExtraArguments) {
  ScriptErrorParts e = ParseError("status extra");
  EXPECT_EQ(e.column, 8);
  EXPECT_EQ(e.message, "unexpected text after 'status' (arguments: )");

  e = ParseError("sleep 10 20");
  EXPECT_EQ(e.column, 10);
  EXPECT_EQ(e.message, "unexpected text after 'sleep' (arguments: w)");

  e = ParseError("rrefs w1 w2");
  EXPECT_EQ(e.column, 10);

  e = ParseError("print [1] [2]");
  EXPECT_EQ(e.column, 11);
  EXPECT_EQ(e.message, "unexpected text after the value");
}

TEST(ScriptParseTest, FirstErrorIsReported) {
  ScriptErrorParts e = ParseError("print 1\nbogus\nprint $X");
  EXPECT_EQ(e.line, 2);
  EXPECT_THAT(e.message, StartsWith("unknown command 'bogus'"));
}

TEST(ScriptParseTest, CaretUnderATabIndentedCommand) {
  // The caret line repeats the tab so the caret lines up however wide the
  // terminal shows tabs.
  EXPECT_THAT(Script::Parse("t.ferry", "print 1\n\tbogus 1"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       absl::StrCat("t.ferry:2:2: unknown command 'bogus' "
                                    "(expected one of: ",
                                    kCommandList,
                                    ")\n"
                                    "    \tbogus 1\n"
                                    "    \t^")));
}

TEST(ScriptParseTest, CaretAfterMultiByteCharacters) {
  // Columns count bytes (x is byte 14), the caret sits under the x as
  // shown: "é" is one character wide.
  absl::StatusOr<Script> script =
      Script::Parse("t.ferry", "print [\"\xC3\xA9\", x]");
  ASSERT_THAT(script, StatusIs(absl::StatusCode::kInvalidArgument,
                               StartsWith("t.ferry:1:14: ")));
  EXPECT_THAT(std::string(script.status().message()),
              ::testing::EndsWith("\n    print [\"\xC3\xA9\", x]\n"
                                  "                ^"));
}

TEST(ScriptParseTest, CrLfLineEnds) {
  // The quoted line has no '\r'.
  EXPECT_THAT(Script::Parse("t.ferry", "print 1\r\n  bogus 2\r\n"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::EndsWith(")\n    "
                                           "  bogus 2\n"
                                           "      ^")));
}

// --- What the parser produces ----------------------------------------------

TEST(ScriptParseTest, Statements) {
  ASSERT_OK_AND_ASSIGN(
      Script script,
      Script::Parse("t.ferry",
                    "# comment\n"
                    "R = remote worker1 add [1, 2]   # trailing comment\n"
                    "\n"
                    "  expect $R {\"a\": \"# not a comment\",\n"
                    "             \"b\": [1]}\n"
                    "status\n"
                    "echo   two  words  \n"));
  const std::vector<Statement>& s = script.statements();
  ASSERT_EQ(s.size(), 4u);

  EXPECT_EQ(s[0].line, 2);
  EXPECT_EQ(s[0].column, 1);
  EXPECT_EQ(s[0].target, "R");
  EXPECT_EQ(s[0].command, "remote");
  EXPECT_THAT(s[0].words, ElementsAre("worker1", "add"));
  ASSERT_EQ(s[0].json.size(), 1u);
  EXPECT_EQ(s[0].json[0].text, "[1, 2]");
  EXPECT_EQ(s[0].json[0].line, 2);
  EXPECT_EQ(s[0].json[0].column, 24);

  EXPECT_EQ(s[1].line, 4);
  EXPECT_EQ(s[1].column, 3);
  EXPECT_EQ(s[1].target, "");
  EXPECT_EQ(s[1].command, "expect");
  ASSERT_EQ(s[1].json.size(), 2u);
  EXPECT_EQ(s[1].json[0].text, "$R ");
  EXPECT_EQ(s[1].json[0].column, 10);
  EXPECT_EQ(s[1].json[1].text,
            "{\"a\": \"# not a comment\",\n             \"b\": [1]}");
  EXPECT_EQ(s[1].json[1].line, 4);
  EXPECT_EQ(s[1].json[1].column, 13);
  EXPECT_EQ(s[1].source, "  expect $R {\"a\": \"# not a comment\",");

  EXPECT_EQ(s[2].line, 6);
  EXPECT_EQ(s[2].command, "status");
  EXPECT_TRUE(s[2].words.empty());
  EXPECT_TRUE(s[2].json.empty());

  EXPECT_EQ(s[3].command, "echo");
  EXPECT_THAT(s[3].words, ElementsAre("  two  words"));
}

TEST(ScriptParseTest, EmptyScript) {
  ASSERT_OK_AND_ASSIGN(Script script,
                       Script::Parse("t", "\n# only comments\n   \n"));
  EXPECT_TRUE(script.statements().empty());
}

// --- Running statements that need no job -----------------------------------

struct RunResult {
  absl::Status status;
  std::string out;
};

// A job that answers every call with UNAVAILABLE and records sleeps.
class FakeJob final : public ScriptJob {
 public:
  absl::StatusOr<Value> Call(const std::string& worker, const std::string& fn,
                             std::vector<Value>) override {
    return Unreachable(absl::StrCat("call ", worker, " ", fn));
  }
  absl::StatusOr<Value> Remote(const std::string& worker, const std::string& fn,
                               std::vector<Value>) override {
    return Unreachable(absl::StrCat("remote ", worker, " ", fn));
  }
  absl::StatusOr<Value> Fetch(const Value&) override {
    return Unreachable("fetch");
  }
  absl::StatusOr<Value> RRefs(const std::string& worker) override {
    return Unreachable(absl::StrCat("rrefs ", worker));
  }
  absl::StatusOr<Value> JobStatus() override { return Unreachable("status"); }
  absl::StatusOr<Value> Functions(const std::string& worker) override {
    return Unreachable(absl::StrCat("functions ", worker));
  }
  absl::StatusOr<Value> Collective(const std::string& op, Value) override {
    return Unreachable(absl::StrCat("collective ", op));
  }
  void Sleep(absl::Duration d) override { slept.push_back(d); }

  std::vector<absl::Duration> slept;

 private:
  static absl::Status Unreachable(const std::string& what) {
    return absl::UnavailableError(absl::StrCat("no job for ", what));
  }
};

class ScriptRunTest : public ::testing::Test {
 protected:
  RunResult Run(const std::string& text) {
    absl::StatusOr<Script> script = Script::Parse("t.ferry", text);
    EXPECT_OK(script);
    if (!script.ok()) return {script.status(), ""};
    std::ostringstream out;
    absl::Status status = script->Run(job_, out);
    return {status, out.str()};
  }

  FakeJob job_;
};

TEST_F(ScriptRunTest, UnboundValueIsPrintedAsJson) {
  RunResult r =
      Run("value [1, 2.5, \"x\", null, true]\nvalue {\"b\": 1, \"a\": 2}");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "[1,2.5,\"x\",null,true]\n{\"a\":2,\"b\":1}\n");
}

TEST_F(ScriptRunTest, BoundValueIsNotPrinted) {
  RunResult r =
      Run("X = value {\"a\": [1, 2]}\nY = value {\"x\": $X}\nprint $Y");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "{\"x\":{\"a\":[1,2]}}\n");
}

TEST_F(ScriptRunTest, VariablesCanBeRebound) {
  RunResult r = Run("X = value 1\nX = value [$X, $X]\nprint $X");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "[1,1]\n");
}

TEST_F(ScriptRunTest, PrintWritesCompactJson) {
  RunResult r =
      Run("print {\"t\": {\"dtype\": \"int32\", \"data\": [1, 2]},\n"
          "       \"s\": \"a # b\"}");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out,
            "{\"s\":\"a # b\",\"t\":{\"dtype\":\"int32\",\"data\":[1,2]}}\n");
}

TEST_F(ScriptRunTest, ShowRendersForPeople) {
  RunResult r =
      Run("T = value {\"dtype\": \"int64\", \"data\": [0, 4, 8]}\n"
          "show $T\n"
          "show {\"ranks\": [$T, null]}");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out,
            "  tensor([0, 4, 8])\n"
            "  rank 0: tensor([0, 4, 8])\n"
            "  rank 1: (not taking part)\n");
}

TEST_F(ScriptRunTest, EchoKeepsLeadingSpacesAfterTheSeparatingSpace) {
  RunResult r = Run("echo    indented text  \necho plain");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "   indented text\nplain\n");
}

TEST_F(ScriptRunTest, EchoAlonePrintsAnEmptyLine) {
  RunResult r = Run("echo a\necho\necho b");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "a\n\nb\n");
}

TEST_F(ScriptRunTest, EchoEqualsIsTextNotAnAssignment) {
  RunResult r = Run("echo = x\necho == 1. all_to_all");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "= x\n== 1. all_to_all\n");
}

TEST_F(ScriptRunTest, EchoTextIsNotJson) {
  // Brackets, braces, quotes and $ in text are characters: they neither
  // continue the statement onto the next line nor name variables.
  RunResult r =
      Run("echo input = [1, 2, {3\n"
          "echo say \"hi\n"
          "echo cost: $5 ]]\n"
          "print 1");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "input = [1, 2, {3\nsay \"hi\ncost: $5 ]]\n1\n");
}

TEST_F(ScriptRunTest, EchoDropsComments) {
  RunResult r = Run("echo text # not shown\necho \"# quoted\" # dropped");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "text\n\"# quoted\"\n");
}

TEST_F(ScriptRunTest, CrLfScript) {
  RunResult r = Run("echo hi  \r\nprint [1,\r\n  2]\r\necho\r\n");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "hi\n[1,2]\n\n");
}

TEST_F(ScriptRunTest, ExpectSucceeds) {
  RunResult r =
      Run("X = value {\"ranks\": [{\"dtype\": \"int64\", \"data\": [1, 2]}, "
          "null]}\n"
          "expect $X {\"ranks\": [{\"dtype\": \"int64\", \"data\": [1, 2]},\n"
          "                     null]}\n"
          "echo ok");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "ok\n");
}

TEST_F(ScriptRunTest, ExpectFailureShowsPathElementAndBothTensors) {
  RunResult r =
      Run("X = value {\"ranks\": [{\"dtype\": \"int64\", \"data\": "
          "[20,21,22,23,24,25,26,27,31]}]}\n"
          "  expect $X {\"ranks\": [{\"dtype\": \"int64\", \"data\": "
          "[20,21,22,23,24,25,26,27,32]}]}\n"
          "echo not reached");
  EXPECT_THAT(
      r.status,
      StatusIs(absl::StatusCode::kFailedPrecondition,
               "t.ferry:2:3: expect failed: ranks[0].data[8]: got 31, "
               "expected 32\n"
               "      got:      [20,21,22,23,24,25,26,27,31]\n"
               "      expected: [20,21,22,23,24,25,26,27,32]\n"
               "      expect $X {\"ranks\": [{\"dtype\": \"int64\", \"data\": "
               "[20,21,22,23,24,25,26,27,32]}]}\n"
               "      ^"));
  EXPECT_EQ(r.out, "");  // Stops at the failure.
}

TEST_F(ScriptRunTest, ExpectFailureOnAPlainValue) {
  RunResult r =
      Run("X = value {\"a\": [1, {\"b\": \"x\"}]}\n"
          "expect $X {\"a\": [1, {\"b\": \"y\"}]}");
  EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kFailedPrecondition,
                                 StartsWith("t.ferry:2:1: expect failed: "
                                            "a[1].b: got \"x\", expected "
                                            "\"y\"\n")));
}

TEST_F(ScriptRunTest, ExpectFailureOnMissingRank) {
  RunResult r = Run("expect {\"ranks\": [1]} {\"ranks\": [1, 2]}");
  EXPECT_THAT(r.status,
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       StartsWith("t.ferry:1:1: expect failed: ranks: got 1 "
                                  "items, expected 2\n")));
}

TEST_F(ScriptRunTest, SleepTakesMilliseconds) {
  RunResult r = Run("sleep 0\necho done");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "done\n");

  r = Run("echo before\n sleep soon");
  EXPECT_THAT(r.status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "t.ferry:2:2: sleep takes milliseconds, got 'soon'\n"
                       "     sleep soon\n"
                       "     ^"));
  EXPECT_EQ(r.out, "before\n");
}

// ---- Hostile scripts ----

TEST_F(ScriptRunTest, ShowOfAKjtWithOverflowingLengths) {
  // Segfaulted: the lengths' sum overflows int64.
  RunResult r =
      Run("X = value {\"keys\":[\"a\",\"b\"],\"lengths\":{\"dtype\":\"int64\","
          "\"data\":[9223372036854775807,9223370937343148033,1,1]},"
          "\"values\":[1]}\n"
          "show $X\n");
  EXPECT_OK(r.status);
  EXPECT_THAT(r.out, HasSubstr("'a'   [1]   []"));
}

TEST_F(ScriptRunTest, NestingThroughSubstitutionStopsAtTheLimit) {
  // Segfaulted ~24,000 levels down: each line nested $Z one level deeper.
  std::string text = "Z = value 1\n";
  for (int i = 0; i < 100; ++i) text += "Z = value [$Z]\n";
  RunResult r = Run(text + "print $Z\n");
  // Line 66 would make the 65th level.
  EXPECT_THAT(r.status,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(StartsWith("t.ferry:66:1: json: line 1, column "
                                        "2: nesting deeper than 64 levels"),
                             HasSubstr("Z = value [$Z]"))));
}

TEST_F(ScriptRunTest, DoublingThroughSubstitutionMeetsTheItemLimit) {
  std::string text = "Z = value [1]\n";
  for (int i = 0; i < 30; ++i) text += "Z = value [$Z, $Z]\n";
  Limits limits;
  limits.max_items = 1000;
  ASSERT_OK_AND_ASSIGN(Script script, Script::Parse("t.ferry", text, limits));
  std::ostringstream out;
  // Line n holds 3 * 2^(n-2) - 1 values: 767 on line 9, 1535 on line 10.
  EXPECT_THAT(script.Run(job_, out),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(StartsWith("t.ferry:10:1: "),
                             HasSubstr("(--max_items=1000)"))));
}

TEST_F(ScriptRunTest, TinyNumbersPrintAsZero) {
  RunResult r = Run("print 1e-400\nprint [-1e-400, 1e400]\n");
  EXPECT_OK(r.status);
  EXPECT_EQ(r.out, "0.0\n[-0.0,{\"$double\":\"Infinity\"}]\n");
}

TEST_F(ScriptRunTest, JobStatementsGoToTheJob) {
  RunResult r = Run("sleep 250\nX = call worker1 echo [1]\n");
  EXPECT_THAT(r.status, StatusIs(absl::StatusCode::kUnavailable,
                                 HasSubstr("no job for call worker1 echo")));
  EXPECT_THAT(job_.slept, ElementsAre(absl::Milliseconds(250)));
}

}  // namespace
}  // namespace ctl
}  // namespace ferry
