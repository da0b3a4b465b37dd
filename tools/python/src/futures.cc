#include "tools/python/src/futures.h"

#include <utility>

#include "tools/python/src/errors.h"

namespace ferry::python {

void Settle(const Future<Value>& future, TensorKind kind, PyRef callback) {
  future.Then([callback = std::move(callback),
               kind](const absl::StatusOr<Value>& result) {
    if (!PythonAlive()) return;
    py::gil_scoped_acquire gil;
    DrainDeferred();
    try {
      if (result.ok()) {
        callback.object()(true, FromValue(*result, kind));
      } else {
        callback.object()(false, ExceptionFor(result.status()));
      }
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("ferry: a future's callback");
    }
  });
}

PromiseHandle::PromiseHandle(Promise<Value> promise)
    : state_(std::make_shared<State>()) {
  state_->promise = std::move(promise);
}

PromiseHandle::State::~State() {
  absl::Status lost = absl::InternalError(
      "the Python function's result was dropped before it was set");
  if (PyGILState_Check()) {
    py::gil_scoped_release release;
    promise.Set(lost);
  } else {
    promise.Set(lost);
  }
}

void PromiseHandle::SetResult(py::handle value) {
  ConvertState state;
  Path path{nullptr, "result"};
  absl::StatusOr<Value> v = ToValue(value, path, &state);
  py::gil_scoped_release release;
  state_->promise.Set(std::move(v));
}

void PromiseHandle::SetException(py::handle exception) {
  absl::Status status = StatusFromException(exception);
  py::gil_scoped_release release;
  state_->promise.Set(std::move(status));
}

void BindFutures(py::module_& m) {
  py::class_<PromiseHandle>(m, "Promise",
                            "Settles a call to a registered function.")
      .def("set_result", &PromiseHandle::SetResult, py::arg("value"))
      .def("set_exception", &PromiseHandle::SetException, py::arg("exception"));
}

}  // namespace ferry::python
