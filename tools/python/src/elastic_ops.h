// Elastic groups from Python (collectives/elastic/elastic.h) as module
// functions over _ferry.Group (endpoints.h): agree, shrink and revoke. The
// Python layer (ferry/_collectives.py: agree, shrink_group, revoke_group) picks
// the group and the timeout. Each waits with the GIL released; errors are
// raised as ferry's exception for their code (errors.h: ABORTED, a revoked
// group, is ferry.AbortedError).
#ifndef FERRY_TOOLS_PYTHON_SRC_ELASTIC_OPS_H_
#define FERRY_TOOLS_PYTHON_SRC_ELASTIC_OPS_H_

#include "pybind11/pybind11.h"

namespace ferry::python {

void BindElastic(pybind11::module_& m);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_ELASTIC_OPS_H_
