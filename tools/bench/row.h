// ferry_bench's result row (docs/DESIGN.md "Performance") and its one-line JSON
// form, which ferry_bench prints with --json and its peer programs
// (tools/bench/peers/) print too:
//
//   {"suite":"rpc","metric":"latency_p50_us","system":"ferry","op":"echo",
//    "size_bytes":8,"world":2,"inflight":1,"value":123.456}
#ifndef FERRY_TOOLS_BENCH_ROW_H_
#define FERRY_TOOLS_BENCH_ROW_H_

#include <cstdint>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {
namespace bench {

struct Row {
  std::string suite;   // rpc, rref, collectives, sparse
  std::string metric;  // latency_p50_us, calls_per_s, bandwidth_MBps, …
  std::string system;  // ferry, grpc, gloo, torch_rpc, torch_gloo, …
  std::string op;      // the call kind or collective
  int64_t size_bytes = 0;
  int world = 0;
  int inflight = 0;
  double value = 0;

  // Everything but the value: what a row measured.
  auto Key() const {
    return std::tie(suite, metric, system, op, size_bytes, world, inflight);
  }
};

// The row as one JSON object (no newline); the value with 3 decimals.
std::string RowJson(const Row& row);

// Parses RowJson's form (any key order, JSON whitespace, string escapes
// except \u). INVALID_ARGUMENT, naming the field, for anything else: other
// or missing or repeated keys, a line over 4 KiB, a number out of range
// (size_bytes 0..2^40, world 0..65536, inflight 0..2^20, value finite).
absl::StatusOr<Row> ParseRow(absl::string_view json);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_ROW_H_
