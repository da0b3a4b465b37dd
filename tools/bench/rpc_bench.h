// The RPC suite: small-call latency, calls/s with 1/16/128 in flight, and
// echo bandwidth at 1/16/64 MiB, for ferry and bare gRPC in one run.
#ifndef FERRY_TOOLS_BENCH_RPC_BENCH_H_
#define FERRY_TOOLS_BENCH_RPC_BENCH_H_

#include "absl/status/status.h"
#include "tools/bench/report.h"

namespace ferry {
namespace bench {

absl::Status RunRpcSuite(bool quick, Report* report);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_RPC_BENCH_H_
