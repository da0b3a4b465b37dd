#include "tests/testing/net_job.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/testing/await.h"

namespace ferry {
namespace testing {

namespace {

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last lines of `text`, for error messages.
std::string Tail(const std::string& text, int lines = 5) {
  std::vector<std::string> all = absl::StrSplit(text, '\n', absl::SkipEmpty());
  size_t from =
      all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  std::string out;
  for (size_t i = from; i < all.size(); ++i)
    absl::StrAppend(&out, all[i], "\n");
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<NetJob>> NetJob::Start(const TestNetwork& net,
                                                      NetJobOptions options) {
  if (options.hosts.empty()) {
    return absl::InvalidArgumentError("a job needs at least one host");
  }
  mkdir(options.dir.c_str(), 0755);
  std::unique_ptr<NetJob> job(new NetJob(net, std::move(options)));
  const absl::Time deadline = absl::Now() + job->options_.startup_timeout;
  for (int rank = 0; rank < static_cast<int>(job->options_.hosts.size());
       ++rank) {
    if (absl::Status s = job->StartRank(rank); !s.ok()) return s;
    if (rank == 0) {  // Its picked port makes the master for the others.
      absl::StatusOr<std::string> addr = job->AwaitFile(0, ".addr", deadline);
      if (!addr.ok()) return addr.status();
      job->master_ = *addr;
    }
  }
  for (int rank = 0; rank < job->world_size(); ++rank) {
    absl::StatusOr<std::string> ready =
        job->AwaitFile(rank, ".ready", deadline);
    if (!ready.ok()) return ready.status();
  }
  return job;
}

absl::Status NetJob::StartRank(int rank) {
  const std::string base = absl::StrCat(options_.dir, "/worker", rank);
  for (const char* ext : {".addr", ".ready"}) unlink((base + ext).c_str());
  std::vector<std::string> argv = {
      options_.ferryd,
      "--insecure",
      absl::StrCat("--rank=", rank),
      absl::StrCat("--world_size=", options_.hosts.size()),
      absl::StrCat("--listen=", net_.host(options_.hosts[rank]).address, ":0"),
      absl::StrCat("--address_file=", base, ".addr"),
      absl::StrCat("--ready_file=", base, ".ready"),
      absl::StrCat("--startup_timeout_ms=",
                   absl::ToInt64Milliseconds(options_.startup_timeout))};
  if (rank > 0) argv.push_back(absl::StrCat("--master=", master_));
  argv.insert(argv.end(), options_.flags.begin(), options_.flags.end());
  ProcessOptions o;
  o.output_file = base + ".log";
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> p =
      net_.Start(options_.hosts[rank], argv, o);
  if (!p.ok()) return p.status();
  ranks_.push_back(*std::move(p));
  return absl::OkStatus();
}

absl::StatusOr<std::string> NetJob::AwaitFile(int rank, const std::string& ext,
                                              absl::Time deadline) {
  const std::string path = absl::StrCat(options_.dir, "/worker", rank, ext);
  const auto readable = [&] { return access(path.c_str(), R_OK) == 0; };
  AwaitTrue([&] { return Exited(rank) || readable(); }, deadline - absl::Now(),
            absl::Milliseconds(10));
  if (!readable()) {
    return absl::UnavailableError(
        absl::StrCat("worker", rank, " on host ", options_.hosts[rank],
                     Exited(rank) ? " exited" : " did not get ready in time",
                     " while starting; its log ends:\n", Tail(log(rank))));
  }
  return std::string(absl::StripAsciiWhitespace(ReadWhole(path)));
}

NetJob::~NetJob() { KillAll(); }

std::string NetJob::log_path(int rank) const {
  return absl::StrCat(options_.dir, "/worker", rank, ".log");
}

std::string NetJob::log(int rank) const { return ReadWhole(log_path(rank)); }

bool NetJob::Exited(int rank) { return ranks_[rank]->Exited(); }

ProcessResult NetJob::WaitExit(int rank, absl::Duration bound) {
  return ranks_[rank]->Wait(bound);
}

void NetJob::KillAll() {
  for (auto& p : ranks_) {
    if (!p->Exited()) kill(p->pid(), SIGKILL);
    p->Wait(absl::Seconds(10));
  }
}

}  // namespace testing
}  // namespace ferry
