// Collectives by name, over Values shaped like ferryctl's request JSON
// (docs/DESIGN.md "ferryctl contract"): what ferryctl and other clients drive.
// This is the only place their inputs are parsed: each entry reads `input`
// and `params` (args.h: INVALID_ARGUMENT naming this rank and the field,
// failing the op on every member) and runs the typed algorithm, whose
// result it presents as a Value.
//
//   all_to_all          input: a list of one tensor per rank → the same
//   all_to_all_single   input: a tensor, or {"input", "input_splits"?,
//                       "output_splits"?} → a tensor
//   all_gather          params "axis": a nested value (tf) → the same;
//                       without: a tensor → the list of every rank's
//   all_reduce          params "op" (default "sum"): a tensor → a tensor
//   reduce_scatter      params "op": a list of one tensor per rank, or a
//                       tensor cut evenly on dim 0 → a tensor
//   broadcast, scatter  params "src" (scatter's source: a list of one
//                       value per rank) → a value
//   gather              params "dst" → on dst the list of every rank's
//                       value, elsewhere null
//   barrier             → null
//   kjt_all_to_all      a KJT (kjt.h's Value form); params
//                       "features_per_rank", "stagger" → a KJT
//   sparse_features_all_to_all  {"id_list": KJT, "id_score_list": KJT};
//                       params "id_list_features_per_rank",
//                       "id_score_list_features_per_rank", "stagger"
#ifndef FERRY_COLLECTIVES_ALGORITHMS_BY_NAME_H_
#define FERRY_COLLECTIVES_ALGORITHMS_BY_NAME_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "collectives/op/op.h"
#include "rpc/value/value.h"

namespace ferry {
namespace by_name {

using Runner = void (*)(Result<Value> result, Value input, Value params);

// The collective called `name` ("all_reduce"); nullptr if none.
Runner Find(absl::string_view name);
// Every name, sorted.
std::vector<std::string> Names();

}  // namespace by_name
}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_BY_NAME_H_
