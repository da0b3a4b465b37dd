#include "tools/bench/peer_setup.h"

#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "tools/bench/peer_process.h"

namespace ferry {
namespace bench {

namespace {

constexpr const char* kScripts[] = {"torch_rpc_bench.py",
                                    "torch_gloo_bench.py"};
constexpr const char* kInRunfiles = "/ferry/tools/bench/peers";

// Prints "ok" only where torch and its RPC and Gloo parts import, so the
// probe is a peer like the others (PeerProcess) and says why it failed on
// one line instead of a traceback.
constexpr const char* kProbe =
    "try:\n"
    "  import torch.distributed as d, torch.distributed.rpc as r\n"
    "  assert d.is_gloo_available() and r.is_available(), 'no Gloo or RPC'\n"
    "except Exception as e:\n"
    "  print(type(e).__name__ + ': ' + str(e))\n"
    "else:\n"
    "  print('ok')\n";

bool HasScripts(const std::string& dir) {
  for (const char* script : kScripts) {
    if (access(absl::StrCat(dir, "/", script).c_str(), R_OK) != 0) {
      return false;
    }
  }
  return true;
}

std::vector<std::string> CandidateDirs(const PeerSearch& search) {
  if (!search.dir.empty()) return {search.dir};
  std::vector<std::string> dirs;
  if (const char* runfiles = getenv("RUNFILES_DIR")) {
    dirs.push_back(absl::StrCat(runfiles, kInRunfiles));
  }
  if (char* exe = realpath("/proc/self/exe", nullptr)) {
    dirs.push_back(absl::StrCat(exe, ".runfiles", kInRunfiles));
    free(exe);
  }
  dirs.push_back("tools/bench/peers");
  return dirs;
}

// Empty if `python` imports torch; else why not.
std::string ProbeTorch(const std::string& python) {
  absl::StatusOr<std::unique_ptr<PeerProcess>> probe =
      PeerProcess::Start({python, "-c", kProbe}, absl::Minutes(2));
  return probe.ok() ? "" : std::string(probe.status().message());
}

}  // namespace

std::vector<std::string> PeerSetup::Command(
    absl::string_view script, std::vector<std::string> args) const {
  std::vector<std::string> argv = {python, absl::StrCat(dir, "/", script)};
  for (std::string& a : args) argv.push_back(std::move(a));
  return argv;
}

absl::StatusOr<PeerSetup> FindPeers(const PeerSearch& search) {
  PeerSetup setup;
  std::vector<std::string> dirs = CandidateDirs(search);
  for (const std::string& dir : dirs) {
    if (HasScripts(dir)) {
      setup.dir = dir;
      break;
    }
  }
  if (setup.dir.empty()) {
    return absl::NotFoundError(
        absl::StrCat("the peer programs (", kScripts[0], ", ", kScripts[1],
                     ") are in none of: ", absl::StrJoin(dirs, ", ")));
  }
  std::vector<std::string> pythons = {search.python};
  if (search.python.empty()) pythons = {"/usr/bin/python3", "python3"};
  std::vector<std::string> tried;
  for (const std::string& python : pythons) {
    std::string why = ProbeTorch(python);
    if (why.empty()) {
      setup.python = python;
      return setup;
    }
    tried.push_back(absl::StrCat(python, " (", why, ")"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "no Python with torch: ", absl::StrJoin(tried, "; "),
      "; install Debian's python3-torch (tools/dev bench --peers does)"));
}

}  // namespace bench
}  // namespace ferry
