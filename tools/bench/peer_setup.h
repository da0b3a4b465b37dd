// Where ferry_bench --peers finds its peer programs (tools/bench/peers/,
// Bazel data of ferry_bench) and a Python that imports torch (Debian's
// python3-torch lives in /usr/bin/python3's path, not in other Pythons a
// PATH may put first). torch is optional: only --peers needs it.
#ifndef FERRY_TOOLS_BENCH_PEER_SETUP_H_
#define FERRY_TOOLS_BENCH_PEER_SETUP_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {
namespace bench {

struct PeerSetup {
  std::string python;  // An interpreter that imports torch.distributed.rpc.
  std::string dir;     // The directory holding the peer programs.

  // The command line running peer program `script` (e.g.
  // "torch_gloo_bench.py") with `args`.
  std::vector<std::string> Command(absl::string_view script,
                                   std::vector<std::string> args) const;
};

struct PeerSearch {
  // Only this interpreter; empty: /usr/bin/python3, then python3 on PATH.
  std::string python;
  // Only this directory; empty: $RUNFILES_DIR's, this binary's runfiles,
  // then tools/bench/peers under the working directory (a checkout's root,
  // or `bazel run`'s runfiles).
  std::string dir;
};

// NOT_FOUND if no candidate directory holds the peer programs;
// FAILED_PRECONDITION, naming the interpreters tried and what to install,
// if none imports torch (each is tried for up to 2 minutes).
absl::StatusOr<PeerSetup> FindPeers(const PeerSearch& search);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_PEER_SETUP_H_
