// Futures and promises between ferry and Python.
//
// A ferry Future settles on one of ferry's threads; Settle() hands its
// result to a Python callback there, with the GIL taken (never under a
// ferry lock: futures run callbacks outside their lock). ferry/_future.py
// turns that into a concurrent.futures.Future.
//
// A Python function registered on a worker settles its call through a
// PromiseHandle: set_result(value) or set_exception(exc), from any Python
// thread; the promise itself is set with the GIL released.
#ifndef FERRY_TOOLS_PYTHON_SRC_FUTURES_H_
#define FERRY_TOOLS_PYTHON_SRC_FUTURES_H_

#include <Python.h>

#include <memory>

#include "pybind11/pybind11.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"
#include "tools/python/src/convert.h"
#include "tools/python/src/py_ref.h"

namespace ferry::python {

namespace py = ::pybind11;

// Calls `callback(True, value)` or `callback(False, exception)` once
// `future` settles (tensors as `kind`). The GIL must NOT be held: the
// callback may run inline.
void Settle(const Future<Value>& future, TensorKind kind, PyRef callback);

class PromiseHandle {
 public:
  explicit PromiseHandle(Promise<Value> promise);

  // Both take the GIL held and release it to set the promise. Later calls
  // are ignored.
  void SetResult(py::handle value);
  void SetException(py::handle exception);

 private:
  // Settles with INTERNAL if the handle is dropped unset, so a lost
  // promise never leaves its caller waiting.
  struct State {
    Promise<Value> promise;
    ~State();
  };
  std::shared_ptr<State> state_;
};

void BindFutures(py::module_& m);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_FUTURES_H_
