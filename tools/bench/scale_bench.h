// The scale suite: how a job of real ferryd daemons grows with its world
// size. For worlds 2, 4, 8, … up to max_world, each round starts a job
// with `ferryctl up` (rendezvous: spawn and join of every rank, until
// `up` returns), times all_reduce (sum of one float32 per rank) and
// all_to_all (one float32 per pair) driven from a client as `ferryctl
// collective` does, times a status of every worker, checks that no worker
// sees a dead peer (a false death fails the suite), and times `ferryctl
// down`. Rows are op_time_us medians over the rounds (each round's op time
// the median of its timed ops).
#ifndef FERRY_TOOLS_BENCH_SCALE_BENCH_H_
#define FERRY_TOOLS_BENCH_SCALE_BENCH_H_

#include <string>

#include "absl/status/status.h"
#include "tools/bench/report.h"

namespace ferry {
namespace bench {

struct ScaleSuiteOptions {
  bool quick = false;  // Worlds up to 8, fewer ops.
  int rounds = 3;      // Jobs per world size, one after another.
  int min_world = 2;   // Worlds min_world, 2·min_world, … up to max_world.
  int max_world = 128;
  // Path of ferryctl (it finds ferryd beside itself); empty: the one
  // beside this binary.
  std::string ferryctl;
};

absl::Status RunScaleSuite(const ScaleSuiteOptions& options, Report* report);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_SCALE_BENCH_H_
