#include "collectives/op/checks.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "rpc/value/dtype.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {

absl::Status CheckTensorList(const Op& op, const std::vector<Tensor>& tensors,
                             absl::string_view what) {
  if (static_cast<int>(tensors.size()) != op.size()) {
    return op.BadInput(absl::StrCat(what, " must be a list of ", op.size(),
                                    " tensors (one per rank), got ",
                                    tensors.size(), " items"));
  }
  for (size_t i = 1; i < tensors.size(); ++i) {
    if (tensors[i].dtype() != tensors[0].dtype()) {
      return op.BadInput(absl::StrCat(
          what, "[", i, "] is ", DTypeName(tensors[i].dtype()), " but ", what,
          "[0] is ", DTypeName(tensors[0].dtype())));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSplits(const Op& op, const std::vector<int64_t>& splits,
                         absl::string_view what) {
  if (splits.empty()) return absl::OkStatus();
  if (static_cast<int>(splits.size()) != op.size()) {
    return op.BadInput(absl::StrCat(what, " has ", splits.size(),
                                    " entries, the group has ", op.size(),
                                    " ranks"));
  }
  for (size_t i = 0; i < splits.size(); ++i) {
    if (splits[i] < 0) {
      return op.BadInput(
          absl::StrCat(what, "[", i, "] is negative (", splits[i], ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRankParam(const Op& op, int r, absl::string_view what) {
  if (r >= 0 && r < op.size()) return absl::OkStatus();
  return op.BadInput(absl::StrCat("\"", what, "\" ", r,
                                  " is not a rank of the group (size ",
                                  op.size(), ")"));
}

absl::Status CheckInto(const Op& op, const TensorOut& into, DType dtype,
                       const Shape& shape, absl::string_view what) {
  if (into == nullptr) return absl::OkStatus();
  if (into->dtype() == dtype && into->shape() == shape) return absl::OkStatus();
  return op.BadInput(absl::StrCat(
      what, " is ", DTypeName(into->dtype()), " ", ShapeString(into->shape()),
      " but the result is ", DTypeName(dtype), " ", ShapeString(shape)));
}

absl::Status CheckInto(const Op& op, const TensorOut& into, const Tensor& like,
                       absl::string_view what) {
  return CheckInto(op, into, like.dtype(), like.shape(), what);
}

std::optional<TensorLanding> LandingOf(const TensorOut& into) {
  if (into == nullptr) return std::nullopt;
  return TensorLanding::Within(*into, 0, into->numel());
}

Tensor HeldBy(const TensorOut& into) {
  // The builder's shape is valid and its numel is the view's.
  return *into->View(0, into->numel()).Reshape(into->shape());
}

absl::StatusOr<Tensor> Place(const Op& op, const TensorOut& into,
                             const Tensor& got, absl::string_view what) {
  if (into == nullptr) return got;
  absl::Status fits = CheckInto(op, into, got, what);
  if (!fits.ok()) return fits;
  if (got.nbytes() > 0 && got.data() != into->data()) {
    std::memcpy(into->data(), got.data(), got.nbytes());
  }
  return HeldBy(into);
}

proto::TensorMeta MetaOf(const Tensor& t) {
  proto::TensorMeta meta;
  meta.set_dtype(static_cast<proto::DType>(t.dtype()));
  for (int64_t d : t.shape()) meta.add_shape(d);
  return meta;
}

std::string MetaString(const proto::TensorMeta& meta) {
  return absl::StrCat(DTypeName(static_cast<DType>(meta.dtype())), " ",
                      ShapeString(meta.shape()));
}

absl::Status CheckMeta(const Op& op, int from, const proto::TensorMeta& meta) {
  if (!IsValidDType(meta.dtype()))
    return op.Malformed(from, absl::StrCat("dtype ", meta.dtype()));
  if (meta.shape_size() > op.limits().max_tensor_rank)
    return op.Malformed(from,
                        absl::StrCat("a tensor of rank ", meta.shape_size()));
  return absl::OkStatus();
}

bool Matches(const Tensor& t, const proto::TensorMeta& meta) {
  if (static_cast<int>(t.dtype()) != meta.dtype() ||
      t.rank() != meta.shape_size()) {
    return false;
  }
  for (int i = 0; i < t.rank(); ++i) {
    if (t.dim(i) != meta.shape(i)) return false;
  }
  return true;
}

bool SameMeta(const proto::TensorMeta& a, const proto::TensorMeta& b) {
  if (a.dtype() != b.dtype() || a.shape_size() != b.shape_size()) return false;
  for (int i = 0; i < a.shape_size(); ++i) {
    if (a.shape(i) != b.shape(i)) return false;
  }
  return true;
}

absl::Status Mismatch(const Op& op, int r, absl::string_view field,
                      absl::string_view theirs, absl::string_view rank0s) {
  return op.Error(absl::StatusCode::kInvalidArgument,
                  absl::StrCat(op.Who(r), " has ", field, " ", theirs, " but ",
                               op.Who(0), " has ", rank0s));
}

absl::Status CheckSame(const Op& op, const std::vector<std::string>& shown,
                       absl::string_view field) {
  for (size_t r = 1; r < shown.size(); ++r) {
    if (shown[r] != shown[0])
      return Mismatch(op, static_cast<int>(r), field, shown[r], shown[0]);
  }
  return absl::OkStatus();
}

}  // namespace ferry
