// ferry_bench's result rows (docs/DESIGN.md "Performance"): printed as a table,
// or as one JSON object per line with --json.
#ifndef FERRY_TOOLS_BENCH_REPORT_H_
#define FERRY_TOOLS_BENCH_REPORT_H_

#include <string>
#include <vector>

#include "tools/bench/row.h"
#include "tools/progress.h"

namespace ferry {
namespace bench {

class Report {
 public:
  explicit Report(bool json) : json_(json) {}
  // Prints the row at once (JSON) or keeps it for the table.
  void Add(Row row);
  // Prints the table (no-op in JSON mode), with the ratio of ferry's value
  // to each other system's (FerryCounterpart) where there is one.
  void Finish();

 private:
  bool json_;
  Progress progress_;  // On a terminal: how far the run got.
  std::vector<Row> rows_;
};

// The ferry row among `rows` that `row` of another system compares with:
// same suite, metric, size, world and in-flight count, and the same op —
// except that in the RPC suite TCP systems (grpc "echo", torch_rpc) compare
// with ferry's "echo_tcp" and same-host transports (grpc "echo_uds",
// torch_rpc_shm) with ferry's "echo". Null if none (or `row` is ferry's).
const Row* FerryCounterpart(const std::vector<Row>& rows, const Row& row);

// Percentile (0..100) of `samples` (sorted in place).
double Percentile(std::vector<double>& samples, double p);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_REPORT_H_
