// Running one function on every worker of an in-process job at once, the
// way SPMD programs call collectives: one thread per rank.
#ifndef FERRY_TESTS_COLLECTIVES_SPMD_H_
#define FERRY_TESTS_COLLECTIVES_SPMD_H_

#include <functional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace testing {

// fn(worker, rank) on every rank concurrently; the results by rank.
template <typename T>
std::vector<absl::StatusOr<T>> Spmd(
    LocalJob& job, const std::function<absl::StatusOr<T>(Worker&, int)>& fn) {
  std::vector<absl::StatusOr<T>> results(job.size(),
                                         absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < job.size(); ++r) {
    threads.emplace_back([&, r] { results[r] = fn(job.worker(r), r); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_COLLECTIVES_SPMD_H_
