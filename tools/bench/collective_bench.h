// The collectives suite: time per op of all_to_all_single, all_gather,
// all_reduce, reduce_scatter and broadcast at per-rank sizes 8 B, 64 KiB,
// 1 MiB and 16 MiB, world sizes 2 and 4 — ferry's in-process workers
// against Gloo's (libgloo, ranks as threads, TCP on 127.0.0.1) and, with
// peers, torch's Gloo process group (ranks as processes), measured in
// interleaved rounds (medians).
//
// Per-rank size is each rank's input: all_reduce and reduce_scatter sum
// float32 (reduce_scatter's input split in W parts, ReduceScatterChunk
// elements each), the others move uint8; all_to_all_single splits its
// input evenly; broadcast is from rank 0.
#ifndef FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_
#define FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/bench/peer_setup.h"
#include "tools/bench/report.h"

namespace ferry {
namespace bench {

struct CollectiveSuiteOptions {
  bool quick = false;
  int rounds = 3;
  // ferry's threshold between direct and ring/tree algorithms; 0: default.
  int64_t direct_bytes = 0;
  // ferry's all_reduce split threshold (config.h); 0: default.
  int64_t split_bytes = 0;
  // Per-rank payload sizes to measure; empty: the suite's.
  std::vector<int64_t> sizes;
  // ferry's broadcast tree threshold (config.h tree_world); 0: default.
  int tree_world = 0;
  // ferry's pipelined-ring piece size (0: one ring); -1: default.
  int64_t ring_piece_bytes = -1;
  std::string only_op;  // Just this collective.
  std::string system;   // Just "ferry", "gloo" or "torch_gloo".
  // Ops per measurement (0: calibrated for a time budget, 3 to 200). A
  // fixed count lets runs of N and 2N ops under callgrind give the
  // instructions per op.
  int iterations = 0;
  // World sizes to measure; empty: 2 and 4.
  std::vector<int> worlds;
  // Also torch's Gloo process group (system "torch_gloo", by
  // tools/bench/peers/torch_gloo_bench.py), its rounds interleaved with
  // ferry's and libgloo's. Not owned.
  const PeerSetup* peers = nullptr;
  // Also ferry with its flight recorder, metrics and tracing off (system
  // "ferry_unobserved", a job of its own), in the same rounds.
  bool unobserved = false;
};

// reduce_scatter's elements (float32) per rank and part for `bytes` per
// rank on `world` ranks: an equal split, at least one.
inline int64_t ReduceScatterChunk(int64_t bytes, int world) {
  return std::max<int64_t>(bytes / 4 / world, 1);
}

absl::Status RunCollectiveSuite(const CollectiveSuiteOptions& options,
                                Report* report);

// For suites timing ops on in-process workers: rank r's op, with its
// buffers made outside the timing, and the timing itself — `iterations`
// ops on every rank at once after one warm-up each and a common start; the
// wall time per op, and (if `cpu` is given) this process's CPU time per op
// over the same span, every rank's together.
using OneOp = std::function<absl::Status()>;
using MakeOp = std::function<absl::StatusOr<OneOp>(int rank)>;
absl::StatusOr<absl::Duration> TimeOnThreads(int world, int iterations,
                                             const MakeOp& make,
                                             absl::Duration* cpu = nullptr);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_COLLECTIVE_BENCH_H_
