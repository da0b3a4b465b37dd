// The C++ side of tools/python/bench/python_bench.py: the same calls as the
// Python API, looped in C++ on the same worker or client, so the benchmark
// compares Python's cost against the C++ API's in one process and one run.
#ifndef FERRY_TOOLS_PYTHON_SRC_BENCH_H_
#define FERRY_TOOLS_PYTHON_SRC_BENCH_H_

#include "pybind11/pybind11.h"

namespace ferry::python {

// _ferry.bench: rpc_sync_us(endpoint, to, fn, args, n) and
// all_reduce_us(group, tensor, n) return each iteration's time in µs.
void BindBench(pybind11::module_& m);

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_BENCH_H_
