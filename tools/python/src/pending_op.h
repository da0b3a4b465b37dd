// A collective started from Python, and what is left once its result is
// there: waiting until ferry no longer reads the inputs' memory (leases.h)
// so they may be reused or written in place, and the result as Python's.
// Ops with torch-style output arguments write them themselves (into.h):
// nothing is copied back here.
//
//   PendingOp op(std::move(result), std::move(staging));
//   py::object r = op.Wait(timeout);   // None for ops that wrote outputs
//
// Both synchronous and async_op=True collectives end this way: the
// synchronous ones with a result that is already there.
#ifndef FERRY_TOOLS_PYTHON_SRC_PENDING_OP_H_
#define FERRY_TOOLS_PYTHON_SRC_PENDING_OP_H_

#include <Python.h>

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pybind11/pybind11.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"
#include "tools/python/src/convert.h"
#include "tools/python/src/leases.h"
#include "tools/python/src/py_ref.h"

namespace ferry::python {

namespace py = ::pybind11;

struct Staging {
  // Leases of every input tensor made from Python memory.
  std::shared_ptr<LeaseSet> leases = std::make_shared<LeaseSet>();
  // Whether the result goes to Python (as `kind`); else the op wrote its
  // outputs itself and Wait returns None.
  bool returns_result = false;
  TensorKind kind = TensorKind::kNumpy;
  // The op's own deadline; waits past it are bounded by it.
  absl::Duration timeout = absl::Seconds(60);
};

class PendingOp;

// Ops that are done, in the order they finished, for a Python thread that
// finishes them (ferry/distributed.py): ferry's threads only push an id
// here, never taking the GIL, and the waiting thread holds no GIL while it
// waits.
class DoneQueue : public std::enable_shared_from_this<DoneQueue> {
 public:
  // Pushes `id` once `op` is done.
  void Watch(PendingOp& op, int64_t id);
  // The next done id, waiting at most `timeout` seconds (GIL released);
  // None if none came.
  std::optional<int64_t> Next(double timeout);

 private:
  absl::Mutex mu_;
  std::deque<int64_t> done_ ABSL_GUARDED_BY(mu_);
};

class PendingOp {
 public:
  PendingOp(Future<Value> result, Staging staging);
  PendingOp(PendingOp&&) = default;
  ~PendingOp();

  // Waits (the GIL released) at most `timeout` seconds (None: the op's
  // own deadline) for the op, finishes it and returns the result, or None
  // for an op that wrote its outputs. Raises the op's error. Calling it again
  // returns the same.
  py::object Wait(std::optional<double> timeout);
  bool IsCompleted() const;
  // Calls `callback()` (with the GIL, on the thread that completes the op,
  // or here if it is done) once the op's result is there; Wait then
  // returns without waiting for the op. The callback must not block.
  void AddDoneCallback(py::handle callback);
  // Runs `done` (on the thread that completes the op, or here if it is
  // done; no GIL taken) once the op's result is there.
  void OnDone(absl::AnyInvocable<void() &&> done);

 private:
  // Waits at most `bound` for the result and finishes the op (setting
  // finished_); DEADLINE_EXCEEDED if the result is not there. GIL released.
  absl::Status Finish(absl::Duration bound);
  // The result with tensors that are Python memory copied, then the inputs
  // released; GIL released.
  absl::StatusOr<Value> Detach(Value result);

  Future<Value> result_;
  Staging staging_;
  absl::Time deadline_;
  // Once finished: the status, and the Python result.
  std::optional<absl::Status> finished_;
  std::optional<Value> value_;
};

}  // namespace ferry::python

#endif  // FERRY_TOOLS_PYTHON_SRC_PENDING_OP_H_
