// Rows measured over several rounds, reduced to one row each: the median
// of its rounds. How ferry_bench merges its own measurements and its peer
// programs' (tools/bench/peers/) into one report.
//
//   SampleSet samples;
//   for (int round = 0; round < 3; ++round) {
//     samples.Add(MeasureFerry());
//     samples.Add(MeasurePeer());  // Rows parsed from the peer's reply.
//   }
//   for (const Row& r : samples.Medians()) report.Add(r);
#ifndef FERRY_TOOLS_BENCH_SAMPLES_H_
#define FERRY_TOOLS_BENCH_SAMPLES_H_

#include <vector>

#include "tools/bench/row.h"

namespace ferry {
namespace bench {

class SampleSet {
 public:
  // One round's measurement; rows with equal Key() are the same row.
  void Add(const Row& row);

  // One row per key, in the order keys were first added, its value the
  // median of the values added (the upper middle of an even count, as
  // ferry_bench's suites take it).
  std::vector<Row> Medians() const;

 private:
  struct Entry {
    Row row;
    std::vector<double> values;
  };
  std::vector<Entry> entries_;  // A handful of rows: a scan finds a key.
};

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_SAMPLES_H_
