#include "tools/python/src/leases.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "rpc/value/tensor_builder.h"

namespace ferry::python {

void LeaseSet::Acquire(Range range) {
  absl::MutexLock lock(&mu_);
  ++held_;
  ranges_.push_back(range);
}

void LeaseSet::Release() {
  absl::MutexLock lock(&mu_);
  --held_;
}

absl::Status LeaseSet::WaitAllReleased(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto released = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ == 0; };
  if (mu_.AwaitWithDeadline(absl::Condition(&released), deadline)) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat(
      held_, " input buffer(s) still being sent when the deadline passed"));
}

bool LeaseSet::Overlaps(const char* data, size_t n) const {
  absl::MutexLock lock(&mu_);
  for (const Range& r : ranges_) {
    if (data < r.end && r.begin < data + n) return true;
  }
  return false;
}

absl::StatusOr<Tensor> WrapPythonMemory(
    py::handle object, DType dtype, Shape shape, const char* data,
    size_t nbytes, const std::shared_ptr<LeaseSet>& leases) {
  if (leases != nullptr) leases->Acquire({data, data + nbytes});
  // From here the deleter owns the reference and the lease, even if the
  // tensor is rejected below.
  std::shared_ptr<const void> owner(object.inc_ref().ptr(),
                                    PythonBuffer{object.ptr(), leases});
  return Tensor::FromShared(dtype, std::move(shape), std::move(owner), data,
                            nbytes);
}

Tensor OwnedCopyIfPython(const Tensor& tensor) {
  if (!IsPythonMemory(tensor)) return tensor;
  absl::StatusOr<TensorBuilder> b =
      TensorBuilder::Create(tensor.dtype(), tensor.shape());
  if (!b.ok()) return tensor;  // The shape was valid once; cannot happen.
  if (tensor.nbytes() > 0)
    std::memcpy(b->data(), tensor.data(), tensor.nbytes());
  return std::move(*b).Build();
}

}  // namespace ferry::python
