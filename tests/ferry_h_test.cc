// ferry.h is the public API: what it includes, transitively, holds no gRPC
// and no generated (protobuf) header, so a user's program compiles against
// it without them. Checked by compiling it with the compiler's include
// trace (-H) over exactly the headers Bazel says it may use.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace {

using ::ferry::testing::ProcessResult;
using ::ferry::testing::Runfile;
using ::ferry::testing::RunProcess;

// The headers the compiler opened, from its -H trace ("... path" lines).
std::vector<std::string> IncludedFiles(const std::string& trace) {
  std::vector<std::string> files;
  for (absl::string_view line : absl::StrSplit(trace, '\n')) {
    if (!absl::StartsWith(line, ".")) continue;
    size_t space = line.find(' ');
    if (space != absl::string_view::npos) {
      files.emplace_back(line.substr(space + 1));
    }
  }
  return files;
}

TEST(FerryHeaderTest, IncludesNoGrpcAndNoGeneratedHeader) {
  // The runfiles root holds ferry.h and every project header it may use.
  const std::string root = Runfile("ferry.h").substr(
      0, Runfile("ferry.h").size() - std::string("ferry.h").size());
  absl::StatusOr<ProcessResult> r =
      RunProcess({"/usr/bin/g++", "-std=c++20", "-fsyntax-only", "-H",
                  "-I" + root, "-x", "c++", root + "ferry.h"},
                 {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->Describe();
  std::vector<std::string> files = IncludedFiles(r->err);
  ASSERT_GT(files.size(), 20u) << "no include trace:\n" << r->err;
  bool saw_project = false;
  for (const std::string& f : files) {
    EXPECT_FALSE(absl::StrContains(f, "grpc")) << f;
    EXPECT_FALSE(absl::StrContains(f, "google/protobuf")) << f;
    EXPECT_FALSE(absl::EndsWith(f, ".pb.h")) << f;
    saw_project |= absl::StrContains(f, "tools/runtime/worker.h");
  }
  EXPECT_TRUE(saw_project) << "ferry.h did not include the facade";
}

}  // namespace
}  // namespace ferry
