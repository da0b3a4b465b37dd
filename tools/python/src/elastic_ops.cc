#include "tools/python/src/elastic_ops.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "collectives/elastic.h"
#include "ferry.h"
#include "pybind11/stl.h"
#include "rpc/stacks.h"
#include "tools/python/src/endpoints.h"
#include "tools/python/src/errors.h"

namespace ferry::python {

namespace {

namespace py = ::pybind11;

// A timeout in seconds as the collectives take it (collective_ops.cc's
// Call): 0 is the worker's default.
CollectiveOptions Options(double timeout) {
  CollectiveOptions options;
  options.timeout = absl::Seconds(timeout);
  return options;
}

}  // namespace

void BindElastic(py::module_& m) {
  m.def(
      "agree",
      [](GroupHandle& g, bool flag, double timeout) {
        std::shared_ptr<ProcessGroup> group = g.group;
        CollectiveOptions o = Options(timeout);
        absl::StatusOr<Agreement> r;
        {
          py::gil_scoped_release release;
          WaitNote note(absl::StrCat("agree op ", group->name()));
          r = Agree(*group, flag, o);
        }
        Agreement a = ValueOrRaise(std::move(r));
        return std::make_pair(a.flag, std::move(a.members));
      },
      py::arg("group"), py::arg("flag"), py::arg("timeout"));

  m.def(
      "shrink",
      [](GroupHandle& g, double timeout) {
        std::shared_ptr<ProcessGroup> group = g.group;
        CollectiveOptions o = Options(timeout);
        absl::StatusOr<std::shared_ptr<ProcessGroup>> r;
        {
          py::gil_scoped_release release;
          WaitNote note(absl::StrCat("shrink op ", group->name()));
          r = Shrink(*group, o);
        }
        return GroupHandle{ValueOrRaise(std::move(r))};
      },
      // The new group keeps the old one's handle, so the worker, alive.
      py::keep_alive<0, 1>(), py::arg("group"), py::arg("timeout"));

  m.def(
      "revoke",
      [](GroupHandle& g, const std::string& reason) {
        std::shared_ptr<ProcessGroup> group = g.group;
        absl::Status s;
        {
          py::gil_scoped_release release;
          s = Revoke(*group, reason);
        }
        ThrowIfError(s);
      },
      py::arg("group"), py::arg("reason"));
}

}  // namespace ferry::python
