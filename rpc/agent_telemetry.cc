// RpcAgent (rpc/agent.h): what the agent tells about itself. The builtins
// ferry.metrics, ferry.trace, ferry.stacks and ferry.membership_events,
// the tracer and /metrics server, the heartbeat probe, and lifecycle
// events (options.on_event).

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/agent.h"
#include "rpc/auth/net_util.h"
#include "rpc/base/status_util.h"
#include "rpc/base/traceparent.h"
#include "rpc/stacks.h"
#include "rpc/stacks_service.h"

namespace ferry {

void RpcAgent::RegisterTelemetryBuiltins() {
  metrics_->SetSources([this] { return Status(); },
                       [this](int rank) {
                         return rank < directory_.world_size()
                                    ? directory_.at(rank).name
                                    : absl::StrCat("worker", rank);
                       });
  absl::Status s = registry_.Register(
      "ferry.metrics", [this]() { return metrics_->Text(); },
      {.doc = "this worker's metrics in Prometheus' text format (what "
              "--metrics_listen serves at /metrics)"});
  (void)s;  // Fixed, valid, unique names.
  s = registry_.Register(
      "ferry.trace",
      [this](const std::string& trace_id) -> absl::StatusOr<Value> {
        auto id = ParseTraceId(trace_id);
        if (!id) {
          return absl::InvalidArgumentError(
              "trace_id: expected 32 lower-case hex digits");
        }
        Value::List spans;
        if (tracer_ != nullptr) {
          for (const Span& span : tracer_->SpansOf(id->first, id->second))
            spans.push_back(SpanToValue(span));
        }
        return Value(std::move(spans));
      },
      {.params = {"trace_id"},
       .doc = "the spans of a sampled trace this worker recorded "
              "(ferryctl call --trace)"});
  (void)s;
  // A capture interrupts every thread: off the executor, one at a time, at
  // most once a second (rpc/stacks_service.h), for clients only.
  stacks_ = std::make_unique<StacksService>(
      StacksService::Options{.capture = [this] { return StacksValue(); }});
  s = registry_.Register(
      "ferry.stacks",
      [this](const CallContext& ctx) -> Future<Value> {
        absl::Status allowed =
            authenticator_->CheckClient(ctx.caller_node, "ferry.stacks");
        if (!allowed.ok()) return Future<Value>::Ready(allowed);
        return stacks_->Get();
      },
      {.doc = "every thread's stack, what each waits for, the calls "
              "executing and the collectives waiting here (ferryctl stacks; "
              "clients only, a capture at most once a second)",
       .run_inline = true});
  (void)s;
}

Value RpcAgent::StacksValue() const {
  Value::List threads, calls, collectives;
  for (const ThreadStack& t : CaptureStacks()) {
    Value::Map m{
        {"tid", t.tid},
        {"name", t.name},
        {"captured", t.captured},
        {"frames", Value(Value::List(t.frames.begin(), t.frames.end()))}};
    if (!t.waiting.empty()) m.emplace("waiting", t.waiting);
    threads.push_back(Value(std::move(m)));
  }
  if (call_service_ != nullptr) {
    for (const CallService::Executing& c : call_service_->executing()) {
      calls.push_back(Value(
          Value::Map{{"function", c.function},
                     {"caller", c.caller},
                     {"running_ms", absl::ToInt64Milliseconds(c.running)}}));
    }
  }
  const proto::WorkerStatus status = Status();  // Outlives the loop.
  for (const proto::GroupProgress& g : status.groups()) {
    if (g.waiting().op().empty()) continue;
    const proto::WaitingIn& w = g.waiting();
    collectives.push_back(Value(Value::Map{
        {"group", g.group()},
        {"op", w.op()},
        {"key", w.key()},
        {"waiting_for",
         Value(Value::List(w.waiting_for().begin(), w.waiting_for().end()))},
        {"waiting_ms", w.waiting_ms()}}));
  }
  return Value(Value::Map{{"worker", options_.name},
                          {"pid", static_cast<int64_t>(getpid())},
                          {"threads", std::move(threads)},
                          {"calls", std::move(calls)},
                          {"collectives", std::move(collectives)}});
}

absl::Status RpcAgent::StartTelemetry() {
  FERRY_ASSIGN_OR_RETURN(
      tracer_, Tracer::Open({.worker = options_.name,
                             .trace_file = options_.telemetry.trace_file}));
  if (const std::string& listen = options_.telemetry.metrics_listen;
      !listen.empty()) {
    // Plain HTTP: served where plaintext gRPC would be.
    FERRY_ASSIGN_OR_RETURN(HostPort bind, ParseHostPort(listen));
    if (absl::Status s = security_->CheckServe(bind.host); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--metrics_listen=", listen,
                       " (plain HTTP, no authentication): ", s.message()));
    }
    FERRY_ASSIGN_OR_RETURN(metrics_server_,
                           MetricsServer::Start(listen, metrics_));
  }
  return absl::OkStatus();
}

void RpcAgent::StartHeartbeatProbe() {
  // The master has no heartbeat to itself; etcd's is etcd's.
  if (!embedded() || options_.rank == 0) return;
  heartbeat_probe_ = HeartbeatProbe::Start(
      channels_->ForMembership(master_address_), timers_, metrics_);
}

void RpcAgent::ReportEvent(absl::string_view event,
                           absl::string_view detail) const {
  if (options_.on_event) options_.on_event(event, detail);
}

void RpcAgent::RegisterEventsBuiltin() {
  absl::Status s = registry_.RegisterAsync(
      "ferry.membership_events",
      [this](const CallContext&, std::vector<Value> args) -> Future<Value> {
        if (args.size() != 2 || !args[0].is_int() || !args[1].is_int()) {
          return Future<Value>::Ready(absl::InvalidArgumentError(
              "ferry.membership_events(after: int, wait_ms: int)"));
        }
        // At most 30 s held: a watcher polls again.
        const int64_t wait_ms = std::clamp<int64_t>(args[1].as_int(), 0, 30000);
        return events_->Poll(args[0].as_int(), absl::Milliseconds(wait_ms))
            .Map([this](
                     const absl::StatusOr<std::vector<MembershipEvent>>& events)
                     -> absl::StatusOr<Value> {
              if (!events.ok()) return events.status();
              Value::List list;
              for (const MembershipEvent& e : *events) {
                list.push_back(EventValue(e));
              }
              return Value(Value::Map{{"events", Value(std::move(list))},
                                      {"last", events_->last()},
                                      {"worker", options_.name}});
            });
      },
      "ferry.membership_events(after: int, wait_ms: int) -> map",
      {.doc = "this worker's membership events numbered above `after` "
              "(deaths, departures, replacements, revocations), waiting up "
              "to `wait_ms` (at most 30 s) for one: what `ferryctl watch` "
              "polls",
       .run_inline = true});
  (void)s;  // A fixed, valid, unique name.
}

}  // namespace ferry
