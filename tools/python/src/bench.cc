#include "tools/python/src/bench.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "ferry/ferry.h"
#include "pybind11/stl.h"
#include "tools/python/src/convert.h"
#include "tools/python/src/endpoints.h"
#include "tools/python/src/errors.h"

namespace ferry::python {

namespace {

namespace py = ::pybind11;

template <typename Api>
std::vector<double> RpcSyncTimes(Api& api, const std::string& to,
                                 const std::string& fn, py::handle args,
                                 int n) {
  ConvertState state;
  Path path{nullptr, "args"};
  std::vector<Value> values = ValueOrRaise(ToValues(args, path, &state));
  std::vector<double> times;
  absl::Status failed;
  {
    py::gil_scoped_release release;
    for (int i = 0; i < n && failed.ok(); ++i) {
      absl::Time start = absl::Now();
      absl::StatusOr<Value> r = api.RpcSync(to, fn, values);
      times.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      failed = r.status();
    }
    values.clear();
  }
  ThrowIfError(failed);
  return times;
}

}  // namespace

void BindBench(py::module_& m) {
  py::module_ bench = m.def_submodule(
      "bench", "The C++ API's times for tools/python/bench/python_bench.py.");
  bench.def(
      "rpc_sync_us",
      [](WorkerHandle& h, const std::string& to, const std::string& fn,
         py::handle args,
         int n) { return RpcSyncTimes(*h.worker, to, fn, args, n); },
      py::arg("endpoint"), py::arg("to"), py::arg("fn"), py::arg("args"),
      py::arg("n"));
  bench.def(
      "rpc_sync_us",
      [](ClientHandle& h, const std::string& to, const std::string& fn,
         py::handle args,
         int n) { return RpcSyncTimes(*h.client, to, fn, args, n); },
      py::arg("endpoint"), py::arg("to"), py::arg("fn"), py::arg("args"),
      py::arg("n"));
  bench.def(
      "all_reduce_us",
      [](GroupHandle& g, py::handle tensor, int n) {
        ConvertState state;
        Path path{nullptr, "tensor"};
        Tensor t = ValueOrRaise(ToTensor(tensor, path, &state));
        std::vector<double> times;
        absl::Status failed;
        {
          py::gil_scoped_release release;
          for (int i = 0; i < n && failed.ok(); ++i) {
            absl::Time start = absl::Now();
            failed = AllReduce(*g.group, t).status();
            times.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
          }
        }
        ThrowIfError(failed);
        return times;
      },
      py::arg("group"), py::arg("tensor"), py::arg("n"));
}

}  // namespace ferry::python
