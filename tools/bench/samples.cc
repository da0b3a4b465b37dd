#include "tools/bench/samples.h"

#include <algorithm>

namespace ferry {
namespace bench {

void SampleSet::Add(const Row& row) {
  for (Entry& e : entries_) {
    if (e.row.Key() == row.Key()) {
      e.values.push_back(row.value);
      return;
    }
  }
  entries_.push_back({row, {row.value}});
}

std::vector<Row> SampleSet::Medians() const {
  std::vector<Row> out;
  for (const Entry& e : entries_) {
    std::vector<double> v = e.values;
    std::sort(v.begin(), v.end());
    Row r = e.row;
    r.value = v[v.size() / 2];
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace bench
}  // namespace ferry
