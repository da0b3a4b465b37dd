// StoreService: the key-value store a job's embedded master (rank 0)
// serves (proto/store.proto), what torch.distributed calls a Store: torch
// programs rendezvous on a ferry job through it (ferry.store,
// init_method="ferry://MASTER"), gloo groups included.
//
// Every bound a caller meets is named in its error:
// - keys of 1 to max_key_bytes, values of at most max_value_bytes,
//   INVALID_ARGUMENT otherwise;
// - at most max_keys keys and max_total_bytes of keys and values held:
//   a new key or a larger value beyond them is RESOURCE_EXHAUSTED;
// - a Get or Wait for keys not set yet holds no thread and waits at most
//   min(wait_ms, max_wait, the call's deadline), then fails
//   DEADLINE_EXCEEDED naming the first key still missing; at most
//   max_waits wait at once (RESOURCE_EXHAUSTED beyond);
// - Add on a value that is not a decimal int64, or overflowing one:
//   INVALID_ARGUMENT.
// Waits end when a Set, Add or CompareSet sets their last key (in the
// order calls arrive), at their deadline, or when the service stops
// (UNAVAILABLE). Times are on the injected timers' clock.
//
// Who may call: anyone with the job's token (the server's authenticator,
// before the body is read); keys are not per node, but for those under
// kWorkersOnly, which only the job's workers change (Set, Add, CompareSet,
// Delete; PERMISSION_DENIED for anyone else), given an `is_worker` check:
// elastic.h's agreements keep their decisions there, which a client must
// not be able to decide ahead of the members.
#ifndef FERRY_RPC_MEMBERSHIP_STORE_SERVICE_H_
#define FERRY_RPC_MEMBERSHIP_STORE_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/store.grpc.pb.h"
#include "rpc/base/limits.h"
#include "rpc/base/timers.h"
#include "rpc/wire/bounded_service.h"

namespace ferry {

struct StoreLimits {
  int64_t max_key_bytes = 4096;
  int64_t max_value_bytes = 1 << 20;
  int64_t max_keys = 65536;
  int64_t max_total_bytes = int64_t{64} << 20;
  int64_t max_waits = 4096;
  absl::Duration max_wait = absl::Hours(1);
};

class StoreService final
    : public BoundedService<proto::Store::CallbackService> {
 public:
  static constexpr char kWorkersOnly[] = "ferry/agree/";
  // Whether the call was made by one of the job's workers (authenticated:
  // the Authenticator's NodeOf).
  using IsWorker = std::function<bool(const grpc::ServerContextBase&)>;

  // Deadlines on `timers` (not owned; must outlive the service). Requests
  // are parsed within `wire` (rpc/wire/bounded_service.h) before any handler.
  // Without `is_worker`, anyone may change any key.
  StoreService(StoreLimits limits, Timers* timers,
               const Limits& wire = DefaultLimits(), IsWorker is_worker = {});
  // Stop().
  ~StoreService() override;

  // Ends every wait (UNAVAILABLE); later waits end at once. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  int64_t num_keys() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t num_waits() const ABSL_LOCKS_EXCLUDED(mu_);

  grpc::ServerUnaryReactor* Set(grpc::CallbackServerContext* context,
                                const proto::StoreSetRequest* request,
                                proto::StoreSetResponse* response) override;
  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* context,
                                const proto::StoreGetRequest* request,
                                proto::StoreGetResponse* response) override;
  grpc::ServerUnaryReactor* Add(grpc::CallbackServerContext* context,
                                const proto::StoreAddRequest* request,
                                proto::StoreAddResponse* response) override;
  grpc::ServerUnaryReactor* CompareSet(
      grpc::CallbackServerContext* context,
      const proto::StoreCompareSetRequest* request,
      proto::StoreCompareSetResponse* response) override;
  grpc::ServerUnaryReactor* Delete(
      grpc::CallbackServerContext* context,
      const proto::StoreDeleteRequest* request,
      proto::StoreDeleteResponse* response) override;
  grpc::ServerUnaryReactor* Wait(grpc::CallbackServerContext* context,
                                 const proto::StoreWaitRequest* request,
                                 proto::StoreWaitResponse* response) override;
  grpc::ServerUnaryReactor* NumKeys(
      grpc::CallbackServerContext* context,
      const proto::StoreNumKeysRequest* request,
      proto::StoreNumKeysResponse* response) override;

 private:
  // A Get or Wait for keys not all set yet.
  struct Waiter {
    std::vector<std::string> keys;
    grpc::ServerUnaryReactor* reactor = nullptr;
    std::string* value = nullptr;                 // Get: where the value goes.
    proto::StoreWaitResponse* all_set = nullptr;  // Wait's: all_set.
    Timers::TimerId timer = 0;
    int64_t wait_ms = 0;
  };
  // A finished waiter and its status, finished outside the lock.
  struct Finish {
    grpc::ServerUnaryReactor* reactor;
    absl::Status status;
    Timers::TimerId timer;
  };

  absl::Status CheckKey(const std::string& key) const;
  // CheckKey, and that the caller may change `key` (kWorkersOnly).
  absl::Status CheckWrite(const grpc::ServerContextBase& call,
                          const std::string& key) const;
  absl::Status CheckValue(const std::string& value) const;
  // Stores `value` at `key` within the bounds; wakes the waiters it
  // completes into `done`.
  absl::Status PutLocked(const std::string& key, std::string value,
                         std::vector<Finish>* done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllSetLocked(const std::vector<std::string>& keys) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Completes the waiters whose keys are all set (their responses filled).
  void WakeLocked(std::vector<Finish>* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers now if the keys are set, else waits (or refuses to).
  grpc::ServerUnaryReactor* WaitFor(grpc::CallbackServerContext* context,
                                    Waiter waiter) ABSL_LOCKS_EXCLUDED(mu_);
  void Expire(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void FinishAll(std::vector<Finish> done);

  const StoreLimits limits_;
  Timers* const timers_;
  const IsWorker is_worker_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::string> data_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  uint64_t next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_STORE_SERVICE_H_
