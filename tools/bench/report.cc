#include "tools/bench/report.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace ferry {
namespace bench {

void Report::Add(Row row) {
  if (json_) {
    std::printf(
        "{\"suite\":\"%s\",\"metric\":\"%s\",\"system\":\"%s\",\"op\":\"%s\","
        "\"size_bytes\":%ld,\"world\":%d,\"inflight\":%d,\"value\":%.3f}\n",
        row.suite.c_str(), row.metric.c_str(), row.system.c_str(),
        row.op.c_str(), static_cast<long>(row.size_bytes), row.world,
        row.inflight, row.value);
    std::fflush(stdout);
    return;
  }
  progress_.Update(
      absl::StrFormat("%zu measured; last: %s %s %s %ld B, world %d: %.1f",
                      rows_.size() + 1, row.suite, row.system, row.op,
                      static_cast<long>(row.size_bytes), row.world, row.value));
  rows_.push_back(std::move(row));
}

void Report::Finish() {
  if (json_) return;
  progress_.Clear();
  std::printf("%-12s %-16s %-7s %-22s %12s %6s %9s %14s\n", "suite", "metric",
              "system", "op", "size_bytes", "world", "inflight", "value");
  for (const Row& r : rows_) {
    std::printf("%-12s %-16s %-7s %-22s %12ld %6d %9d %14.1f\n",
                r.suite.c_str(), r.metric.c_str(), r.system.c_str(),
                r.op.c_str(), static_cast<long>(r.size_bytes), r.world,
                r.inflight, r.value);
  }
}

double Percentile(std::vector<double>& samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t index = static_cast<size_t>(p / 100.0 * (samples.size() - 1) + 0.5);
  return samples[std::min(index, samples.size() - 1)];
}

}  // namespace bench
}  // namespace ferry
