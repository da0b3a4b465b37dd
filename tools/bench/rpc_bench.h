// The RPC suite: small-call latency, calls/s with 1/16/128 in flight, and
// echo bandwidth at 1/16/64 MiB, for ferry and bare gRPC in one run.
#ifndef FERRY_TOOLS_BENCH_RPC_BENCH_H_
#define FERRY_TOOLS_BENCH_RPC_BENCH_H_

#include <string>

#include "absl/status/status.h"
#include "tools/bench/report.h"

namespace ferry {
namespace bench {

struct RpcSuiteOptions {
  bool quick = false;
  int rounds = 3;
  // Only this system ("grpc/echo", "ferry/echo_tcp", "grpc/echo_uds",
  // "ferry/echo"); empty: all.
  std::string variant;
  // Only this kind of measurement ("latency", "throughput", "bandwidth");
  // empty: all.
  std::string only;
};

absl::Status RunRpcSuite(const RpcSuiteOptions& options, Report* report);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_RPC_BENCH_H_
