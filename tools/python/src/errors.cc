#include "tools/python/src/errors.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"

namespace ferry::python {

namespace {

// Set once at import and kept for the life of the process (never
// released: ferry's threads may raise into them while Python exits).
PyObject* error_classes = nullptr;  // dict: code name → class
PyObject* error_base = nullptr;

py::handle ClassFor(absl::StatusCode code) {
  if (error_classes != nullptr) {
    PyObject* cls =
        PyDict_GetItemString(error_classes, StatusCodeName(code).c_str());
    if (cls != nullptr) return cls;
  }
  if (error_base != nullptr) return error_base;
  return PyExc_RuntimeError;
}

struct Mapping {
  PyObject* python_class;
  absl::StatusCode code;
};

}  // namespace

void SetErrorClasses(py::dict by_code, py::object base) {
  error_classes = by_code.release().ptr();
  error_base = base.release().ptr();
}

py::object ExceptionFor(const absl::Status& status) {
  py::handle cls = ClassFor(status.code());
  return cls(py::str(std::string(status.message())),
             py::str(StatusCodeName(status.code())));
}

void Raise(const absl::Status& status) {
  py::object exception = ExceptionFor(status);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())),
                  exception.ptr());
  throw py::error_already_set();
}

absl::Status StatusFromException(py::handle exception) {
  if (error_base != nullptr &&
      PyObject_IsInstance(exception.ptr(), error_base) == 1) {
    absl::StatusCode code = absl::StatusCode::kUnknown;
    std::string name = py::str(exception.attr("code"));
    if (!ParseStatusCodeName(name, &code) || code == absl::StatusCode::kOk) {
      code = absl::StatusCode::kUnknown;
    }
    return absl::Status(code, std::string(py::str(exception)));
  }
  // Subclasses before their bases: ConnectionError and TimeoutError are
  // OSErrors, like PermissionError.
  const Mapping mappings[] = {
      {PyExc_TimeoutError, absl::StatusCode::kDeadlineExceeded},
      {PyExc_PermissionError, absl::StatusCode::kPermissionDenied},
      {PyExc_ConnectionError, absl::StatusCode::kUnavailable},
      {PyExc_ValueError, absl::StatusCode::kInvalidArgument},
      {PyExc_TypeError, absl::StatusCode::kInvalidArgument},
      {PyExc_LookupError, absl::StatusCode::kNotFound},
      {PyExc_NotImplementedError, absl::StatusCode::kUnimplemented},
  };
  absl::StatusCode code = absl::StatusCode::kInternal;
  for (const Mapping& m : mappings) {
    if (PyObject_IsInstance(exception.ptr(), m.python_class) == 1) {
      code = m.code;
      break;
    }
  }
  std::string text = py::str(exception);
  std::string type = py::str(py::type::handle_of(exception).attr("__name__"));
  return absl::Status(code,
                      text.empty() ? type : absl::StrCat(type, ": ", text));
}

}  // namespace ferry::python
