// Checks the typed algorithms share: this rank's input (INVALID_ARGUMENT
// naming this rank and the field, before anything is sent), and every
// rank's metadata against rank 0's (INVALID_ARGUMENT naming the first rank
// that differs, computed from data every rank holds, so every rank reports
// the same error). A peer's header is checked before it is read
// (CheckMeta): a malformed one fails the op naming the sender.
#ifndef FERRY_COLLECTIVES_OP_CHECKS_H_
#define FERRY_COLLECTIVES_OP_CHECKS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "collectives/op/op.h"
#include "collectives/op/tensor_out.h"
#include "proto/collectives.pb.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_landing.h"
#include "rpc/value/value.h"

namespace ferry {

// ---- This rank's input ----

// Exactly `n` tensors (one per rank) of one dtype: "input must be a list
// of 3 tensors (one per rank), got 2 items", "input[1] is float32 but
// input[0] is int64".
absl::Status CheckTensorList(const Op& op, const std::vector<Tensor>& tensors,
                             absl::string_view what);
// Splits of a group's size, none negative ("input_splits has 2 entries,
// the group has 3 ranks", "input_splits[1] is negative (-1)"). Empty
// splits pass (they mean "absent").
absl::Status CheckSplits(const Op& op, const std::vector<int64_t>& splits,
                         absl::string_view what);
// A group rank parameter (src, dst): "\"src\" 7 is not a rank of the group
// (size 3)".
absl::Status CheckRankParam(const Op& op, int r, absl::string_view what);

// ---- Outputs (tensor_out.h) ----

// A caller's output (null passes) for a result of `dtype` and `shape`:
// "output is float32 [3] but the result is float32 [2]".
absl::Status CheckInto(const Op& op, const TensorOut& into, DType dtype,
                       const Shape& shape, absl::string_view what);
absl::Status CheckInto(const Op& op, const TensorOut& into, const Tensor& like,
                       absl::string_view what);
// Where a tensor for `into` is received (nullopt for none).
std::optional<TensorLanding> LandingOf(const TensorOut& into);
// The tensor `into` holds, sharing it (its shape).
Tensor HeldBy(const TensorOut& into);
// The result `got` in `into`: `got` itself without one; else `into`'s
// tensor, with `got` copied there unless it was received there.
// INVALID_ARGUMENT (CheckInto) if `got` is not of `into`'s dtype and shape.
absl::StatusOr<Tensor> Place(const Op& op, const TensorOut& into,
                             const Tensor& got, absl::string_view what);

// ---- Metadata ----

proto::TensorMeta MetaOf(const Tensor& t);
// "float32 [2, 2]". Only for metadata checked by CheckMeta (or this rank's).
std::string MetaString(const proto::TensorMeta& meta);
// A peer's tensor metadata: a known dtype and at most --max_tensor_rank
// dims (so printing it is bounded); INTERNAL naming `from` otherwise.
absl::Status CheckMeta(const Op& op, int from, const proto::TensorMeta& meta);
// Whether `t` is what `meta` says.
bool Matches(const Tensor& t, const proto::TensorMeta& meta);
bool SameMeta(const proto::TensorMeta& a, const proto::TensorMeta& b);

// INVALID_ARGUMENT: "rank r (…) has <field> <theirs> but rank 0 (…) has
// <rank0s>" — the form of every cross-rank mismatch.
absl::Status Mismatch(const Op& op, int r, absl::string_view field,
                      absl::string_view theirs, absl::string_view rank0s);
// Every rank's `shown[r]` must equal rank 0's: Mismatch for the first that
// does not.
absl::Status CheckSame(const Op& op, const std::vector<std::string>& shown,
                       absl::string_view field);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_CHECKS_H_
