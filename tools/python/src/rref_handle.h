// The C++ side of ferry.RRef: an RRef and the kind of tensors its value
// comes back as.
#ifndef FERRY_TOOLS_PYTHON_SRC_RREF_HANDLE_H_
#define FERRY_TOOLS_PYTHON_SRC_RREF_HANDLE_H_

#include <Python.h>

#include <utility>

#include "pybind11/pybind11.h"
#include "rref/rref.h"
#include "tools/python/src/convert.h"

namespace ferry::python {

struct RRefHandle {
  RRef ref;
  TensorKind kind = TensorKind::kNumpy;

  RRefHandle(RRef r, TensorKind k) : ref(std::move(r)), kind(k) {}
  RRefHandle(RRefHandle&&) = default;
  RRefHandle& operator=(RRefHandle&&) = default;
  RRefHandle(const RRefHandle&) = default;
  RRefHandle& operator=(const RRefHandle&) = default;

  // Dropping the last copy tells the owner (ferry's locks, maybe a
  // message): never with the GIL held.
  ~RRefHandle() {
    if (ref.valid() && PyGILState_Check()) {
      pybind11::gil_scoped_release release;
      ref = RRef();
    }
  }
};

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_RREF_HANDLE_H_
