#include "tests/testing/etcd_job.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "rpc/value/json.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/status_matchers.h"

namespace ferry::testing {

EtcdJobTest::EtcdJobTest(EtcdJobOptions options)
    : options_(std::move(options)) {}

void EtcdJobTest::SetUp() {
  if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
  ASSERT_OK_AND_ASSIGN(etcd_,
                       EtcdCluster::Start({.members = options_.etcd_members}));
  rendezvous_ = absl::StrCat("etcd://", etcd_->endpoints(), "/", options_.job);
}

void EtcdJobTest::TearDown() {
  workers_.clear();  // SIGKILL and reap what is left.
  etcd_.reset();
}

std::string EtcdJobTest::OutputPath(const std::string& file) const {
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (outputs == nullptr) outputs = std::getenv("TEST_TMPDIR");
  return absl::StrCat(outputs != nullptr ? outputs : "/tmp", "/", file);
}

std::string EtcdJobTest::WorkerLog(const std::string& name) const {
  return OutputPath(name + ".log");
}

std::unique_ptr<BackgroundProcess> EtcdJobTest::StartWorker(
    int rank, const std::string& name, int64_t heartbeat_ms,
    const std::string& rendezvous) {
  ProcessOptions options;
  options.output_file = WorkerLog(name);
  options.die_with_parent = true;
  std::vector<std::string> argv = {
      Runfile("tools/ferryd"),
      absl::StrCat("--rendezvous=",
                   rendezvous.empty() ? rendezvous_ : rendezvous),
      absl::StrCat("--world_size=", options_.world_size),
      absl::StrCat("--heartbeat_timeout_ms=",
                   heartbeat_ms > 0 ? heartbeat_ms : options_.heartbeat_ms),
      "--insecure",
      absl::StrCat("--ready_file=", OutputPath(name + ".ready"))};
  if (rank >= 0) argv.push_back(absl::StrCat("--rank=", rank));
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> p =
      BackgroundProcess::Start(argv, options);
  EXPECT_OK(p.status());
  return p.ok() ? *std::move(p) : nullptr;
}

bool EtcdJobTest::AwaitReady(const std::string& name,
                             BackgroundProcess& worker) {
  const std::string ready = OutputPath(name + ".ready");
  return AwaitTrue(
             [&] { return worker.Exited() || std::ifstream(ready).good(); },
             options_.wait, absl::Milliseconds(20)) &&
         std::ifstream(ready).good();
}

ProcessResult EtcdJobTest::Ctl(const std::vector<std::string>& args,
                               std::optional<std::string> stdin_text) {
  std::vector<std::string> argv = {
      Runfile("tools/ferryctl"), absl::StrCat("--rendezvous=", rendezvous_),
      "--insecure", absl::StrCat("--timeout_ms=", options_.ctl_timeout_ms)};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions options;
  options.stdin_text = std::move(stdin_text);
  absl::StatusOr<ProcessResult> r = RunProcess(argv, options, options_.wait);
  EXPECT_OK(r.status());
  return r.ok() ? *r : ProcessResult{};
}

std::vector<Value> EtcdJobTest::Status() {
  ProcessResult status = Ctl({"status", "--format=json"});
  absl::StatusOr<Value> parsed = ParseJson(status.out);
  if (status.exit_code != 0 || !parsed.ok() ||
      parsed->Find("workers") == nullptr) {
    return {};
  }
  return parsed->Find("workers")->as_list();
}

void EtcdJobTest::PrintTiming(const std::string& what, absl::Duration d) {
  std::cout << "[timing] " << what << ": " << absl::FormatDuration(d)
            << std::endl;
}

}  // namespace ferry::testing
