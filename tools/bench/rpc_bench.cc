#include "tools/bench/rpc_bench.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "rpc/status_util.h"
#include "tools/bench/echo_systems.h"

namespace ferry {
namespace bench {

namespace {

constexpr absl::Duration kCallBound = absl::Seconds(60);

// One echo, waited for; its round trip in microseconds, or an error.
absl::StatusOr<double> TimedEcho(EchoSystem& system) {
  absl::Notification done;
  bool ok = false;
  absl::Time start = absl::Now();
  system.Echo([&](bool success) {
    ok = success;
    done.Notify();
  });
  if (!done.WaitForNotificationWithTimeout(kCallBound) || !ok) {
    return absl::InternalError("an echo failed or did not return");
  }
  return absl::ToDoubleMicroseconds(absl::Now() - start);
}

absl::Status Latency(EchoSystem& system, int iterations,
                     std::vector<double>* out) {
  system.SetPayload(8);
  for (int i = 0; i < iterations / 10; ++i) {  // Warm-up.
    FERRY_RETURN_IF_ERROR(TimedEcho(system).status());
  }
  for (int i = 0; i < iterations; ++i) {
    FERRY_ASSIGN_OR_RETURN(double us, TimedEcho(system));
    out->push_back(us);
  }
  return absl::OkStatus();
}

// Closed loop: `inflight` echoes outstanding for `duration`; calls/s.
absl::StatusOr<double> Throughput(EchoSystem& system, int inflight,
                                  absl::Duration duration) {
  system.SetPayload(8);
  absl::Mutex mu;
  int64_t completed = 0, outstanding = 0;
  bool failed = false;
  const absl::Time end = absl::Now() + duration;
  std::function<void()> issue;
  issue = [&] {
    system.Echo([&](bool ok) {
      bool again;
      {
        absl::MutexLock lock(&mu);
        if (!ok) failed = true;
        ++completed;
        again = !failed && absl::Now() < end;
        if (!again) --outstanding;
      }
      if (again) issue();
    });
  };
  const absl::Time start = absl::Now();
  {
    absl::MutexLock lock(&mu);
    outstanding = inflight;
  }
  for (int i = 0; i < inflight; ++i) issue();
  absl::MutexLock lock(&mu);
  auto drained = [&]() { return outstanding == 0; };
  if (!mu.AwaitWithTimeout(absl::Condition(&drained), duration + kCallBound) ||
      failed) {
    return absl::InternalError("throughput run failed or did not drain");
  }
  return static_cast<double>(completed) /
         absl::ToDoubleSeconds(absl::Now() - start);
}

// Sequential echoes of `bytes`; payload MB (1e6 bytes) per second.
absl::StatusOr<double> Bandwidth(EchoSystem& system, size_t bytes,
                                 int iterations) {
  system.SetPayload(bytes);
  FERRY_RETURN_IF_ERROR(TimedEcho(system).status());  // Warm-up.
  absl::Time start = absl::Now();
  for (int i = 0; i < iterations; ++i) {
    FERRY_RETURN_IF_ERROR(TimedEcho(system).status());
  }
  double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return static_cast<double>(bytes) * iterations / seconds / 1e6;
}

absl::Status Measure(EchoSystem& system, const std::string& name,
                     const std::string& op, bool quick, Report* report) {
  Row base{"rpc", "", name, op, 8, 2, 1, 0};
  std::vector<double> samples;
  FERRY_RETURN_IF_ERROR(Latency(system, quick ? 300 : 3000, &samples));
  Row p50 = base, p99 = base;
  p50.metric = "latency_p50_us";
  p50.value = Percentile(samples, 50);
  p99.metric = "latency_p99_us";
  p99.value = Percentile(samples, 99);
  report->Add(p50);
  report->Add(p99);
  for (int inflight : {1, 16, 128}) {
    FERRY_ASSIGN_OR_RETURN(
        double rate,
        Throughput(system, inflight,
                   quick ? absl::Milliseconds(500) : absl::Seconds(3)));
    Row r = base;
    r.metric = "calls_per_s";
    r.inflight = inflight;
    r.value = rate;
    report->Add(r);
  }
  for (size_t mib : {1, 16, 64}) {
    int iterations = quick ? (mib == 64 ? 2 : 4) : (mib == 64 ? 6 : 16);
    FERRY_ASSIGN_OR_RETURN(double mbps,
                           Bandwidth(system, mib << 20, iterations));
    Row r = base;
    r.metric = "bandwidth_MBps";
    r.size_bytes = static_cast<int64_t>(mib << 20);
    r.value = mbps;
    report->Add(r);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunRpcSuite(bool quick, Report* report) {
  // Same host: ferry uses its unix-abstract socket by default ("echo");
  // "echo_tcp" forces TCP loopback, like the bare baseline's "echo".
  struct Variant {
    const char* system;
    const char* op;
    bool ferry;
    bool local;
  };
  for (const Variant& v : {Variant{"grpc", "echo", false, false},
                           Variant{"ferry", "echo_tcp", true, false},
                           Variant{"grpc", "echo_uds", false, true},
                           Variant{"ferry", "echo", true, true}}) {
    absl::StatusOr<std::unique_ptr<EchoSystem>> system =
        v.ferry ? StartFerryEcho(v.local) : StartBareEcho(v.local);
    if (!system.ok()) return system.status();
    FERRY_RETURN_IF_ERROR(Measure(**system, v.system, v.op, quick, report));
  }
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace ferry
