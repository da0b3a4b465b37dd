// Python objects ↔ ferry Values, tensors without copies.
//
// Python → Value (the GIL held):
//   None, bool, int (int64), float, str, bytes/bytearray, list/tuple, dict
//   with str keys, ferry.RRef; numpy scalars as Python numbers; complex as a
//   0-d complex128 tensor; numpy arrays, torch tensors and ferry.BFloat16
//   as tensors. A C-contiguous, aligned, native-order array (or CPU torch
//   tensor) is not copied: the Tensor wraps its memory and keeps the Python
//   object alive (dropped without the GIL: py_ref.h). Anything else is
//   copied into a contiguous array first. Errors are INVALID_ARGUMENT
//   naming the place ("args[1]['w']: …").
//
// Value → Python (the GIL held): the reverse; tensors become numpy arrays or
// torch tensors (TensorKind) over ferry's buffer, without copies:
//   numpy  a read-only array (ferry tensors are immutable); bfloat16, which
//          numpy lacks, becomes float32 (exact; a copy)
//   torch  a tensor sharing the buffer (torch has no read-only tensors).
//          A buffer that is one of this process's Python objects (a value
//          that never left the process) is cloned instead, so writing into
//          a result never changes an argument.
#ifndef FERRY_TOOLS_PYTHON_SRC_CONVERT_H_
#define FERRY_TOOLS_PYTHON_SRC_CONVERT_H_

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pybind11/pybind11.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"
#include "tools/python/src/leases.h"

namespace ferry::python {

namespace py = ::pybind11;

enum class TensorKind { kNumpy, kTorch };

// Where a value sits in the argument tree, for error messages; built on the
// stack as conversion descends and formatted only on error.
struct Path {
  const Path* parent = nullptr;
  const char* name = nullptr;        // The root: "args", "input", …
  int64_t index = -1;                // A list item…
  const std::string* key = nullptr;  // …or a map key.

  std::string ToString() const;
};

// What a conversion saw, and what the Tensors it made borrow.
struct ConvertState {
  bool saw_torch = false;
  bool saw_numpy = false;
  // If set, every tensor wrapping Python memory holds a lease here.
  std::shared_ptr<LeaseSet> leases;

  // torch if any tensor argument was a torch tensor, numpy if any was a
  // numpy array, `fallback` if there were none.
  TensorKind KindOr(TensorKind fallback) const {
    return saw_torch   ? TensorKind::kTorch
           : saw_numpy ? TensorKind::kNumpy
                       : fallback;
  }
};

// Set at import by ferry/__init__.py: the Python classes the conversion
// recognizes and makes (ferry.RRef and its factory, ferry.BFloat16).
struct PythonClasses {
  py::handle rref_class;      // instances have ._handle (an RRefHandle)
  py::handle make_rref;       // make_rref(RRefHandle) → ferry.RRef
  py::handle bfloat16_class;  // instances have .bits (a uint16 array)
};
void SetPythonClasses(py::handle rref_class, py::handle make_rref,
                      py::handle bfloat16_class);

// Looks numpy's C API and dtypes up, once, at the module's import (before
// ferry has threads): see convert.cc.
void InitNumpy();

absl::StatusOr<Value> ToValue(py::handle object, const Path& path,
                              ConvertState* state);
// Each item of a sequence, as call arguments.
absl::StatusOr<std::vector<Value>> ToValues(py::handle sequence,
                                            const Path& path,
                                            ConvertState* state);
absl::StatusOr<Tensor> ToTensor(py::handle object, const Path& path,
                                ConvertState* state);
// True for what ToTensor takes (numpy array, torch tensor, ferry.BFloat16).
bool IsTensorLike(py::handle object);

py::object FromValue(const Value& value, TensorKind kind);
py::object FromTensor(const Tensor& tensor, TensorKind kind);
py::list FromValues(const std::vector<Value>& values, TensorKind kind);

// The kind named "numpy" or "torch"; INVALID_ARGUMENT otherwise.
absl::StatusOr<TensorKind> ParseTensorKind(absl::string_view name);

// A writable, C-contiguous tensor buffer that a collective writes its
// result into (torch's output arguments). The Python object stays alive.
struct Destination {
  std::string label;  // "output_tensor_list[2]"
  DType dtype = DType::kFloat32;
  Shape shape;
  char* data = nullptr;
  size_t nbytes = 0;
  PyRef keep;          // The array owning `data`.
  bool torch = false;  // A torch tensor (else a numpy array).
};

// INVALID_ARGUMENT if `object` is not a writable, contiguous numpy array or
// CPU torch tensor.
absl::StatusOr<Destination> ToDestination(py::handle object, std::string label);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_CONVERT_H_
