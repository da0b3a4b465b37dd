// Running one function on every worker of an in-process job at once, the
// way SPMD programs call collectives: one thread per rank.
#ifndef FERRY_TESTS_COLLECTIVES_SPMD_H_
#define FERRY_TESTS_COLLECTIVES_SPMD_H_

#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace testing {

// fn(worker, rank) on every rank concurrently; the results by rank.
template <typename T>
std::vector<absl::StatusOr<T>> Spmd(
    LocalJob& job,
    const std::function<absl::StatusOr<T>(WorkerImpl&, int)>& fn) {
  std::vector<absl::StatusOr<T>> results(job.size(),
                                         absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < job.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = fn(job.worker(r), r); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// A fixture with a job of Start(n) workers.
class JobTest : public ::testing::Test {
 protected:
  void Start(int n) {
    absl::StatusOr<std::unique_ptr<LocalJob>> job = LocalJob::Start(n);
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = *std::move(job);
  }
  std::unique_ptr<LocalJob> job_;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_COLLECTIVES_SPMD_H_
