// StoreService: the key-value store a job's embedded master (rank 0)
// serves (proto/store.proto), what torch.distributed calls a Store: torch
// programs rendezvous on a ferry job through it (ferry.store,
// init_method="ferry://MASTER"), gloo groups included.
//
// The store's logic, its bounds and what each caller may hold are
// StoreState's (store_state.h, store_budget.h); this serves it over gRPC:
// requests are parsed within `wire` (rpc/wire/bounded_service.h), each
// call is charged to the caller its credential proves (`caller_of`), and a
// waiting Get or Wait leaves the moment gRPC cancels it — its caller gave
// up, its deadline passed or its connection closed — giving back what it
// held.
//
// Who may call: anyone with the job's token (the server's authenticator,
// before the body is read).
#ifndef FERRY_RPC_MEMBERSHIP_STORE_SERVICE_H_
#define FERRY_RPC_MEMBERSHIP_STORE_SERVICE_H_

#include <cstdint>
#include <functional>

#include "proto/store.grpc.pb.h"
#include "rpc/base/limits.h"
#include "rpc/base/timers.h"
#include "rpc/membership/store_budget.h"
#include "rpc/membership/store_state.h"
#include "rpc/wire/bounded_service.h"

namespace ferry {

class StoreService final
    : public BoundedService<proto::Store::CallbackService> {
 public:
  static constexpr const char* kWorkersOnly = StoreState::kWorkersOnly;
  // Who made a call (authenticated: the Authenticator's NodeOf).
  using CallerOf = std::function<StoreCaller(const grpc::ServerContextBase&)>;

  // Deadlines on `timers` (not owned; must outlive the service). Without
  // `caller_of`, every caller is one caller without a credential that may
  // change any key (a store of its own, in tests).
  StoreService(StoreLimits limits, Timers* timers,
               const Limits& wire = DefaultLimits(), CallerOf caller_of = {});

  // Ends every wait (UNAVAILABLE); later waits end at once. Idempotent.
  void Stop() { state_.Stop(); }

  const StoreState& state() const { return state_; }
  int64_t num_keys() const { return state_.num_keys(); }
  int64_t num_waits() const { return state_.num_waits(); }

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
  // Store/Wait: takes the request's keys (a held wait keeps one copy of
  // each distinct key).
  grpc::ServerUnaryReactor* TakeWait(grpc::CallbackServerContext* context,
                                     proto::StoreWaitRequest* request,
                                     proto::StoreWaitResponse* response);
  grpc::ServerUnaryReactor* NumKeys(
      grpc::CallbackServerContext* context,
      const proto::StoreNumKeysRequest* request,
      proto::StoreNumKeysResponse* response) override;

 private:
  class WaitReactor;

  StoreCaller CallerFor(const grpc::ServerContextBase& context) const;

  const CallerOf caller_of_;
  StoreState state_;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_STORE_SERVICE_H_
