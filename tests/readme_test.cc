// README.md cannot rot: every command in it runs here (or, for the two
// commands it opens with, in CI — checked here too). Code blocks are found
// by the marker on the line before them:
//
//   <!-- readme-test: ci -->           each command appears in .ci/run
//   <!-- readme-test: cpp FILE -->     the block is FILE, which builds; it runs
//                                      (the client against a job, the
//                                      worker as the two ranks of one)
//   <!-- readme-test: cheatsheet -->   runs as a shell script
//   <!-- readme-test: install -->      runs in a scratch HOME, with
//                                      tools/install.sh over the test's
//                                      (unoptimized) build standing in for
//                                      `tools/dev install`; the programs it
//                                      builds (with only the installed
//                                      include/ferry/) must work, the
//                                      client against the installed
//                                      daemons
//   <!-- readme-test: python FILE -->  the block is FILE, run as a job of
//                                      two Python workers (checked by
//                                      tests/tools/python/examples_test.py)
//   <!-- readme-test: launch N -->     each line starts a worker (srun and
//                                      mpirun are stand-ins setting their
//                                      variables) or runs ferryctl; the job
//                                      must form with N workers
//   <!-- readme-test: etcd N -->       its etcd command runs once per member
//                                      (N = 1, 2, 3), its exports hold for
//                                      what follows, its ferryd line runs N
//                                      times; its ferryctl line must show
//                                      the job of N workers (skipped where
//                                      etcd is not installed)
//
// The blocks use the master 10.0.0.1:29500; here it is 127.0.0.1 on a free
// port, and `ferryctl up` picks its port.
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::BackgroundProcess;
using ::ferry::testing::DaemonCluster;
using ::ferry::testing::ProcessOptions;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::Runfile;
using ::ferry::testing::RunProcess;
using ::ferry::testing::UnusedPort;
using ::testing::HasSubstr;

constexpr absl::Duration kBound = absl::Seconds(60);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& text,
               bool executable = false) {
  std::ofstream(path) << text;
  if (executable) chmod(path.c_str(), 0755);
}

// The names in `dir` (not . and ..), sorted.
std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Block {
  std::string kind;  // "ci", "cpp FILE", …
  std::string code;
};

std::vector<Block> Blocks() {
  std::vector<Block> blocks;
  std::string kind;
  bool in_block = false;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(Runfile("README.md")), '\n')) {
    if (in_block) {
      if (absl::StartsWith(line, "```")) {
        in_block = false;
      } else {
        absl::StrAppend(&blocks.back().code, line, "\n");
      }
    } else if (absl::ConsumePrefix(&line, "<!-- readme-test: ") &&
               absl::ConsumeSuffix(&line, " -->")) {
      kind = std::string(line);
    } else if (!kind.empty() && absl::StartsWith(line, "```")) {
      blocks.push_back({kind, ""});
      kind.clear();
      in_block = true;
    }
  }
  return blocks;
}

std::vector<Block> BlocksOf(absl::string_view kind) {
  std::vector<Block> out;
  for (Block& b : Blocks()) {
    if (absl::StartsWith(b.kind, kind)) out.push_back(std::move(b));
  }
  return out;
}

// A line without its comment and surrounding space.
std::string Command(absl::string_view line) {
  return std::string(
      absl::StripAsciiWhitespace(line.substr(0, line.find('#'))));
}

