#include "tools/python/src/elastic_ops.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/elastic/elastic.h"
#include "ferry/ferry.h"
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

// A worker's membership events, queued for Python
// (rpc/membership/membership_events.h): the subscriber only queues (it runs on
// the thread that saw the event, which must not wait for the GIL); Python takes
// them with Next, the GIL released while it waits. At most kMaxQueued wait;
// older ones are dropped first (and counted).
class EventStream {
 public:
  static constexpr size_t kMaxQueued = 1024;

  explicit EventStream(WorkerHandle& h) : worker_(h.worker.get()) {
    id_ = worker_->OnMembershipChange([this](const MembershipEvent& e) {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      queue_.push_back(e);
      if (queue_.size() > kMaxQueued) {
        queue_.pop_front();
        ++dropped_;
      }
    });
  }
  ~EventStream() { Close(); }

  // The next event as a dict, waiting at most `timeout` seconds (None: no
  // bound); None if none came, or once closed.
  py::object Next(std::optional<double> timeout) {
    std::optional<MembershipEvent> e;
    {
      py::gil_scoped_release release;
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closed_ || !queue_.empty();
      };
      if (timeout.has_value()) {
        mu_.AwaitWithTimeout(absl::Condition(&ready),
                             absl::Seconds(std::max(0.0, *timeout)));
      } else {
        mu_.Await(absl::Condition(&ready));
      }
      if (!closed_ && !queue_.empty()) {
        e = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (!e.has_value()) return py::none();
    py::dict d;
    d["seq"] = e->seq;
    d["event"] = e->kind;
    d["rank"] = e->rank;
    d["worker"] = e->worker;
    d["detail"] = e->detail;
    d["time"] = static_cast<double>(absl::ToUnixMicros(e->time)) / 1e6;
    if (!e->group.empty()) d["group"] = e->group;
    return d;
  }

  // Unsubscribes; a waiting Next returns None. Idempotent.
  void Close() {
    int64_t id;
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      id = id_;
    }
    worker_->RemoveMembershipListener(id);
  }

  int64_t dropped() {
    absl::MutexLock lock(&mu_);
    return dropped_;
  }

 private:
  Worker* const worker_;
  int64_t id_ = 0;
  absl::Mutex mu_;
  std::deque<MembershipEvent> queue_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

void BindElastic(py::module_& m) {
  py::class_<EventStream>(m, "EventStream")
      .def(py::init<WorkerHandle&>(), py::keep_alive<1, 2>(), py::arg("worker"))
      .def("next", &EventStream::Next, py::arg("timeout") = py::none())
      .def("close", &EventStream::Close)
      .def_property_readonly("dropped", &EventStream::dropped);

  m.def(
      "grow",
      [](GroupHandle& g, double timeout) {
        std::shared_ptr<ProcessGroup> group = g.group;
        CollectiveOptions o = Options(timeout);
        absl::StatusOr<std::shared_ptr<ProcessGroup>> r;
        {
          py::gil_scoped_release release;
          WaitNote note("grow op world");
          r = Grow(*group, o);
        }
        return GroupHandle{ValueOrRaise(std::move(r))};
      },
      py::keep_alive<0, 1>(), py::arg("group"), py::arg("timeout"));

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
