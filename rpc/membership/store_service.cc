#include "rpc/membership/store_service.h"

#include <atomic>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// What the call has left before its own deadline.
absl::Duration CallLeft(const grpc::CallbackServerContext& context) {
  return absl::FromChrono(context.deadline()) - absl::Now();
}

}  // namespace

// A waiting Get or Wait: gRPC's cancellation of the call (its caller gave
// up, its deadline, its connection gone) takes the wait out of the store
// at once.
class StoreService::WaitReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit WaitReactor(StoreState* state) : state_(state) {}

  // Set before the handler returns the reactor, so before gRPC can call
  // OnCancel (a reply may Finish earlier: gRPC holds that until then).
  void set_id(uint64_t id) { id_.store(id, std::memory_order_release); }

  StoreState::Reply Reply() {
    return [this](absl::Status status) { Finish(ToGrpcStatus(status)); };
  }

  void OnCancel() override {
    const uint64_t id = id_.load(std::memory_order_acquire);
    if (id != 0) state_->Cancel(id);
  }
  void OnDone() override { delete this; }

 private:
  StoreState* const state_;
  std::atomic<uint64_t> id_{0};
};

StoreService::StoreService(StoreLimits limits, Timers* timers,
                           const Limits& wire, CallerOf caller_of)
    : BoundedService(ServiceOf<proto::StoreSetRequest>("Store"), wire,
                     "worker0"),
      caller_of_(std::move(caller_of)),
      state_(std::move(limits), timers) {
  Bound(&StoreService::Set, "Set");
  Bound(&StoreService::Get, "Get");
  Bound(&StoreService::Add, "Add");
  Bound(&StoreService::CompareSet, "CompareSet");
  Bound(&StoreService::Delete, "Delete");
  Bound(&StoreService::TakeWait, "Wait");
  Bound(&StoreService::NumKeys, "NumKeys");
}

StoreCaller StoreService::CallerFor(
    const grpc::ServerContextBase& context) const {
  if (caller_of_) return caller_of_(context);
  return StoreCaller{std::nullopt, /*worker=*/true};
}

grpc::ServerUnaryReactor* StoreService::Set(
    grpc::CallbackServerContext* context, const proto::StoreSetRequest* request,
    proto::StoreSetResponse* /*response*/) {
  return Answer(context, state_.Set(CallerFor(*context), *request));
}

grpc::ServerUnaryReactor* StoreService::Add(
    grpc::CallbackServerContext* context, const proto::StoreAddRequest* request,
    proto::StoreAddResponse* response) {
  return Answer(context, state_.Add(CallerFor(*context), *request, response));
}

grpc::ServerUnaryReactor* StoreService::CompareSet(
    grpc::CallbackServerContext* context,
    const proto::StoreCompareSetRequest* request,
    proto::StoreCompareSetResponse* response) {
  return Answer(context,
                state_.CompareSet(CallerFor(*context), *request, response));
}

grpc::ServerUnaryReactor* StoreService::Delete(
    grpc::CallbackServerContext* context,
    const proto::StoreDeleteRequest* request,
    proto::StoreDeleteResponse* response) {
  return Answer(context,
                state_.Delete(CallerFor(*context), *request, response));
}

grpc::ServerUnaryReactor* StoreService::NumKeys(
    grpc::CallbackServerContext* context,
    const proto::StoreNumKeysRequest* /*request*/,
    proto::StoreNumKeysResponse* response) {
  response->set_keys(state_.num_keys());
  return Answer(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* StoreService::Get(
    grpc::CallbackServerContext* context, const proto::StoreGetRequest* request,
    proto::StoreGetResponse* response) {
  auto* reactor = new WaitReactor(&state_);
  reactor->set_id(state_.Get(CallerFor(*context), *request, response,
                             CallLeft(*context), reactor->Reply()));
  return reactor;
}

grpc::ServerUnaryReactor* StoreService::TakeWait(
    grpc::CallbackServerContext* context, proto::StoreWaitRequest* request,
    proto::StoreWaitResponse* response) {
  auto* reactor = new WaitReactor(&state_);
  reactor->set_id(state_.Wait(CallerFor(*context), std::move(*request),
                              response, CallLeft(*context), reactor->Reply()));
  return reactor;
}

}  // namespace ferry
