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
#include "collectives/reduce.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

// The tensor `v`; INVALID_ARGUMENT naming `what` otherwise.
absl::StatusOr<Tensor> TensorArg(const Op& op, const Value& v,
                                 absl::string_view what);
// A list of exactly `n` tensors of one dtype.
absl::StatusOr<std::vector<Tensor>> TensorListArg(const Op& op, const Value& v,
                                                  int n,
                                                  absl::string_view what);
// An int parameter; `fallback` if absent.
absl::StatusOr<int64_t> IntParam(const Op& op, const Value& params,
                                 absl::string_view key,
                                 std::optional<int64_t> fallback);
// A group rank parameter (src, dst).
absl::StatusOr<int> RankParam(const Op& op, const Value& params,
                              absl::string_view key);
// The reduce op in params "op" (default "sum"), checked against `dtype`.
absl::StatusOr<ReduceOp> ReduceParam(const Op& op, const Value& params,
                                     DType dtype);
// A list of non-negative ints (splits); nullopt if absent or empty.
absl::StatusOr<std::optional<std::vector<int64_t>>> SplitsArg(
    const Op& op, const Value& v, absl::string_view what, int n);

// INTERNAL: the message from group rank `from` is not what the algorithm
// sends.
absl::Status Malformed(const Op& op, int from, absl::string_view what);
// Field `key` of the message from group rank `from` (a map built by the
// same algorithm there); INTERNAL naming the sender if it is missing, so a
// malformed message fails the op instead of the worker.
absl::StatusOr<const Value*> Part(const Op& op, const Value& message,
                                  absl::string_view key, int from);
// A tensor field that must have `like`'s dtype and number of elements.
absl::StatusOr<Tensor> TensorPart(const Op& op, const Value& message,
                                  absl::string_view key, int from,
                                  const Tensor& like);
// A whole message that must be a tensor like `like` (ring partials).
absl::StatusOr<Tensor> TensorLike(const Op& op, const Value& message, int from,
                                  const Tensor& like);

// {"dtype": …, "shape": […]} of a tensor; whether `meta` is one (as a
// peer sent it: checked before use).
Value TensorMeta(const Tensor& t);
bool IsTensorMeta(const Value& meta);
std::string MetaString(const Value& meta);

// INVALID_ARGUMENT: "rank r (…) has <field> <theirs> but rank 0 (…) has
// <rank0s>" — the form of every cross-rank mismatch, so that all ranks,
// comparing the same data, report the same error.
absl::Status Mismatch(const Op& op, int r, absl::string_view field,
                      absl::string_view theirs, absl::string_view rank0s);

// Every rank's tensor metadata must equal rank 0's: INVALID_ARGUMENT naming
// the first rank that differs, and how. The same on every rank.
absl::Status CheckSameMeta(const Op& op, const std::vector<Value>& metas,
                           absl::string_view field);

// [x, …] as a Value list.
Value IntList(const std::vector<int64_t>& xs);

// The product of shape[from:].
int64_t Product(const Shape& shape, size_t from);

// About how many bytes `v` takes on the wire.
int64_t PayloadBytes(const Value& v);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ARGS_H_
