#include "collectives/algorithms.h"

#include <algorithm>
#include <utility>

namespace ferry {
namespace algorithms {

namespace {

const std::vector<std::pair<absl::string_view, Algorithm>>& Table() {
  static const auto* table =
      new std::vector<std::pair<absl::string_view, Algorithm>>{
          {"all_gather", &AllGather},
          {"all_reduce", &AllReduce},
          {"all_to_all", &AllToAll},
          {"all_to_all_single", &AllToAllSingle},
          {"barrier", &Barrier},
          {"broadcast", &Broadcast},
          {"gather", &Gather},
          {"reduce_scatter", &ReduceScatter},
          {"scatter", &Scatter},
          {"kjt_all_to_all", &KjtAllToAll},
          {"sparse_features_all_to_all", &SparseFeaturesAllToAll},
      };
  return *table;
}

}  // namespace

Algorithm Find(absl::string_view name) {
  for (const auto& [n, algorithm] : Table()) {
    if (n == name) return algorithm;
  }
  return nullptr;
}

std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (const auto& [n, algorithm] : Table()) names.emplace_back(n);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace algorithms
}  // namespace ferry