// A scratch directory with the binaries (and launcher stand-ins) on PATH.
class Sandbox {
 public:
  Sandbox() {
    static int n = 0;
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/readme-", n++);
    mkdir(dir_.c_str(), 0755);
    mkdir(Bin().c_str(), 0755);
    for (const char* tool : {"ferryd", "ferryctl"}) {
      symlink(Runfile(absl::StrCat("tools/", tool)).c_str(),
              (Bin() + "/" + tool).c_str());
    }
    // Stand-ins for Slurm's srun and Open MPI's mpirun: N copies of the
    // command, each with the variables the real launcher sets.
    WriteFile(Bin() + "/srun", R"(#!/usr/bin/env bash
n=1
while [[ $1 == -* ]]; do
  case $1 in --ntasks=*) n=${1#*=} ;; -n) shift; n=$1 ;; esac
  shift
done
for ((i = 0; i < n; i++)); do SLURM_PROCID=$i SLURM_NTASKS=$n "$@" & done
wait
)",
              true);
    WriteFile(Bin() + "/mpirun", R"(#!/usr/bin/env bash
n=1
while [[ $1 == -* ]]; do
  case $1 in -np|-n) shift; n=$1 ;; esac
  shift
done
for ((i = 0; i < n; i++)); do OMPI_COMM_WORLD_RANK=$i OMPI_COMM_WORLD_SIZE=$n "$@" & done
wait
)",
              true);
    // The security examples' files; secrets private, as README says.
    for (const char* f : {"token.txt", "node.pem", "node.key", "ca.pem"}) {
      const std::string path = absl::StrCat(dir_, "/", f);
      WriteFile(path,
                ReadFile(Runfile(absl::StrCat("tests/testdata/tls/", f))));
      chmod(path.c_str(), 0600);
    }
  }

  std::string Bin() const { return dir_ + "/bin"; }
  const std::string& dir() const { return dir_; }

  // bash -c `script` in the sandbox, from the repository's root (runfiles).
  std::vector<std::string> Bash(const std::string& script) const {
    return {"/bin/bash", "-c",
            absl::StrCat("set -euo pipefail; export PATH='", Bin(),
                         "':\"$PATH\"; cd '", std::getenv("TEST_SRCDIR"),
                         "/ferry'; ", script)};
  }
  ProcessOptions Options() const {
    ProcessOptions o;
    o.env = {{"FERRY_MASTER", ""}, {"FERRYD", Runfile("tools/ferryd")}};
    return o;
  }

 private:
  std::string dir_;
};

TEST(ReadmeTest, CiRunsTheOpeningCommands) {
  std::vector<Block> ci = BlocksOf("ci");
  ASSERT_EQ(ci.size(), 1u);
  const std::string run = ReadFile(Runfile(".ci/run"));
  std::vector<std::string> commands;
  for (absl::string_view line :
       absl::StrSplit(ci[0].code, '\n', absl::SkipWhitespace())) {
    commands.push_back(Command(line));
  }
  EXPECT_THAT(commands,
              ::testing::ElementsAre("tools/dev demo", "tools/dev test"));
  size_t at = 0;
  for (const std::string& c : commands) {  // In CI, and in that order.
    size_t found = run.find("\n" + c + "\n", at);
    EXPECT_NE(found, std::string::npos) << c << " is not run by .ci/run:\n"
                                        << run;
    at = found == std::string::npos ? at : found + 1;
  }
}

TEST(ReadmeTest, CppExamplesAreTheFiles) {
  std::vector<Block> cpp = BlocksOf("cpp ");
  std::vector<std::string> files;
  for (const Block& b : cpp) {
    const std::string file = b.kind.substr(4);
    files.push_back(file);
    EXPECT_EQ(b.code, ReadFile(Runfile(file)))
        << "README.md and " << file << " differ";
  }
  EXPECT_THAT(files,
              ::testing::ElementsAre("tools/examples/client_example.cc",
                                     "tools/examples/worker_example.cc"));
}

constexpr char kClientOutput[] =
    "{\"dtype\":\"float32\",\"data\":[4,5]}\n{\"dtype\":\"int64\","
    "\"data\":[0,1,2,3,4]}\n";

TEST(ReadmeTest, ClientExampleRuns) {
  ASSERT_OK_AND_ASSIGN(auto job, DaemonCluster::Up(3));
  ASSERT_OK_AND_ASSIGN(
      ProcessResult r,
      RunProcess({Runfile("tools/examples/client_example"), job->master()}, {},
                 kBound));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, kClientOutput);
}

// Runs `program` (worker_example, as built) as the two ranks of a job.
void ExpectWorkerExampleRuns(const std::string& program) {
  const std::string master = absl::StrCat("127.0.0.1:", UnusedPort());
  ASSERT_OK_AND_ASSIGN(auto rank0,
                       BackgroundProcess::Start({program, "0", "2", master}));
  ASSERT_OK_AND_ASSIGN(ProcessResult rank1,
                       RunProcess({program, "1", "2", master}, {}, kBound));
  ProcessResult r0 = rank0->Wait(kBound);
  EXPECT_EQ(r0.exit_code, 0) << r0.Describe();
  EXPECT_EQ(r0.out,
            "{\"dtype\":\"float32\",\"data\":[3,6]}\n"  // scale on worker1
            "{\"dtype\":\"float32\",\"data\":[3]}\n");  // all_reduce
  EXPECT_EQ(rank1.exit_code, 0) << rank1.Describe();
  EXPECT_EQ(rank1.out, "{\"dtype\":\"float32\",\"data\":[3]}\n");
}

