#include "tools/python/src/pending_op.h"

#include <utility>

#include "absl/time/clock.h"
#include "tools/python/src/errors.h"

namespace ferry::python {

namespace {

Value CopyPythonMemory(Value v) {
  switch (v.kind()) {
    case Value::Kind::kTensor:
      return Value(OwnedCopyIfPython(v.as_tensor()));
    case Value::Kind::kList:
      for (Value& item : v.as_list()) item = CopyPythonMemory(std::move(item));
      return v;
    case Value::Kind::kMap:
      for (auto& [key, item] : v.as_map()) {
        item = CopyPythonMemory(std::move(item));
      }
      return v;
    default:
      return v;
  }
}

}  // namespace

PendingOp::PendingOp(Future<Value> result, Staging staging)
    : result_(std::move(result)),
      staging_(std::move(staging)),
      deadline_(staging_.timeout == absl::ZeroDuration()
                    ? absl::InfiniteFuture()
                    : absl::Now() + staging_.timeout) {}

PendingOp::~PendingOp() {
  // The result may hold RRefs, which must not be dropped with the GIL
  // held.
  if (PyGILState_Check()) {
    py::gil_scoped_release release;
    result_ = Future<Value>();
    value_.reset();
  }
}

bool PendingOp::IsCompleted() const {
  return finished_.has_value() || result_.IsReady();
}

void PendingOp::AddDoneCallback(py::handle callback) {
  PyRef fn(callback);
  if (finished_.has_value() || !result_.valid()) {
    fn.object()();
    return;
  }
  Future<Value> result = result_;
  py::gil_scoped_release release;
  result.Then([fn = std::move(fn)](const absl::StatusOr<Value>&) {
    if (!PythonAlive()) return;
    py::gil_scoped_acquire gil;
    DrainDeferred();
    try {
      fn.object()();
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("ferry: a collective's done callback");
    }
  });
}

void PendingOp::OnDone(absl::AnyInvocable<void() &&> done) {
  if (finished_.has_value() || !result_.valid()) return std::move(done)();
  result_.Then([done = std::move(done)](const absl::StatusOr<Value>&) mutable {
    std::move(done)();
  });
}

void DoneQueue::Watch(PendingOp& op, int64_t id) {
  std::weak_ptr<DoneQueue> weak = weak_from_this();
  py::gil_scoped_release release;
  op.OnDone([weak, id] {
    std::shared_ptr<DoneQueue> q = weak.lock();
    if (q == nullptr) return;
    absl::MutexLock lock(&q->mu_);
    q->done_.push_back(id);
  });
}

std::optional<int64_t> DoneQueue::Next(double timeout) {
  py::gil_scoped_release release;
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !done_.empty();
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(timeout))) {
    return std::nullopt;
  }
  const int64_t id = done_.front();
  done_.pop_front();
  return id;
}

absl::StatusOr<Value> PendingOp::Detach(Value result) {
  Value owned = CopyPythonMemory(std::move(result));
  absl::Status released = staging_.leases->WaitAllReleased(deadline_);
  if (!released.ok()) return released;
  return owned;
}

py::object PendingOp::Wait(std::optional<double> timeout) {
  if (!finished_.has_value()) {
    absl::Duration bound = timeout.has_value() && *timeout >= 0
                               ? absl::Seconds(*timeout)
                               : deadline_ - absl::Now() + absl::Seconds(5);
    absl::Status not_done;
    {
      py::gil_scoped_release release;
      not_done = Finish(bound);
    }
    // Not done in time: the op goes on; wait again.
    ThrowIfError(not_done);
  }
  ThrowIfError(*finished_);
  if (!value_.has_value()) return py::none();
  return FromValue(*value_, staging_.kind);
}

absl::Status PendingOp::Finish(absl::Duration bound) {
  absl::StatusOr<Value> r = result_.Wait(bound);
  if (!r.ok() && !result_.IsReady()) return r.status();
  result_ = Future<Value>();  // Its copy of the result must go too.
  if (!r.ok()) {
    finished_ = r.status();
  } else if (staging_.returns_result) {
    absl::StatusOr<Value> v = Detach(*std::move(r));
    finished_ = v.status();
    if (v.ok()) value_ = *std::move(v);
  } else {
    // The op wrote its outputs (into.h); they, and the inputs, are the
    // caller's again once ferry let go of the inputs.
    finished_ = staging_.leases->WaitAllReleased(deadline_);
  }
  return absl::OkStatus();
}

}  // namespace ferry::python
