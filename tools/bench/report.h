// ferry_bench's result rows (DESIGN.md "Performance"): printed as a table,
// or as one JSON object per line with --json.
#ifndef FERRY_TOOLS_BENCH_REPORT_H_
#define FERRY_TOOLS_BENCH_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "tools/progress.h"

namespace ferry {
namespace bench {

struct Row {
  std::string suite;   // rpc, rref, collectives, sparse
  std::string metric;  // latency_p50_us, calls_per_s, bandwidth_MBps, …
  std::string system;  // ferry or grpc
  std::string op;      // the call kind or collective
  int64_t size_bytes = 0;
  int world = 0;
  int inflight = 0;
  double value = 0;
};

class Report {
 public:
  explicit Report(bool json) : json_(json) {}
  // Prints the row at once (JSON) or keeps it for the table.
  void Add(Row row);
  // Prints the table (no-op in JSON mode).
  void Finish();

 private:
  bool json_;
  Progress progress_;  // On a terminal: how far the run got.
  std::vector<Row> rows_;
};

// Percentile (0..100) of `samples` (sorted in place).
double Percentile(std::vector<double>& samples, double p);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_REPORT_H_
