// The jagged all-to-all of recommendation models, TorchRec's semantics:
// redistribute sparse features so each rank receives the features whose
// embedding tables it holds, with the batch concatenated across source
// ranks (collectives/algorithms/kjt_all_to_all.cc has the protocol).
//
//   // 2 ranks; keys A, B, C: A and B to rank 0, C to rank 1.
//   absl::StatusOr<KeyedJaggedTensor> mine =
//       KJTAllToAll(world, features, /*features_per_rank=*/{2, 1});
//
// Errors as every collective (collectives.h); in particular features per
// rank that do not add up to the keys, keys that differ across ranks, or a
// stagger that does not divide the group size are INVALID_ARGUMENT on
// every rank.
#ifndef FERRY_COLLECTIVES_SPARSE_H_
#define FERRY_COLLECTIVES_SPARSE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/algorithms/kjt.h"
#include "collectives/op/options.h"
#include "collectives/op/process_group.h"
#include "collectives/op/work.h"

namespace ferry {

// Rank r receives features_per_rank[r] consecutive keys of every rank's
// `input`; its output has those keys and, per key, the batches of all
// ranks in TorchRec's staggered source order (stagger 1: rank order).
absl::StatusOr<KeyedJaggedTensor> KJTAllToAll(
    ProcessGroup& group, const KeyedJaggedTensor& input,
    const std::vector<int64_t>& features_per_rank, int stagger = 1,
    const CollectiveOptions& options = {});
Work<KeyedJaggedTensor> KJTAllToAllAsync(
    ProcessGroup& group, const KeyedJaggedTensor& input,
    const std::vector<int64_t>& features_per_rank, int stagger = 1,
    const CollectiveOptions& options = {});

// TorchRec's SparseFeatures: unweighted id lists and weighted id-score lists.
struct SparseFeatures {
  KeyedJaggedTensor id_list;
  KeyedJaggedTensor id_score_list;

  friend bool operator==(const SparseFeatures& a, const SparseFeatures& b) {
    return a.id_list == b.id_list && a.id_score_list == b.id_score_list;
  }
};

// Both KJT all-to-alls of SparseFeaturesAllToAll, issued together (one
// message per pair of ranks).
absl::StatusOr<SparseFeatures> SparseFeaturesAllToAll(
    ProcessGroup& group, const SparseFeatures& input,
    const std::vector<int64_t>& id_list_features_per_rank,
    const std::vector<int64_t>& id_score_list_features_per_rank,
    int stagger = 1, const CollectiveOptions& options = {});
Work<SparseFeatures> SparseFeaturesAllToAllAsync(
    ProcessGroup& group, const SparseFeatures& input,
    const std::vector<int64_t>& id_list_features_per_rank,
    const std::vector<int64_t>& id_score_list_features_per_rank,
    int stagger = 1, const CollectiveOptions& options = {});

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_SPARSE_H_
