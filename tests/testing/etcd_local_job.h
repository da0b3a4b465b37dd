// In-process jobs (tools/runtime/local_job.h) whose workers keep their
// membership in a real etcd (etcd_cluster.h), for tests run on both
// membership backends.
//
//   ASSERT_OK_AND_ASSIGN(LocalJob::Options options,
//                        LocalJobOnEtcd(*etcd, /*ttl=*/absl::Seconds(2)));
//   ASSERT_OK_AND_ASSIGN(auto job, LocalJob::Start(3, options));
#ifndef FERRY_TESTS_TESTING_ETCD_LOCAL_JOB_H_
#define FERRY_TESTS_TESTING_ETCD_LOCAL_JOB_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/testing/etcd_cluster.h"
#include "tools/runtime/local_job.h"
#include "tools/runtime/rendezvous.h"
#include "tools/runtime/worker_impl.h"

namespace ferry::testing {

// Options of a job whose workers' membership is in `etcd`, leases of
// `ttl`, under a job named after the running test (so that the tests
// sharing one etcd never meet).
inline absl::StatusOr<LocalJob::Options> LocalJobOnEtcd(const EtcdCluster& etcd,
                                                        absl::Duration ttl) {
  const std::string job = absl::StrReplaceAll(
      ::testing::UnitTest::GetInstance()->current_test_info()->name(),
      {{"/", "-"}});
  absl::StatusOr<BackendFactory> factory = BackendFactoryFor(
      {.url = absl::StrCat("etcd://", etcd.endpoints(), "/", job), .ttl = ttl});
  if (!factory.ok()) return factory.status();
  LocalJob::Options options;
  options.configure = [factory = *factory](WorkerConfig& o) {
    o.membership_backend = factory;
  };
  return options;
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_ETCD_LOCAL_JOB_H_
