#include "rref/rref_service.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

#include "rpc/auth/authenticator.h"
#include "rpc/base/clock.h"
#include "rpc/wire/grpc_status.h"
#include "rref/rref_context.h"

namespace ferry {

namespace {

// A reply that may wait in the owner table. Whoever gets to finish it
// first (the table's callback or a cancellation) does; the other does not.
// The wait id lives outside the reactor: the table may finish (and gRPC
// delete) the reactor before the id is even stored.
class ParkedReactor final : public grpc::ServerUnaryReactor {
 public:
  ParkedReactor(OwnerEndpoint* endpoint, OwnerEndpoint::WaitSlot wait)
      : endpoint_(endpoint), wait_(std::move(wait)) {}
  void OnCancel() override {
    if (endpoint_->Cancel(wait_)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
  }
  void OnDone() override { delete this; }

 private:
  OwnerEndpoint* const endpoint_;
  const OwnerEndpoint::WaitSlot wait_;
};

// Finishes `reactor` with the endpoint's answer.
OwnerEndpoint::Answer FinishWith(grpc::ServerUnaryReactor* reactor) {
  return [reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); };
}

// Answers a request at once (a refusal, or an answer that never waits).
grpc::ServerUnaryReactor* AnswerNow(grpc::CallbackServerContext* context,
                                    const absl::Status& why) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(why));
  return reactor;
}

}  // namespace

RRefService::RRefService(RRefContext* context)
    : BoundedService(ServiceOf<proto::ForkRequest>("RRefs"),
                     context->host().limits, context->host().name),
      context_(context),
      endpoint_(context) {
  Bound(&RRefService::AddFork, "AddFork");
  Bound(&RRefService::ConfirmFork, "ConfirmFork");
  Bound(&RRefService::DeleteFork, "DeleteFork");
  Bound(&RRefService::Fetch, "Fetch");
  Bound(&RRefService::RenewLease, "RenewLease");
  Bound(&RRefService::ListOwned, "ListOwned");
}

absl::StatusOr<std::optional<uint64_t>> RRefService::Caller(
    const grpc::CallbackServerContext& context) const {
  const Authenticator* auth = context_->host().authenticator;
  if (auth == nullptr) return std::optional<uint64_t>();
  return auth->CallerNode(context);
}

// Parked waits end by the caller's deadline (bounded even without one).
absl::Time RRefService::Deadline(
    const grpc::CallbackServerContext& context) const {
  const Clock& clock = *context_->clock();
  return std::min(FromWallDeadline(clock, context.deadline()),
                  clock.Now() + context_->Timeout(std::nullopt));
}

grpc::ServerUnaryReactor* RRefService::AddFork(
    grpc::CallbackServerContext* context, const proto::ForkRequest* request,
    proto::ForkResponse*) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  if (!caller.ok()) return AnswerNow(context, caller.status());
  auto wait = std::make_shared<std::atomic<OwnerTable::WaitId>>(0);
  auto* reactor = new ParkedReactor(&endpoint_, wait);
  endpoint_.AddFork(*caller, *request, Deadline(*context), wait,
                    FinishWith(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::ConfirmFork(
    grpc::CallbackServerContext* context, const proto::ForkRequest* request,
    proto::ForkResponse*) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  if (!caller.ok()) return AnswerNow(context, caller.status());
  auto* reactor = context->DefaultReactor();
  endpoint_.ConfirmFork(*caller, *request, FinishWith(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::DeleteFork(
    grpc::CallbackServerContext* context, const proto::ForkRequest* request,
    proto::ForkResponse*) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  if (!caller.ok()) return AnswerNow(context, caller.status());
  auto* reactor = context->DefaultReactor();
  endpoint_.DeleteFork(*caller, *request, FinishWith(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::Fetch(
    grpc::CallbackServerContext* context, const proto::ForkRequest* request,
    proto::FetchResponse* response) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  if (!caller.ok()) return AnswerNow(context, caller.status());
  auto wait = std::make_shared<std::atomic<OwnerTable::WaitId>>(0);
  auto* reactor = new ParkedReactor(&endpoint_, wait);
  endpoint_.Fetch(*caller, *request, Deadline(*context), response, wait,
                  FinishWith(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::RenewLease(
    grpc::CallbackServerContext* context, const proto::LeaseRequest* request,
    proto::LeaseResponse* response) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  if (!caller.ok()) return AnswerNow(context, caller.status());
  auto* reactor = context->DefaultReactor();
  endpoint_.RenewLease(*caller, *request, response, FinishWith(reactor));
  return reactor;
}

grpc::ServerUnaryReactor* RRefService::ListOwned(
    grpc::CallbackServerContext* context, const proto::ListOwnedRequest*,
    proto::ListOwnedResponse* response) {
  absl::StatusOr<std::optional<uint64_t>> caller = Caller(*context);
  if (!caller.ok()) return AnswerNow(context, caller.status());
  return AnswerNow(context, endpoint_.ListOwned(*caller, response));
}

}  // namespace ferry
