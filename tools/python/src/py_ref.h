// Python objects held by ferry's threads.
//
// ferry drops what it holds (tensor buffers, callbacks) on whichever thread
// finishes with it, usually one that does not hold the GIL and must not
// wait for it (a gRPC thread blocked on the GIL stalls every call it
// carries). So references to Python objects are dropped without the GIL:
// DeferDecRef queues the decref, and the queue is drained under the GIL —
// by Python's pending-call mechanism on the main thread, and at every entry
// into the module (DrainDeferred).
//
//   PyRef fn(py::reinterpret_borrow<py::object>(callable));  // GIL held
//   worker.Then([fn](…) { … });      // copied and dropped on any thread
//
// Once the interpreter is finalizing, deferred references are leaked.
#ifndef FERRY_TOOLS_PYTHON_SRC_PY_REF_H_
#define FERRY_TOOLS_PYTHON_SRC_PY_REF_H_

#include <Python.h>

#include <memory>

#include "pybind11/pybind11.h"

namespace ferry::python {

namespace py = ::pybind11;

// Drops one reference to `object` later, under the GIL. Any thread; no GIL
// needed.
void DeferDecRef(PyObject* object);

// Drops the queued references now. The GIL must be held.
void DrainDeferred();

// After this, deferred references are leaked rather than dropped (called
// at interpreter exit, before ferry's threads stop).
void StopDeferring();

// True unless the interpreter is finalizing (or StopDeferring was called):
// only then may a ferry thread take the GIL.
bool PythonAlive();

// A counted reference to a Python object that any thread may copy and
// drop; only reading the object needs the GIL.
class PyRef {
 public:
  PyRef() = default;
  // Takes a new reference to `object`. The GIL must be held.
  explicit PyRef(py::handle object);

  bool valid() const { return ptr_ != nullptr; }
  PyObject* ptr() const { return ptr_.get(); }
  // A new reference to the object. The GIL must be held.
  py::object object() const {
    return py::reinterpret_borrow<py::object>(ptr_.get());
  }

 private:
  std::shared_ptr<PyObject> ptr_;
};

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_PY_REF_H_
