// `ferryctl analyze DIR`: reads every worker's flight recorder dump in DIR
// (collectives/recorder/flight_recorder.h; written by `ferryctl dump` or by the
// workers when an op failed) and says, per process group:
//
//   - the first sequence number where the ranks disagree — a different
//     op, input dtypes, or (for ops whose inputs must match: all_reduce,
//     reduce_scatter) input sizes — naming the ranks on each side;
//   - ops some ranks wait in (scheduled or started, or failed) that other
//     ranks never reached (their last op is earlier), naming both;
//   - the slowest rank per op: the one that arrived last (by wall clock:
//     dumps from hosts whose clocks differ skew it), how late.
//
// The report is a Value (--format=json) and one screen of text.
// Sequence numbers are the group's SPMD numbering (op keys GROUP/SEQ; a
// group in a later membership epoch, GROUP/SEQ@E, is its own "GROUP@E").
// Tagged and point-to-point ops are counted, not compared.
#ifndef FERRY_TOOLS_FERRYCTL_ANALYZE_H_
#define FERRY_TOOLS_FERRYCTL_ANALYZE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rpc/value/value.h"

namespace ferry {
namespace ctl {

// One worker's dump, as read.
struct RankDump {
  std::string file;
  Value dump;  // DumpValue's map.
};

// Every *.json in `dir`, parsed. NOT_FOUND if `dir` is unreadable or holds
// none; INVALID_ARGUMENT naming the file for one that is no dump.
absl::StatusOr<std::vector<RankDump>> ReadDumps(const std::string& dir);

// A dump parsed from `text` (named `file` in errors). INVALID_ARGUMENT if
// it is not a flight recorder dump.
absl::StatusOr<RankDump> ParseDump(const std::string& file,
                                   const std::string& text);

// The analysis of `dumps` (one per worker):
//   {"dumps":[{"worker","rank","file","entries","reason"}],
//    "groups":[{"group","ranks":[global ranks],"first_seq","last_seq",
//               "mismatch":{"seq","key","field","sides":[{"value",
//                           "ranks":[…],"workers":[…]}]} | null,
//               "not_reached":[{"seq","key","op","waiting":[{"rank",
//                               "worker","state"}],"never_reached":[{"rank",
//                               "worker","last_seq"}]}],
//               "slowest":[{"seq","op","rank","worker","late_ms"}],
//               "last_to_arrive":[{"rank","worker","ops"}],
//               "missing_dumps":[ranks]}],
//    "unsequenced_ops": N}  (tagged and point-to-point records: not compared)
Value Analyze(const std::vector<RankDump>& dumps);

// The analysis for people: one screen (a few lines per group).
std::string AnalysisText(const Value& analysis);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_ANALYZE_H_
