#include "rpc/heartbeat_probe.h"

#include <utility>

#include "grpcpp/client_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "rpc/base/clock.h"

namespace ferry {

namespace {
constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr absl::Duration kCheckDeadline = absl::Seconds(2);
}  // namespace

std::shared_ptr<HeartbeatProbe> HeartbeatProbe::Start(
    std::shared_ptr<grpc::Channel> master, Timers* timers,
    std::shared_ptr<Metrics> metrics) {
  auto probe = std::make_shared<HeartbeatProbe>(std::move(master), timers,
                                                std::move(metrics));
  probe->Schedule();
  return probe;
}

HeartbeatProbe::HeartbeatProbe(std::shared_ptr<grpc::Channel> master,
                               Timers* timers, std::shared_ptr<Metrics> metrics)
    : stub_(std::move(master)), timers_(timers), metrics_(std::move(metrics)) {}

void HeartbeatProbe::Schedule() {
  std::weak_ptr<HeartbeatProbe> weak = weak_from_this();
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  timer_ = timers_->RunAfter(kPeriod, [weak] {
    if (auto p = weak.lock()) p->Check();
  });
}

void HeartbeatProbe::Check() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
  }
  struct Pending {
    grpc::ClientContext context;
    grpc::ByteBuffer request, response;
  };
  auto pending = std::make_shared<Pending>();
  pending->context.set_deadline(WallDeadlineIn(kCheckDeadline));
  // An empty HealthCheckRequest (the server's overall health): no bytes.
  grpc::Slice empty;
  pending->request = grpc::ByteBuffer(&empty, 1);
  // Round trips are measured on the monotonic clock, not the timers'
  // (which tests may step by hand).
  const absl::Time sent = Clock::Real()->Now();
  stub_.UnaryCall(&pending->context, kHealthCheck, grpc::StubOptions(),
                  &pending->request, &pending->response,
                  [self = shared_from_this(), pending, sent](grpc::Status s) {
                    self->Answered(sent, s.ok());
                  });
}

void HeartbeatProbe::Answered(absl::Time sent, bool ok) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
  }
  if (ok) metrics_->HeartbeatRoundTrip(Clock::Real()->Now() - sent);
  Schedule();
}

void HeartbeatProbe::Stop() {
  Timers::TimerId timer;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    timer = timer_;
  }
  if (timer != 0) timers_->Cancel(timer);
}

}  // namespace ferry
