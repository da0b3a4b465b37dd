// Reading a collective's input and parameters (Values shaped like
// ferryctl's JSON) with errors that name the field, and the metadata ranks
// exchange to check each other's inputs.
#ifndef FERRY_COLLECTIVES_ARGS_H_
#define FERRY_COLLECTIVES_ARGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "collectives/op.h"
#include "rpc/tensor.h"
#include "rpc/value.h"

namespace ferry {

// The tensor `v`; INVALID_ARGUMENT naming `what` otherwise.
absl::StatusOr<Tensor> TensorArg(const Op& op, const Value& v, absl::string_view what);
// A list of exactly `n` tensors of one dtype.
absl::StatusOr<std::vector<Tensor>> TensorListArg(const Op& op, const Value& v, int n,
                                                  absl::string_view what);
// An int parameter; `fallback` if absent.
absl::StatusOr<int64_t> IntParam(const Op& op, const Value& params, absl::string_view key,
                                 std::optional<int64_t> fallback);
// A group rank parameter (src, dst).
absl::StatusOr<int> RankParam(const Op& op, const Value& params, absl::string_view key);
// A list of non-negative ints (splits); nullopt if absent or empty.
absl::StatusOr<std::optional<std::vector<int64_t>>> SplitsArg(const Op& op, const Value& v,
                                                              absl::string_view what, int n);

// {"dtype": …, "shape": […]} of a tensor.
Value TensorMeta(const Tensor& t);
std::string MetaString(const Value& meta);

// Every rank's tensor metadata must equal rank 0's: INVALID_ARGUMENT naming
// the first rank that differs, and how. The same on every rank.
absl::Status CheckSameMeta(const Op& op, const std::vector<Value>& metas,
                           absl::string_view field);

int64_t Product(const Shape& shape, size_t from);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ARGS_H_
