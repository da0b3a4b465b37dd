#include "collectives/sparse.h"

#include <utility>

#include "collectives/args.h"
#include "collectives/collectives.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

absl::StatusOr<KeyedJaggedTensor> ReadKjt(absl::StatusOr<Value> v) {
  if (!v.ok()) return v.status();
  return KeyedJaggedTensor::FromValue(*v, "output");
}

absl::StatusOr<SparseFeatures> ReadFeatures(absl::StatusOr<Value> v) {
  if (!v.ok()) return v.status();
  const Value* id_list = v->Find("id_list");
  const Value* id_score_list = v->Find("id_score_list");
  if (id_list == nullptr || id_score_list == nullptr) {
    return absl::InternalError("sparse_features_all_to_all: malformed output");
  }
  SparseFeatures out;
  FERRY_ASSIGN_OR_RETURN(out.id_list,
                         KeyedJaggedTensor::FromValue(*id_list, "id_list"));
  FERRY_ASSIGN_OR_RETURN(
      out.id_score_list,
      KeyedJaggedTensor::FromValue(*id_score_list, "id_score_list"));
  return out;
}

Value KjtParams(const std::vector<int64_t>& features_per_rank, int stagger) {
  return Value(Value::Map{{"features_per_rank", IntList(features_per_rank)},
                          {"stagger", stagger}});
}

Value FeaturesInput(const SparseFeatures& input) {
  return Value(Value::Map{{"id_list", input.id_list.ToValue()},
                          {"id_score_list", input.id_score_list.ToValue()}});
}

Value FeaturesParams(const std::vector<int64_t>& id_list,
                     const std::vector<int64_t>& id_score_list, int stagger) {
  return Value(
      Value::Map{{"id_list_features_per_rank", IntList(id_list)},
                 {"id_score_list_features_per_rank", IntList(id_score_list)},
                 {"stagger", stagger}});
}

}  // namespace

absl::StatusOr<KeyedJaggedTensor> KJTAllToAll(
    ProcessGroup& group, const KeyedJaggedTensor& input,
    const std::vector<int64_t>& features_per_rank, int stagger,
    const CollectiveOptions& options) {
  return ReadKjt(RunCollective(group, "kjt_all_to_all", input.ToValue(),
                               KjtParams(features_per_rank, stagger), options));
}

Work<KeyedJaggedTensor> KJTAllToAllAsync(
    ProcessGroup& group, const KeyedJaggedTensor& input,
    const std::vector<int64_t>& features_per_rank, int stagger,
    const CollectiveOptions& options) {
  return Work<KeyedJaggedTensor>(
      RunCollectiveAsync(group, "kjt_all_to_all", input.ToValue(),
                         KjtParams(features_per_rank, stagger), options)
          .future()
          .Map(&ReadKjt));
}

absl::StatusOr<SparseFeatures> SparseFeaturesAllToAll(
    ProcessGroup& group, const SparseFeatures& input,
    const std::vector<int64_t>& id_list_features_per_rank,
    const std::vector<int64_t>& id_score_list_features_per_rank, int stagger,
    const CollectiveOptions& options) {
  return ReadFeatures(
      RunCollective(group, "sparse_features_all_to_all", FeaturesInput(input),
                    FeaturesParams(id_list_features_per_rank,
                                   id_score_list_features_per_rank, stagger),
                    options));
}

Work<SparseFeatures> SparseFeaturesAllToAllAsync(
    ProcessGroup& group, const SparseFeatures& input,
    const std::vector<int64_t>& id_list_features_per_rank,
    const std::vector<int64_t>& id_score_list_features_per_rank, int stagger,
    const CollectiveOptions& options) {
  return Work<SparseFeatures>(
      RunCollectiveAsync(
          group, "sparse_features_all_to_all", FeaturesInput(input),
          FeaturesParams(id_list_features_per_rank,
                         id_score_list_features_per_rank, stagger),
          options)
          .future()
          .Map(&ReadFeatures));
}

}  // namespace ferry
