// A test fixture: a job of ferryd daemons whose membership is a real etcd's
// (etcd_cluster.h). The test starts (and replaces) the workers, drives the
// job with ferryctl through etcd, and finds every worker's log and ready
// file with its outputs, for a failure's post-mortem.
//
//   class MyTest : public EtcdJobTest {
//    protected:
//     MyTest() : EtcdJobTest({.job = "e2e", .world_size = 3}) {}
//   };
//   TEST_F(MyTest, …) {
//     workers_.push_back(StartWorker(0, "worker0"));
//     ASSERT_TRUE(AwaitReady("worker0", *workers_[0]));
//     ProcessResult r = Ctl({"call", "worker0", "add", "[1, 2]"});
//   }
//
// Skipped (GTEST_SKIP) where etcd is not installed. Every worker and etcd
// member is killed and reaped after the test.
#ifndef FERRY_TESTS_TESTING_ETCD_JOB_H_
#define FERRY_TESTS_TESTING_ETCD_JOB_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rpc/value/value.h"
#include "tests/testing/etcd_cluster.h"
#include "tests/testing/subprocess.h"

namespace ferry::testing {

struct EtcdJobOptions {
  std::string job;  // Its name in the rendezvous URL (etcd://…/JOB).
  int world_size = 3;
  int etcd_members = 1;
  int64_t heartbeat_ms = 4000;  // The workers' lease TTL.
  int64_t ctl_timeout_ms = 20000;
  absl::Duration wait = absl::Seconds(30);  // Bound on each wait here.
};

class EtcdJobTest : public ::testing::Test {
 protected:
  explicit EtcdJobTest(EtcdJobOptions options);

  void SetUp() override;
  void TearDown() override;

  // Where the test keeps `file`: its undeclared outputs, else TEST_TMPDIR.
  std::string OutputPath(const std::string& file) const;
  // The log of the worker started as `name`.
  std::string WorkerLog(const std::string& name) const;

  // A ferryd of the job named `name` (its log, its ready file); rank -1:
  // none given (it takes the first free one). heartbeat_ms 0: the job's;
  // an empty `rendezvous`: the job's (another: e.g. through a proxy).
  std::unique_ptr<BackgroundProcess> StartWorker(
      int rank, const std::string& name, int64_t heartbeat_ms = 0,
      const std::string& rendezvous = "");
  // Until the worker started as `name` joined (its ready file) or exited,
  // bounded; whether it joined.
  bool AwaitReady(const std::string& name, BackgroundProcess& worker);

  // `ferryctl --rendezvous=<the job's> --insecure ARGS`, `stdin_text` its
  // input: registering through etcd, it waits (bounded) until every rank
  // is held.
  ProcessResult Ctl(const std::vector<std::string>& args,
                    std::optional<std::string> stdin_text = std::nullopt);
  // `ferryctl status`, parsed: the workers by rank; empty if it failed.
  std::vector<Value> Status();

  // Prints "[timing] what: d" for the record (tests never assert on time).
  static void PrintTiming(const std::string& what, absl::Duration d);

  const EtcdJobOptions options_;
  std::unique_ptr<EtcdCluster> etcd_;
  std::string rendezvous_;  // etcd://ENDPOINTS/JOB
  std::vector<std::unique_ptr<BackgroundProcess>> workers_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_ETCD_JOB_H_
