#include "tools/bench/report.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"

namespace ferry {
namespace bench {

void Report::Add(Row row) {
  if (json_) {
    std::printf("%s\n", RowJson(row).c_str());
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
  std::printf("%-12s %-16s %-14s %-22s %12s %6s %9s %14s %10s\n", "suite",
              "metric", "system", "op", "size_bytes", "world", "inflight",
              "value", "ferry/this");
  for (const Row& r : rows_) {
    std::string ratio = "";
    if (const Row* ferry = FerryCounterpart(rows_, r);
        ferry != nullptr && r.value != 0) {
      ratio = absl::StrFormat("%.2fx", ferry->value / r.value);
    }
    std::printf("%-12s %-16s %-14s %-22s %12ld %6d %9d %14.1f %10s\n",
                r.suite.c_str(), r.metric.c_str(), r.system.c_str(),
                r.op.c_str(), static_cast<long>(r.size_bytes), r.world,
                r.inflight, r.value, ratio.c_str());
  }
}

const Row* FerryCounterpart(const std::vector<Row>& rows, const Row& row) {
  if (row.system == "ferry") return nullptr;
  // Over TCP, ferry's like-for-like is echo_tcp; on one host's own
  // transports (unix socket, shared memory), its default echo.
  std::string op = row.op;
  if (row.suite == "rpc") {
    bool tcp =
        (row.system == "grpc" && row.op == "echo") || row.system == "torch_rpc";
    bool local = (row.system == "grpc" && row.op == "echo_uds") ||
                 row.system == "torch_rpc_shm";
    if (tcp) op = "echo_tcp";
    if (local) op = "echo";
  }
  for (const Row& r : rows) {
    if (r.system == "ferry" && r.suite == row.suite && r.metric == row.metric &&
        r.op == op && r.size_bytes == row.size_bytes && r.world == row.world &&
        r.inflight == row.inflight) {
      return &r;
    }
  }
  return nullptr;
}

double Percentile(std::vector<double>& samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  size_t index = static_cast<size_t>(p / 100.0 * (samples.size() - 1) + 0.5);
  return samples[std::min(index, samples.size() - 1)];
}

}  // namespace bench
}  // namespace ferry
