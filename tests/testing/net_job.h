// A job of real ferryd workers on a TestNetwork, one rank per host: rank 0
// listens on its host's address (port picked) and is every other rank's
// --master. Plaintext with --insecure (the hosts are ours; these tests are
// about failures, not security). Logs go to files, one per rank.
//
//   ASSERT_OK_AND_ASSIGN(auto job, NetJob::Start(*net, {.ferryd = path,
//       .hosts = {"w0", "w1", "w2"}, .flags = {"--heartbeat_timeout_ms=2000"},
//       .dir = dir}));
//   ASSERT_OK(KillProcess(job->pid(1)));
//   ProcessResult r = job->WaitExit(2, absl::Seconds(30));
#ifndef FERRY_TESTS_TESTING_NET_JOB_H_
#define FERRY_TESTS_TESTING_NET_JOB_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/testing/netns.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace testing {

struct NetJobOptions {
  std::string ferryd;              // Path of the ferryd binary.
  std::vector<std::string> hosts;  // Rank r runs on hosts[r].
  std::vector<std::string> flags;  // More ferryd flags (timeouts, leases).
  std::string dir;  // Made if absent: worker<r>.{log,addr,ready}.
  absl::Duration startup_timeout = absl::Seconds(60);
};

class NetJob {
 public:
  // Starts every rank and waits until all joined. On error every rank
  // started is killed; the error names the rank and quotes its log's end.
  static absl::StatusOr<std::unique_ptr<NetJob>> Start(const TestNetwork& net,
                                                       NetJobOptions options);
  // KillAll().
  ~NetJob();
  NetJob(const NetJob&) = delete;
  NetJob& operator=(const NetJob&) = delete;

  int world_size() const { return static_cast<int>(ranks_.size()); }
  const std::string& master() const { return master_; }
  pid_t pid(int rank) const { return ranks_[rank]->pid(); }
  const std::string& host(int rank) const { return options_.hosts[rank]; }
  std::string log_path(int rank) const;
  // What rank `rank` logged so far.
  std::string log(int rank) const;

  // Whether rank `rank`'s process ended (reaps it if so).
  bool Exited(int rank);
  // Waits up to `bound` for rank `rank` to end by itself; if it is still
  // running then it is killed and the result says timed_out.
  ProcessResult WaitExit(int rank, absl::Duration bound);
  // SIGKILLs every rank still running (a stopped one too) and reaps it.
  void KillAll();

 private:
  NetJob(const TestNetwork& net, NetJobOptions options)
      : net_(net), options_(std::move(options)) {}
  absl::Status StartRank(int rank);
  absl::StatusOr<std::string> AwaitFile(int rank, const std::string& ext,
                                        absl::Time deadline);

  const TestNetwork& net_;
  const NetJobOptions options_;
  std::string master_;
  std::vector<std::unique_ptr<BackgroundProcess>> ranks_;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_NET_JOB_H_
