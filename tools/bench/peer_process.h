// A peer program of ferry_bench --peers (tools/bench/peers/*.py) running in
// serve mode: requests go to its stdin one line each; each reply is zero or
// more row lines (tools/bench/row.h) and one status line — "ok",
// "unsupported <why>" or "error <why>". Its first line, "ok", says it is
// ready. Closing its stdin (or "quit") ends it.
//
//   ASSIGN_OR_RETURN(auto peer, PeerProcess::Start(
//       {python, "tools/bench/peers/torch_gloo_bench.py", "--serve",
//        "--world=2"}, absl::Minutes(2)));
//   ASSIGN_OR_RETURN(std::vector<Row> rows,
//                    peer->Request("time all_reduce 1048576 10",
//                                  absl::Minutes(5)));
#ifndef FERRY_TOOLS_BENCH_PEER_PROCESS_H_
#define FERRY_TOOLS_BENCH_PEER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tools/bench/row.h"

namespace ferry {
namespace bench {

// Collects one reply line by line (the protocol above, without a process).
class ReplyReader {
 public:
  // Takes the next line (without its newline); true once the status line
  // completed the reply. Lines after that are ignored.
  bool Add(absl::string_view line);

  // Once Add returned true: the rows; UNIMPLEMENTED for "unsupported",
  // INTERNAL for "error" or a status line of neither kind, the row's
  // INVALID_ARGUMENT for a line that is not a row — each naming `peer`.
  absl::StatusOr<std::vector<Row>> Result(absl::string_view peer) const;

 private:
  std::vector<Row> rows_;
  absl::Status status_;  // The first bad row, or the status line's error.
  bool done_ = false;
};

class PeerProcess {
 public:
  // Runs `argv` (argv[0]: a program path or a name looked up on PATH) in its
  // own process group, stdin and stdout piped, stderr shared with ours, and
  // waits up to `ready_within` for its "ok". UNIMPLEMENTED if it answered
  // "unsupported <why>" (it cannot run here: a missing library), naming
  // why; UNAVAILABLE if it could not start, exited or answered otherwise;
  // DEADLINE_EXCEEDED if it was not ready in time (it is then killed).
  static absl::StatusOr<std::unique_ptr<PeerProcess>> Start(
      std::vector<std::string> argv, absl::Duration ready_within);

  // Closes its stdin, waits up to 30 s for it to exit, then kills its
  // process group (SIGKILL): its own children go too. (A peer that failed
  // to start is killed at once.)
  ~PeerProcess();

  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  // Sends `request` and returns the reply's rows (ReplyReader::Result's
  // errors); UNAVAILABLE if the peer exited, DEADLINE_EXCEEDED if the reply
  // did not come within `deadline` — after either the peer is unusable.
  absl::StatusOr<std::vector<Row>> Request(absl::string_view request,
                                           absl::Duration deadline);

  // The script's name, for messages.
  const std::string& name() const { return name_; }

 private:
  PeerProcess(pid_t pid, int in_fd, int out_fd, std::string name);

  // The next line of its stdout, waiting until `deadline`.
  absl::StatusOr<std::string> ReadLine(absl::Time deadline);

  pid_t pid_;
  int in_fd_;
  int out_fd_;
  std::string name_;
  std::string buffered_;  // Read from out_fd_, not yet returned as lines.
  bool broken_ = false;   // A request failed midway: the stream is lost.
  // How long the destructor waits for it to exit before killing it.
  absl::Duration exit_wait_ = absl::Seconds(30);
};

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_PEER_PROCESS_H_
