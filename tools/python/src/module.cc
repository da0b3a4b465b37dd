// _ferry: the C++ half of the `ferry` Python package (tools/python/ferry/),
// over ferry's public API (ferry.h). The package's modules say what each
// piece is for; this file only assembles them.
#include <Python.h>

#include "absl/synchronization/mutex.h"
#include "pybind11/pybind11.h"
#include "tools/python/src/bench.h"
#include "tools/python/src/collective_ops.h"
#include "tools/python/src/convert.h"
#include "tools/python/src/elastic_ops.h"
#include "tools/python/src/endpoints.h"
#include "tools/python/src/errors.h"
#include "tools/python/src/futures.h"
#include "tools/python/src/py_ref.h"
#include "tools/python/src/store.h"

namespace py = ::pybind11;

PYBIND11_MODULE(_ferry, m) {
  using namespace ::ferry::python;  // NOLINT: the module's own namespace.
  m.doc() = "ferry's C++ runtime; use the `ferry` package.";
  // Abseil's mutex deadlock detection is on in Debian's build: it updates
  // a global lock graph on every lock ferry's threads take (3 % of a gRPC
  // thread's user time in a DDP run, perf). ferryd turns it off too
  // (TuneProcessForServing); the C++ tests keep it. Nothing else in a
  // Python process uses Abseil's mutexes through this module.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  InitNumpy();
  m.def("_set_error_classes", &SetErrorClasses, py::arg("by_code"),
        py::arg("base"));
  m.def("_set_classes", &SetPythonClasses, py::arg("rref_class"),
        py::arg("make_rref"), py::arg("bfloat16_class"));
  // At interpreter exit, before ferry's threads stop: from then on they
  // neither take the GIL nor drop Python references.
  m.def("_stop_deferring", &StopDeferring);
  m.def("_drain", &DrainDeferred);
  BindFutures(m);
  BindEndpoints(m);
  BindCollectives(m);
  BindElastic(m);
  BindBench(m);
  BindStore(m);
}
