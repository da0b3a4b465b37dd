// The RPC suite: small-call latency, calls/s with 1/16/128 in flight, and
// echo bandwidth at 1/16/64 MiB, for ferry and bare gRPC in one run — and,
// with peers, for torch.distributed.rpc (TensorPipe) in the same rounds.
#ifndef FERRY_TOOLS_BENCH_RPC_BENCH_H_
#define FERRY_TOOLS_BENCH_RPC_BENCH_H_

#include <string>

#include "absl/status/status.h"
#include "tools/bench/peer_setup.h"
#include "tools/bench/report.h"

namespace ferry {
namespace bench {

struct RpcSuiteOptions {
  bool quick = false;
  int rounds = 3;
  // Only this system ("grpc/echo", "ferry/echo_tcp", "grpc/echo_uds",
  // "ferry/echo", "ferry_socket/echo", "torch_rpc/echo",
  // "torch_rpc_shm/echo"); empty: all.
  std::string variant;
  // Only this kind of measurement ("latency", "throughput", "bandwidth");
  // empty: all.
  std::string only;
  // Timed small calls of the latency measurement (0: the suite's 2,000, or
  // 300 with quick); a tenth more go first as warm-up. A fixed count lets
  // runs of N and 2N calls under callgrind give the instructions per call.
  int iterations = 0;
  // Also torch's RPC over TCP ("torch_rpc": TensorPipe's uv transport and
  // basic channel) and with TensorPipe's defaults ("torch_rpc_shm": shared
  // memory on one host), by tools/bench/peers/torch_rpc_bench.py measuring
  // what this suite measures, interleaved with ferry's rounds. Not owned.
  const PeerSetup* peers = nullptr;
  // Also ferry with its flight recorder, metrics and tracing off (system
  // "ferry_unobserved"), in the same rounds: what they cost.
  bool unobserved = false;
};

absl::Status RunRpcSuite(const RpcSuiteOptions& options, Report* report);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_RPC_BENCH_H_
