// The module's workers and clients: ferry::Worker and ferry::Client as
// Python classes (_ferry.Worker, _ferry.Client), with the calls they share,
// and RRefs (_ferry.RRefHandle). ferry/_rpc.py builds torch's API on them.
//
// Every method that waits or moves bytes releases the GIL; objects whose
// destruction talks to ferry (workers, clients, RRefs) are destroyed with
// the GIL released.
#ifndef FERRY_TOOLS_PYTHON_SRC_ENDPOINTS_H_
#define FERRY_TOOLS_PYTHON_SRC_ENDPOINTS_H_

#include <Python.h>

#include <memory>
#include <optional>

#include "absl/time/time.h"
#include "ferry/ferry.h"
#include "pybind11/pybind11.h"
#include "tools/python/src/convert.h"

namespace ferry::python {

namespace py = ::pybind11;

// A timeout in seconds from Python: None or negative = the default, 0 =
// none (no deadline).
std::optional<absl::Duration> Timeout(std::optional<double> seconds);

struct WorkerHandle {
  std::unique_ptr<Worker> worker;
  TensorKind kind = TensorKind::kNumpy;  // For results with no tensor args.
  ~WorkerHandle();
};

struct ClientHandle {
  std::unique_ptr<Client> client;
  TensorKind kind = TensorKind::kNumpy;
  ~ClientHandle();
};

// A process group: the world, or one made by new_group.
struct GroupHandle {
  std::shared_ptr<ProcessGroup> group;
};

void BindEndpoints(py::module_& m);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_ENDPOINTS_H_
