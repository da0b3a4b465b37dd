#include "tools/bench/rpc_bench.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "rpc/base/status_util.h"
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
  int64_t completed = 0, outstanding = inflight;
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

struct Variant {
  std::string system;
  std::string op;
  std::unique_ptr<EchoSystem> echo;
};

// One round of every measurement on one system, into `samples` (by row).
absl::Status Round(Variant& v, const RpcSuiteOptions& o,
                   std::map<std::string, std::vector<double>>* samples) {
  const bool quick = o.quick;
  auto wanted = [&](const char* kind) {
    return o.only.empty() || o.only == kind;
  };
  if (wanted("latency")) {
    std::vector<double> latencies;
    FERRY_RETURN_IF_ERROR(Latency(*v.echo, quick ? 300 : 2000, &latencies));
    (*samples)["latency_p50_us/1/8"].push_back(Percentile(latencies, 50));
    (*samples)["latency_p99_us/1/8"].push_back(Percentile(latencies, 99));
  }
  for (int inflight : {1, 16, 128}) {
    if (!wanted("throughput")) break;
    FERRY_ASSIGN_OR_RETURN(
        double rate,
        Throughput(*v.echo, inflight,
                   quick ? absl::Milliseconds(300) : absl::Seconds(1)));
    (*samples)[absl::StrCat("calls_per_s/", inflight, "/8")].push_back(rate);
  }
  for (size_t mib : {1, 16, 64}) {
    if (!wanted("bandwidth")) break;
    int iterations = quick ? 2 : (mib == 64 ? 3 : 8);
    FERRY_ASSIGN_OR_RETURN(double mbps,
                           Bandwidth(*v.echo, mib << 20, iterations));
    (*samples)[absl::StrCat("bandwidth_MBps/1/", mib << 20)].push_back(mbps);
  }
  return absl::OkStatus();
}

double Median(std::vector<double> v) { return Percentile(v, 50); }

}  // namespace

absl::Status RunRpcSuite(const RpcSuiteOptions& options, Report* report) {
  // Same host: ferry uses its unix-abstract socket by default ("echo");
  // "echo_tcp" forces TCP loopback, like the bare baseline's "echo".
  std::vector<Variant> variants;
  auto add = [&](const char* system, const char* op, bool ferry,
                 bool local) -> absl::Status {
    std::string name = absl::StrCat(system, "/", op);
    if (!options.variant.empty() && options.variant != name)
      return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<EchoSystem>> echo =
        ferry ? StartFerryEcho(local) : StartBareEcho(local);
    if (!echo.ok()) return echo.status();
    variants.push_back({system, op, *std::move(echo)});
    return absl::OkStatus();
  };
  FERRY_RETURN_IF_ERROR(add("grpc", "echo", false, false));
  FERRY_RETURN_IF_ERROR(add("ferry", "echo_tcp", true, false));
  FERRY_RETURN_IF_ERROR(add("grpc", "echo_uds", false, true));
  FERRY_RETURN_IF_ERROR(add("ferry", "echo", true, true));
  // Interleaved rounds, medians reported: the host's drift hits every
  // system alike instead of whichever ran during a slow spell.
  std::vector<std::map<std::string, std::vector<double>>> samples(
      variants.size());
  for (int round = 0; round < options.rounds; ++round) {
    for (size_t i = 0; i < variants.size(); ++i) {
      FERRY_RETURN_IF_ERROR(Round(variants[i], options, &samples[i]));
    }
  }
  for (size_t i = 0; i < variants.size(); ++i) {
    for (const auto& [key, values] : samples[i]) {
      std::vector<std::string> parts = absl::StrSplit(key, '/');
      Row r{"rpc", parts[0], variants[i].system, variants[i].op, 0,
            2,     0,        Median(values)};
      r.inflight = std::stoi(parts[1]);
      r.size_bytes = std::stoll(parts[2]);
      report->Add(r);
    }
  }
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace ferry
