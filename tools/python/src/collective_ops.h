// The collectives as module functions over _ferry.Group (endpoints.h):
// torch's argument shapes, ferry's semantics (collectives/collectives.h,
// collectives/sparse.h). Each returns a _ferry.Work (pending_op.h); the
// Python layer (ferry/_collectives.py) waits on it unless async_op=True.
// Inputs are lent without copies; outputs are written in place.
#ifndef FERRY_TOOLS_PYTHON_SRC_COLLECTIVE_OPS_H_
#define FERRY_TOOLS_PYTHON_SRC_COLLECTIVE_OPS_H_

#include "pybind11/pybind11.h"

namespace ferry::python {

void BindCollectives(pybind11::module_& m);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_COLLECTIVE_OPS_H_
