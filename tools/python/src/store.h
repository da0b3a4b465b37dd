// _ferry.Store: a job's key-value store (rpc/membership/store_client.h)
// for ferry/store.py, which makes it torch's dist.Store. Every call
// releases the GIL while it talks to the master or etcd.
#ifndef FERRY_TOOLS_PYTHON_SRC_STORE_H_
#define FERRY_TOOLS_PYTHON_SRC_STORE_H_

#include "pybind11/pybind11.h"

namespace ferry::python {

void BindStore(pybind11::module_& m);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_STORE_H_