TEST(ReadmeTest, WorkerExampleRunsAsAJobOfTwo) {
  ExpectWorkerExampleRuns(Runfile("tools/examples/worker_example"));
}

// Replaces the sandbox's ferryctl with a script: `up` picks its port and
// keeps the job in the sandbox, and the commands after it find the job.
void UseJobOfUp(const Sandbox& box) {
  const std::string master_file = box.dir() + "/master";
  unlink((box.Bin() + "/ferryctl").c_str());  // The symlink: a script instead.
  constexpr char kWrapper[] = R"sh(#!/usr/bin/env bash
real='REAL'
if [ "$1" = up ]; then
  out=$("$real" up --port=0 --dir='DIR/job' "${@:2}")
  echo "$out"
  printf '%s' "$out" | sed -n 's/.*"master":"\([^"]*\)".*/\1/p' > 'MASTER'
  exit
fi
[ -s 'MASTER' ] && exec "$real" --master="$(cat 'MASTER')" "$@"
exec "$real" "$@"
)sh";
  WriteFile(box.Bin() + "/ferryctl",
            absl::StrReplaceAll(kWrapper, {{"REAL", Runfile("tools/ferryctl")},
                                           {"DIR", box.dir()},
                                           {"MASTER", master_file}}),
            true);
}

TEST(ReadmeTest, CheatSheetRuns) {
  std::vector<Block> sheet = BlocksOf("cheatsheet");
  ASSERT_EQ(sheet.size(), 1u);
  Sandbox box;
  UseJobOfUp(box);
  ASSERT_OK_AND_ASSIGN(
      ProcessResult r,
      RunProcess(box.Bash(sheet[0].code), box.Options(), absl::Minutes(3)));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out,
              HasSubstr("{\"dtype\":\"float32\",\"data\":[4,5]}"));  // call
  EXPECT_THAT(
      r.out, HasSubstr("\"value\":{\"dtype\":\"int64\",\"data\":[0,1,2,3,4]}"));
  EXPECT_THAT(
      r.out, HasSubstr("{\"dtype\":\"float32\",\"data\":[10]}"));  // all_reduce
  EXPECT_THAT(r.out, HasSubstr("demo: all 8 scenarios reproduced"));
  EXPECT_THAT(r.out, HasSubstr("\"stopped\""));              // down
  EXPECT_THAT(r.out, ::testing::EndsWith("\"worker1\"\n"));  // --local
}

TEST(ReadmeTest, ObserveBlockRuns) {
  std::vector<Block> block = BlocksOf("observe");
  ASSERT_EQ(block.size(), 1u);
  Sandbox box;
  UseJobOfUp(box);
  ASSERT_OK_AND_ASSIGN(ProcessResult r,
                       RunProcess(box.Bash(absl::StrCat("cd '", box.dir(),
                                                        "'; ", block[0].code)),
                                  box.Options(), absl::Minutes(3)));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_THAT(r.out, HasSubstr("\"metrics_address\":\"127.0.0.1:"));  // status
  EXPECT_THAT(r.out, HasSubstr("\"dumps/worker2.json\""));            // dump
  EXPECT_THAT(r.out, HasSubstr("3 dumps: worker0 worker1 worker2"));  // analyze
  EXPECT_THAT(r.out, HasSubstr("\"function\":\"ferry.stacks\""));     // stacks
  EXPECT_THAT(r.out, HasSubstr("\"result\":3"));                      // --trace
  EXPECT_THAT(r.out, HasSubstr("\"stopped\""));                       // down
}

// The master of a job `ferryctl up` started, from its output.
std::string MasterOf(const std::string& up_output) {
  absl::StatusOr<Value> up = ParseJson(up_output);
  if (!up.ok() || up->Find("master") == nullptr) return "";
  return up->Find("master")->as_string();
}

TEST(ReadmeTest, InstallBlockBuildsAProgramOutsideBazel) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  // The install is of this build: under --config=asan its libferry carries
  // the sanitizer, which a program built outside Bazel without it cannot
  // load (ASan's shadow must be mapped before anything else).
  GTEST_SKIP() << "the installed library is ASan's; the user's build is not";
