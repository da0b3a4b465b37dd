#include "tools/python/src/py_ref.h"

#include <atomic>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ferry::python {

namespace {

// The queue of references to drop. Process-wide like the interpreter it
// serves; never destroyed (ferry threads may use it during exit).
class DeferredDecRefs {
 public:
  // True if the queue was empty (the caller then asks for a drain).
  bool Push(PyObject* object) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    pending_.push_back(object);
    return pending_.size() == 1;
  }

  std::vector<PyObject*> Take() ABSL_LOCKS_EXCLUDED(mu_) {
    std::vector<PyObject*> out;
    absl::MutexLock lock(&mu_);
    out.swap(pending_);
    return out;
  }

  bool empty() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return pending_.empty();
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<PyObject*> pending_ ABSL_GUARDED_BY(mu_);
};

DeferredDecRefs& Deferred() {
  static auto* deferred = new DeferredDecRefs();
  return *deferred;
}

std::atomic<bool> stopped{false};

int DrainPendingCall(void*) {
  DrainDeferred();
  return 0;
}

}  // namespace

bool PythonAlive() {
  return !stopped.load(std::memory_order_acquire) && Py_IsInitialized() &&
         !_Py_IsFinalizing();
}

void DeferDecRef(PyObject* object) {
  if (object == nullptr || !PythonAlive()) return;
  if (Deferred().Push(object)) {
    // May fail when Python's small pending-call queue is full; the next
    // entry into the module drains then.
    Py_AddPendingCall(DrainPendingCall, nullptr);
  }
}

void DrainDeferred() {
  if (Deferred().empty()) return;
  // Decrefs may run destructors that defer more; those wait for the next
  // drain.
  for (PyObject* object : Deferred().Take()) Py_DECREF(object);
}

void StopDeferring() { stopped.store(true, std::memory_order_release); }

PyRef::PyRef(py::handle object)
    : ptr_(object.inc_ref().ptr(), [](PyObject* p) { DeferDecRef(p); }) {}

}  // namespace ferry::python
