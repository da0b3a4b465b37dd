// StoreState: the job's key-value store as its master keeps it — keys and
// values, the calls waiting for keys, and what each caller holds
// (store_budget.h). StoreService (store_service.h) serves it over gRPC;
// this is its whole logic apart from gRPC, so tests and the fuzzer drive
// it in-process with the requests the service parsed.
//
// Every bound a caller meets is named in its error:
// - keys of 1 to max_key_bytes, values of at most max_value_bytes, a wait
//   for at most max_wait_keys distinct keys (a key asked twice counts
//   once): INVALID_ARGUMENT otherwise;
// - keys, their bytes, waiting calls and the bytes of the keys they wait
//   for, per caller, per job, and the workers' reserved share
//   (StoreShares): RESOURCE_EXHAUSTED naming the account and the limit,
//   nothing changed;
// - a Get or Wait for keys not set yet holds no thread and waits at most
//   min(wait_ms, max_wait, what the call has left), then fails
//   DEADLINE_EXCEEDED naming the first key still missing;
// - Add on a value that is not a decimal int64, or overflowing one:
//   INVALID_ARGUMENT.
// Waits end when a write sets their last key (in the order calls arrive),
// at their deadline, when their caller cancels them (Cancel: the caller
// gave up, its deadline passed, or it left) or when the store stops
// (UNAVAILABLE); each gives back what it held then. A write looks only at
// the waits on its own key (an index from key to waits).
//
// Keys under kWorkersOnly are changed only by the job's workers (Set, Add,
// CompareSet, Delete; PERMISSION_DENIED for anyone else): elastic.h's
// agreements keep their decisions there, which a client must not be able
// to decide ahead of the members.
//
// Thread-safe. Replies run outside the lock, exactly once each.
#ifndef FERRY_RPC_MEMBERSHIP_STORE_STATE_H_
#define FERRY_RPC_MEMBERSHIP_STORE_STATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/store.pb.h"
#include "rpc/base/timers.h"
#include "rpc/membership/store_budget.h"

namespace ferry {

struct StoreLimits {
  int64_t max_key_bytes = 4096;
  int64_t max_value_bytes = 1 << 20;
  int64_t max_wait_keys = 4096;
  absl::Duration max_wait = absl::Hours(1);
  StoreShares shares;
};

class StoreState {
 public:
  // Changed by the job's workers only.
  static constexpr char kWorkersOnly[] = "ferry/agree/";
  // A worker's keys here use the reserved share (store_budget.h).
  static constexpr char kSystemPrefix[] = "ferry/";
  // What one waited key costs beyond its bytes (its copy in the index).
  static constexpr int64_t kPerWaitedKey = 64;

  // A waiting call's answer: its status (its response filled when OK).
  using Reply = absl::AnyInvocable<void(absl::Status) &&>;

  // Deadlines on `timers` (not owned; must outlive the state).
  StoreState(StoreLimits limits, Timers* timers);
  // Stop().
  ~StoreState();

  // Ends every wait (UNAVAILABLE); later waits end at once. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Status Set(const StoreCaller& caller,
                   const proto::StoreSetRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Add(const StoreCaller& caller,
                   const proto::StoreAddRequest& request,
                   proto::StoreAddResponse* response) ABSL_LOCKS_EXCLUDED(mu_);
  // torch's compare_set: an unset key matches an empty `expected`.
  absl::Status CompareSet(const StoreCaller& caller,
                          const proto::StoreCompareSetRequest& request,
                          proto::StoreCompareSetResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Delete(const StoreCaller& caller,
                      const proto::StoreDeleteRequest& request,
                      proto::StoreDeleteResponse* response)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Get and Wait answer through `reply` (perhaps before they return),
  // filling `response` (which must live until then). `call_left`: what
  // the call has left before its own deadline. They return the wait's id
  // while it waits (for Cancel), or 0 if answered already. Wait with
  // wait_ms 0 answers at once whether the keys are all set (torch's
  // check). Wait takes its request's keys: a held wait keeps one copy of
  // each distinct key, however many the request repeated.
  uint64_t Get(const StoreCaller& caller, const proto::StoreGetRequest& request,
               proto::StoreGetResponse* response, absl::Duration call_left,
               Reply reply) ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t Wait(const StoreCaller& caller, proto::StoreWaitRequest request,
                proto::StoreWaitResponse* response, absl::Duration call_left,
                Reply reply) ABSL_LOCKS_EXCLUDED(mu_);
  // Wait `id`'s caller gave up: if it still waits, it ends CANCELLED now.
  void Cancel(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  int64_t num_keys() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t num_waits() const ABSL_LOCKS_EXCLUDED(mu_);
  // What `caller` holds; what the job's callers hold; the reserved share.
  StoreAmount held(const StoreCaller& caller) const ABSL_LOCKS_EXCLUDED(mu_);
  StoreAmount job_held() const ABSL_LOCKS_EXCLUDED(mu_);
  StoreAmount reserved_held() const ABSL_LOCKS_EXCLUDED(mu_);
  // Waits that writes looked at, since the start: a write looks at the
  // waits on its key, no others.
  int64_t waits_examined() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string value;
    StoreBudget::Charge charge;
  };
  // A Get or Wait for keys not all set yet.
  struct Waiter {
    std::vector<std::string> keys;  // Distinct.
    int64_t missing = 0;            // Of `keys`, how many are not set.
    std::string* value = nullptr;   // Get: where the value goes.
    proto::StoreWaitResponse* all_set = nullptr;  // Wait's: all_set.
    Reply reply;
    StoreBudget::Charge charge;
    Timers::TimerId timer = 0;
    int64_t wait_ms = 0;
  };
  // A finished wait: its reply, run outside the lock.
  struct Finish {
    Reply reply;
    absl::Status status;
    Timers::TimerId timer;  // To cancel (0: none, or the one running).
  };

  absl::Status CheckKey(const std::string& key) const;
  // CheckKey, and that `caller` may change `key` (kWorkersOnly).
  absl::Status CheckWrite(const StoreCaller& caller,
                          const std::string& key) const;
  absl::Status CheckValue(const std::string& value) const;
  // Stores `value` at `key`, charged to `caller`; completes the waits it
  // completes into `done`.
  absl::Status PutLocked(const StoreCaller& caller, const std::string& key,
                         std::string value, std::vector<Finish>* done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers now if the keys are set, else waits (or refuses to).
  uint64_t WaitFor(const StoreCaller& caller, Waiter waiter,
                   absl::Duration call_left) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes wait `it` out (its index, its charge) as finished with `status`.
  void RemoveLocked(absl::flat_hash_map<uint64_t, Waiter>::iterator it,
                    absl::Status status, Timers::TimerId timer,
                    std::vector<Finish>* done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills waiter `w`'s response from the keys (all set).
  void AnswerLocked(const Waiter& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Expire(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void FinishAll(std::vector<Finish> done);

  const StoreLimits limits_;
  Timers* const timers_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> data_ ABSL_GUARDED_BY(mu_);
  StoreBudget budget_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // Key → the waits that name it (set or not).
  absl::flat_hash_map<std::string, absl::flat_hash_set<uint64_t>> waiting_on_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t examined_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_STORE_STATE_H_