#endif
#endif
  std::vector<Block> install = BlocksOf("install");
  ASSERT_EQ(install.size(), 1u);
  Sandbox box;
  // A checkout whose tools/dev installs what this test was built with.
  const std::string repo = box.dir() + "/repo";
  const std::string built = std::string(std::getenv("TEST_SRCDIR")) + "/ferry";
  for (const char* d : {"", "/tools", "/tools/examples"}) {
    mkdir((repo + d).c_str(), 0755);
  }
  WriteFile(repo + "/tools/dev",
            absl::StrReplaceAll(
                R"sh(#!/usr/bin/env bash
[ "$1" = install ] && mkdir -p "$2" && exec 'INSTALL' "$2" 'BUILT'
exit 2
)sh",
                {{"INSTALL", Runfile("tools/install.sh")}, {"BUILT", built}}),
            true);
  for (const char* example : {"client_example.cc", "worker_example.cc"}) {
    WriteFile(absl::StrCat(repo, "/tools/examples/", example),
              ReadFile(Runfile(absl::StrCat("tools/examples/", example))));
  }
  ProcessOptions o = box.Options();
  o.env.push_back({"HOME", box.dir()});
  ASSERT_OK_AND_ASSIGN(
      ProcessResult built_app,
      RunProcess(box.Bash(absl::StrCat("cd '", repo, "'; ", install[0].code)),
                 o, absl::Minutes(3)));
  ASSERT_EQ(built_app.exit_code, 0) << built_app.Describe();
  // The headers are ferry's alone: include/ holds ferry/ and nothing else,
  // and ferry.pc points the compiler there only.
  EXPECT_THAT(DirEntries(box.dir() + "/.local/include"),
              ::testing::ElementsAre("ferry"));
  ASSERT_OK_AND_ASSIGN(
      ProcessResult cflags,
      RunProcess(
          box.Bash("pkg-config --cflags ferry"),
          {.env = {{"PKG_CONFIG_PATH", box.dir() + "/.local/lib/pkgconfig"}}},
          kBound));
  const std::vector<std::string> flags =
      absl::StrSplit(cflags.out, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  const std::string include_flag =
      absl::StrCat("-I", box.dir(), "/.local/include");
  EXPECT_THAT(flags, ::testing::Contains(include_flag)) << cflags.Describe();
  EXPECT_THAT(cflags.out, ::testing::Not(HasSubstr("/include/ferry")));
  ExpectWorkerExampleRuns(repo + "/worker_example");
  // The Python package, ferry.rpc included, and its metadata: torchrun
  // finds ferry-etcd through its entry point.
  ASSERT_OK_AND_ASSIGN(
      ProcessResult py,
      RunProcess(box.Bash("python3 -c 'import importlib.metadata as m, "
                          "ferry.rpc, ferry.torchrun; print(sorted(e.name "
                          "for e in m.entry_points(group=\"torchrun."
                          "handlers\")))'"),
                 {.env = {{"PYTHONPATH",
                           box.dir() + "/.local/lib/python3/dist-packages"}}},
                 kBound));
  EXPECT_EQ(py.out, "['ferry-etcd']\n") << py.Describe();

  // The installed daemons, started by the installed ferryctl.
  const std::string bin = box.dir() + "/.local/bin/";
  ASSERT_OK_AND_ASSIGN(
      ProcessResult up,
      RunProcess({bin + "ferryctl", "up", "--world_size=3", "--port=0",
                  "--dir=" + box.dir() + "/job"},
                 {.env = {{"FERRYD", bin + "ferryd"}}}, kBound));
  ASSERT_EQ(up.exit_code, 0) << up.Describe();
  const std::string master = MasterOf(up.out);
  ASSERT_FALSE(master.empty()) << up.Describe();
  ASSERT_OK_AND_ASSIGN(
      ProcessResult r,
      RunProcess({repo + "/client_example", master}, {}, kBound));
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  EXPECT_EQ(r.out, kClientOutput);
  ASSERT_OK_AND_ASSIGN(
      ProcessResult down,
      RunProcess({bin + "ferryctl", "--master=" + master, "down"}, {}, kBound));
  EXPECT_EQ(down.exit_code, 0) << down.Describe();
}

// Whether something listens on 127.0.0.1:`port`, polled up to `bound` (a
// worker under a sanitizer on a busy machine may take a while to start).
bool AwaitListener(int port, absl::Duration bound) {
  return AwaitTrue(
      [port] {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(port);
        const bool up =
            connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
        close(fd);
        return up;
      },
      bound, /*every=*/absl::Milliseconds(50));
}

