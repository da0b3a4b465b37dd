// Knowing when ferry stops reading Python memory.
//
// Tensors made from numpy arrays and torch tensors wrap their memory
// without a copy, and ferry may go on sending from it after a collective
// returned here (a peer may not have received it yet). torch's contract is
// that an input may be reused, and an in-place output (all_reduce,
// broadcast) is written, once the op returned, so the collectives wait until
// ferry dropped every reference to those buffers: each holds a lease on a
// LeaseSet, released when ferry frees the buffer.
#ifndef FERRY_TOOLS_PYTHON_SRC_LEASES_H_
#define FERRY_TOOLS_PYTHON_SRC_LEASES_H_

#include <Python.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/value/tensor.h"
#include "tools/python/src/py_ref.h"

namespace ferry::python {

class LeaseSet {
 public:
  // A byte range of Python memory lent to ferry.
  struct Range {
    const char* begin;
    const char* end;
  };

  void Acquire(Range range) ABSL_LOCKS_EXCLUDED(mu_);
  void Release() ABSL_LOCKS_EXCLUDED(mu_);
  // OK once every lease is released; DEADLINE_EXCEEDED at `deadline`.
  absl::Status WaitAllReleased(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // True if [data, data + n) overlaps memory lent through this set.
  bool Overlaps(const char* data, size_t n) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  int64_t held_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Range> ranges_ ABSL_GUARDED_BY(mu_);
};

// The deleter of a tensor buffer that is a Python object's memory: drops the
// reference (without the GIL) and the lease, if any.
struct PythonBuffer {
  PyObject* object;
  std::shared_ptr<LeaseSet> leases;

  void operator()(const void*) const {
    if (leases != nullptr) leases->Release();
    DeferDecRef(object);
  }
};

// A tensor over `data` (in `object`'s memory, which it keeps alive): no
// copy. Holds a lease on `leases` if set. GIL held.
absl::StatusOr<Tensor> WrapPythonMemory(
    py::handle object, DType dtype, Shape shape, const char* data,
    size_t nbytes, const std::shared_ptr<LeaseSet>& leases);

// True if `tensor`'s buffer is a Python object's memory.
inline bool IsPythonMemory(const Tensor& tensor) {
  return std::get_deleter<PythonBuffer>(tensor.buffer()) != nullptr;
}

// `tensor`, or a copy of it if its buffer is Python memory.
Tensor OwnedCopyIfPython(const Tensor& tensor);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_LEASES_H_
