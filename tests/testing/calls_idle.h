// Waiting in tests until a worker has no call in flight, in or out (its
// status's counts; bounded, polled: await.h).
//
//   EXPECT_TRUE(AwaitNoCalls(job->worker(1).rpc(), absl::Seconds(10)));
#ifndef FERRY_TESTS_TESTING_CALLS_IDLE_H_
#define FERRY_TESTS_TESTING_CALLS_IDLE_H_

#include "absl/time/time.h"
#include "proto/worker.pb.h"
#include "rpc/agent.h"
#include "tests/testing/await.h"

namespace ferry::testing {

// Whether `agent` had no call in flight, incoming or outgoing, within
// `timeout`.
inline bool AwaitNoCalls(RpcAgent& agent, absl::Duration timeout) {
  return AwaitTrue(
      [&] {
        proto::WorkerStatus s = agent.Status();
        return s.inflight_incoming() == 0 && s.inflight_outgoing() == 0;
      },
      timeout);
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_TESTING_CALLS_IDLE_H_