// Checks `ferryctl … status` output lists `world` workers.
void ExpectWorkers(const ProcessResult& r, int world) {
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  absl::StatusOr<Value> status = ParseJson(r.out);
  ASSERT_TRUE(status.ok() && status->Find("workers") != nullptr)
      << r.Describe();
  EXPECT_EQ(status->Find("workers")->as_list().size(),
            static_cast<size_t>(world));
}

// Each launch block forms a job of its stated size; ferryctl lines in it
// must succeed against that job.
TEST(ReadmeTest, LaunchBlocksFormJobs) {
  std::vector<Block> launches = BlocksOf("launch ");
  ASSERT_GE(launches.size(), 5u);
  for (const Block& block : launches) {
    SCOPED_TRACE(block.code);
    int world = 0;
    ASSERT_TRUE(absl::SimpleAtoi(block.kind.substr(7), &world));
    Sandbox box;
    const int port = UnusedPort();
    const std::string master = absl::StrCat("127.0.0.1:", port);
    auto in_box = [&](const std::string& line) {
      return box.Bash(absl::StrCat("cd '", box.dir(), "'; exec ", line));
    };
    std::vector<std::unique_ptr<BackgroundProcess>> workers;
    std::string ctl_flags;  // The security flags of the block's ferryctl line.
    bool checked = false;
    for (absl::string_view raw :
         absl::StrSplit(block.code, '\n', absl::SkipWhitespace())) {
      std::string line = absl::StrReplaceAll(
          Command(raw),
          {{"10.0.0.1:29500", master},
           {"127.0.0.1:29500", master},
           {"MASTER_ADDR=10.0.0.1", "MASTER_ADDR=127.0.0.1"},
           {"MASTER_PORT=29500", absl::StrCat("MASTER_PORT=", port)}});
      if (!absl::StartsWith(line, "ferryctl")) {
        // "VAR=x … ferryd": env runs it, so exec replaces the shell.
        if (line.find('=') < line.find(' ')) line = "env " + line;
        absl::StatusOr<std::unique_ptr<BackgroundProcess>> w =
            BackgroundProcess::Start(in_box(line), box.Options());
        ASSERT_OK(w);
        workers.push_back(*std::move(w));
        continue;
      }
      ctl_flags = line.substr(8, line.find(" status") - 8);
      EXPECT_TRUE(AwaitListener(port, kBound)) << "rank 0 never listened";
      absl::StatusOr<ProcessResult> r =
          RunProcess(in_box(line), box.Options(), kBound);
      ASSERT_OK(r);
      ExpectWorkers(*r, world);
      checked = true;
    }
    const std::string ctl =
        absl::StrCat("ferryctl", ctl_flags, " --master=", master, " ");
    if (!checked) {
      EXPECT_TRUE(AwaitListener(port, kBound)) << "rank 0 never listened";
      absl::StatusOr<ProcessResult> r =
          RunProcess(in_box(ctl + "status"), box.Options(), kBound);
      ASSERT_OK(r);
      ExpectWorkers(*r, world);
    }
    absl::StatusOr<ProcessResult> down =
        RunProcess(in_box(ctl + "down"), box.Options(), kBound);
    ASSERT_OK(down);
    EXPECT_EQ(down->exit_code, 0) << down->Describe();
    for (auto& w : workers) {  // Their logs, if anything went wrong.
      ProcessResult r = w->Wait(absl::Seconds(30));
      EXPECT_FALSE(r.timed_out) << r.Describe();
      if (::testing::Test::HasFailure()) std::cerr << r.Describe() << "\n";
    }
  }
}

// The block's lines, continuations joined.
std::vector<std::string> Lines(const std::string& code) {
  std::vector<std::string> lines;
  bool continued = false;
  for (absl::string_view raw : absl::StrSplit(code, '\n')) {
    std::string line = Command(raw);
    const bool more = absl::ConsumeSuffix(&raw, "\\");
    if (more) line = Command(raw);
    if (continued) {
      absl::StrAppend(&lines.back(), " ", line);
    } else if (!line.empty()) {
      lines.push_back(line);
    }
    continued = more;
  }
  return lines;
}

