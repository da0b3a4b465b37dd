#include "collectives/sparse.h"

#include <utility>

#include "collectives/algorithms/algorithms.h"
#include "collectives/op/runner.h"

namespace ferry {

namespace {

algorithms::JaggedPart PartOf(std::string name, const KeyedJaggedTensor& kjt,
                              const std::vector<int64_t>& features_per_rank,
                              std::string features_field) {
  return {std::move(name), kjt, features_per_rank, std::move(features_field)};
}

Algorithm<KeyedJaggedTensor> KjtOf(const KeyedJaggedTensor& input,
                                   const std::vector<int64_t>& fpr,
                                   int stagger) {
  algorithms::JaggedArgs args{{PartOf("kjt", input, fpr, "features_per_rank")},
                              stagger};
  return [args = std::move(args)](Result<KeyedJaggedTensor> r) mutable {
    algorithms::JaggedAllToAll(
        std::move(r).Map<std::vector<KeyedJaggedTensor>>(
            [](std::vector<KeyedJaggedTensor> out) { return out[0]; }),
        std::move(args));
  };
}

Algorithm<SparseFeatures> FeaturesOf(const SparseFeatures& input,
                                     const std::vector<int64_t>& id_list,
                                     const std::vector<int64_t>& id_score_list,
                                     int stagger) {
  algorithms::JaggedArgs args{
      {PartOf("id_list", input.id_list, id_list, "id_list_features_per_rank"),
       PartOf("id_score_list", input.id_score_list, id_score_list,
              "id_score_list_features_per_rank")},
      stagger};
  return [args = std::move(args)](Result<SparseFeatures> r) mutable {
    algorithms::JaggedAllToAll(
        std::move(r).Map<std::vector<KeyedJaggedTensor>>(
            [](std::vector<KeyedJaggedTensor> out) {
              return SparseFeatures{std::move(out[0]), std::move(out[1])};
            }),
        std::move(args));
  };
}

template <typename T>
absl::StatusOr<T> Run(ProcessGroup& group, absl::string_view name,
                      const CollectiveOptions& options,
                      Algorithm<T> algorithm) {
  return RunOp<T>(group, name, options, std::move(algorithm));
}

template <typename T>
Work<T> Start(ProcessGroup& group, absl::string_view name,
              const CollectiveOptions& options, Algorithm<T> algorithm) {
  return StartWork<T>(group, name, options, std::move(algorithm));
}

}  // namespace

absl::StatusOr<KeyedJaggedTensor> KJTAllToAll(
    ProcessGroup& group, const KeyedJaggedTensor& input,
    const std::vector<int64_t>& features_per_rank, int stagger,
    const CollectiveOptions& options) {
  return Run(group, "kjt_all_to_all", options,
             KjtOf(input, features_per_rank, stagger));
}

Work<KeyedJaggedTensor> KJTAllToAllAsync(
    ProcessGroup& group, const KeyedJaggedTensor& input,
    const std::vector<int64_t>& features_per_rank, int stagger,
    const CollectiveOptions& options) {
  return Start(group, "kjt_all_to_all", options,
               KjtOf(input, features_per_rank, stagger));
}

absl::StatusOr<SparseFeatures> SparseFeaturesAllToAll(
    ProcessGroup& group, const SparseFeatures& input,
    const std::vector<int64_t>& id_list_features_per_rank,
    const std::vector<int64_t>& id_score_list_features_per_rank, int stagger,
    const CollectiveOptions& options) {
  return Run(group, "sparse_features_all_to_all", options,
             FeaturesOf(input, id_list_features_per_rank,
                        id_score_list_features_per_rank, stagger));
}

Work<SparseFeatures> SparseFeaturesAllToAllAsync(
    ProcessGroup& group, const SparseFeatures& input,
    const std::vector<int64_t>& id_list_features_per_rank,
    const std::vector<int64_t>& id_score_list_features_per_rank, int stagger,
    const CollectiveOptions& options) {
  return Start(group, "sparse_features_all_to_all", options,
               FeaturesOf(input, id_list_features_per_rank,
                          id_score_list_features_per_rank, stagger));
}

}  // namespace ferry
