// absl::Status ↔ Python exceptions.
//
// ferry/_errors.py defines the exception classes (ferry.Error and one
// subclass per status code, e.g. DeadlineExceededError(Error, TimeoutError))
// and hands them to the module at import (SetErrorClasses). A status
// becomes an instance of its code's class whose message is the status
// message, unchanged; a Python exception raised by a registered function
// becomes a status by its class (StatusFromException).
#ifndef FERRY_TOOLS_PYTHON_SRC_ERRORS_H_
#define FERRY_TOOLS_PYTHON_SRC_ERRORS_H_

#include <Python.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "pybind11/pybind11.h"

namespace ferry::python {

namespace py = ::pybind11;

// `by_code`: {"DEADLINE_EXCEEDED": class, …}; `base`: ferry.Error.
void SetErrorClasses(py::dict by_code, py::object base);

// The exception object for a non-OK `status` (not raised). GIL held.
py::object ExceptionFor(const absl::Status& status);

// Raises the exception for `status` (a non-OK status). GIL held.
[[noreturn]] void Raise(const absl::Status& status);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T ValueOrRaise(absl::StatusOr<T> result) {
  if (!result.ok()) Raise(result.status());
  return *std::move(result);
}

// The status a Python exception stands for: a ferry.Error keeps its code
// and message; TimeoutError → DEADLINE_EXCEEDED, ValueError and TypeError →
// INVALID_ARGUMENT, LookupError → NOT_FOUND, PermissionError →
// PERMISSION_DENIED, ConnectionError → UNAVAILABLE, NotImplementedError →
// UNIMPLEMENTED, anything else INTERNAL; the message is "<Class>: <str>".
// GIL held.
absl::Status StatusFromException(py::handle exception);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_ERRORS_H_
