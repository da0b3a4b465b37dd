// ferry.h as installed (//:ferry_headers, what `tools/dev install` puts
// under PREFIX/include): it compiles with -I of that directory alone, it
// includes no gRPC and no generated (protobuf) header, and the directory
// holds exactly the headers the compiler opens for it — nothing more.
// Checked with the compiler's include trace (-H).
#include <dirent.h>
#include <sys/stat.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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

// The files under `dir`, by their paths relative to `root`.
void FilesUnder(const std::string& root, const std::string& dir,
                std::set<std::string>* out) {
  DIR* d = opendir((root + dir).c_str());
  ASSERT_NE(d, nullptr) << root + dir;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    ASSERT_EQ(stat((root + dir + name).c_str(), &st), 0) << dir + name;
    if (S_ISDIR(st.st_mode)) {
      FilesUnder(root, dir + name + "/", out);
    } else {
      out->insert(dir + name);
    }
  }
  closedir(d);
}

TEST(FerryHeaderTest, InstalledHeadersAreExactlyWhatFerryHIncludes) {
  const std::string dir = Runfile("ferry_headers/include");
  const std::string include = dir + "/";
  std::set<std::string> installed;
  FilesUnder(include, "", &installed);
  ASSERT_TRUE(installed.count("ferry/ferry.h")) << include;
  for (const std::string& f : installed) {
    EXPECT_TRUE(absl::StartsWith(f, "ferry/") && absl::EndsWith(f, ".h")) << f;
  }

  absl::StatusOr<ProcessResult> r =
      RunProcess({"/usr/bin/g++", "-std=c++20", "-fsyntax-only", "-H",
                  "-I" + dir, "-x", "c++", include + "ferry/ferry.h"},
                 {}, absl::Seconds(120));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->exit_code, 0) << r->Describe();
  std::vector<std::string> files = IncludedFiles(r->err);
  ASSERT_GT(files.size(), 20u) << "no include trace:\n" << r->err;
  std::set<std::string> opened = {"ferry/ferry.h"};
  for (const std::string& f : files) {
    EXPECT_FALSE(absl::StrContains(f, "grpc")) << f;
    EXPECT_FALSE(absl::StrContains(f, "google/protobuf")) << f;
    EXPECT_FALSE(absl::EndsWith(f, ".pb.h")) << f;
    absl::string_view path = f;
    if (absl::ConsumePrefix(&path, include)) {
      opened.insert(std::string(path));
    } else {
      EXPECT_TRUE(absl::StartsWith(f, "/usr/"))
          << f << ": neither installed nor a system header";
    }
  }
  EXPECT_TRUE(opened.count("ferry/tools/runtime/worker.h"))
      << "ferry.h did not include the facade";
  EXPECT_EQ(installed, opened);
}

}  // namespace
}  // namespace ferry