// The three hosts of the etcd block are 127.0.0.1 here, each member on
// ports of its own.
TEST(ReadmeTest, EtcdBlockRunsAJobOnThreeMembers) {
  const char* etcd = std::getenv("FERRY_ETCD");
  if (access(etcd != nullptr ? etcd : "/usr/bin/etcd", X_OK) != 0) {
    GTEST_SKIP() << "etcd is not installed (tools/dev setup installs it)";
  }
  std::vector<Block> blocks = BlocksOf("etcd ");
  ASSERT_EQ(blocks.size(), 1u);
  int world = 0;
  ASSERT_TRUE(absl::SimpleAtoi(blocks[0].kind.substr(5), &world));
  Sandbox box;
  std::vector<std::pair<std::string, std::string>> hosts = {
      {"/var/lib/ferry-etcd", box.dir() + "/etcd$N"},
      {"$(hostname -i)", "127.0.0.1"},
      {"10.0.0.$N:2379", "127.0.0.1:$C"},
      {"10.0.0.$N:2380", "127.0.0.1:$P"}};
  std::string members;  // "C=…; P=…" for member N, by N.
  std::vector<std::string> ports;
  for (int n = 1; n <= 3; ++n) {
    const int client = UnusedPort(), peer = UnusedPort();
    hosts.emplace_back(absl::StrCat("10.0.0.", n, ":2379"),
                       absl::StrCat("127.0.0.1:", client));
    hosts.emplace_back(absl::StrCat("10.0.0.", n, ":2380"),
                       absl::StrCat("127.0.0.1:", peer));
    ports.push_back(absl::StrCat("N=", n, "; C=", client, "; P=", peer, "; "));
  }
  auto in_box = [&](const std::string& line) {
    return box.Bash(absl::StrCat("cd '", box.dir(), "'; ", line));
  };
  std::vector<std::unique_ptr<BackgroundProcess>> processes;
  std::string exports;
  bool checked = false;
  ProcessOptions options = box.Options();
  options.die_with_parent = true;
  for (std::string line : Lines(blocks[0].code)) {
    line = absl::StrReplaceAll(line, hosts);
    if (absl::StartsWith(line, "export ")) {
      absl::StrAppend(&exports, line, "; ");
      continue;
    }
    const bool etcd_line = absl::StartsWith(line, "etcd ");
    if (etcd_line || absl::StartsWith(line, "ferryd ")) {
      for (int i = 0; i < (etcd_line ? 3 : world); ++i) {
        std::string command =
            absl::StrCat(exports, etcd_line ? ports[i] : "", "exec ",
                         etcd_line && etcd != nullptr
                             ? absl::StrReplaceAll(
                                   line, {{"etcd ", std::string(etcd) + " "}})
                             : line);
        absl::StatusOr<std::unique_ptr<BackgroundProcess>> p =
            BackgroundProcess::Start(in_box(command), options);
        ASSERT_OK(p);
        processes.push_back(*std::move(p));
      }
      continue;
    }
    ASSERT_TRUE(absl::StartsWith(line, "ferryctl")) << line;
    absl::StatusOr<ProcessResult> r =
        RunProcess(in_box(exports + line), box.Options(), kBound);
    ASSERT_OK(r);
    ExpectWorkers(*r, world);
    checked = true;
  }
  EXPECT_TRUE(checked) << "no ferryctl line in the etcd block";
  absl::StatusOr<ProcessResult> down = RunProcess(
      in_box(exports + "ferryctl --insecure down"), box.Options(), kBound);
  ASSERT_OK(down);
  EXPECT_EQ(down->exit_code, 0) << down->Describe();
  for (size_t i = 3; i < processes.size(); ++i) {  // The workers left.
    ProcessResult r = processes[i]->Wait(absl::Seconds(30));
    EXPECT_EQ(r.exit_code, 0) << r.Describe();
  }
}

TEST(ReadmeTest, HelpCommandsWork) {
  Sandbox box;
  struct Help {
    const char* command;
    const char* shows;
  };
  const Help kCommands[] = {{"ferryctl --help", "usage: ferryctl"},
                            {"ferryd --help", "--world_size"},
                            {"tools/dev --help", "tools/dev demo"}};
  for (const Help& h : kCommands) {
    ASSERT_OK_AND_ASSIGN(ProcessResult r, RunProcess(box.Bash(h.command),
                                                     box.Options(), kBound));
    EXPECT_EQ(r.exit_code, 0) << h.command << "\n" << r.Describe();
    EXPECT_THAT(r.out + r.err, HasSubstr(h.shows)) << h.command;
  }
}

}  // namespace
}  // namespace ferry
