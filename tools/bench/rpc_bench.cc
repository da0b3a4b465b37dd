#include "tools/bench/rpc_bench.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "rpc/base/status_util.h"
#include "tools/bench/cpu_clock.h"
#include "tools/bench/echo_systems.h"
#include "tools/bench/peer_process.h"
#include "tools/bench/samples.h"

namespace ferry {
namespace bench {

namespace {

constexpr absl::Duration kCallBound = absl::Seconds(60);
// A peer program's start (importing torch, connecting its ranks) and one
// request (a whole measurement), on a loaded 2-core host.
constexpr absl::Duration kPeerStartBound = absl::Minutes(2);
constexpr absl::Duration kPeerBound = absl::Minutes(5);

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

struct Rate {
  double calls_per_s = 0;
  double cpu_us_per_call = 0;  // This process's CPU, both ends of the call.
};

// Closed loop: `inflight` echoes outstanding for `duration`.
absl::StatusOr<Rate> Throughput(EchoSystem& system, int inflight,
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
  const absl::Duration cpu_start = ProcessCpuTime();
  for (int i = 0; i < inflight; ++i) issue();
  absl::MutexLock lock(&mu);
  auto drained = [&]() { return outstanding == 0; };
  if (!mu.AwaitWithTimeout(absl::Condition(&drained), duration + kCallBound) ||
      failed) {
    return absl::InternalError("throughput run failed or did not drain");
  }
  const double calls = static_cast<double>(std::max<int64_t>(completed, 1));
  return Rate{calls / absl::ToDoubleSeconds(absl::Now() - start),
              absl::ToDoubleMicroseconds(ProcessCpuTime() - cpu_start) / calls};
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

// What one round measures, for ferry's variants and the peers alike.
struct Plan {
  bool latency = false;
  int latency_calls = 0;  // Timed calls (a tenth more first, as warm-up).
  std::vector<int> inflights;
  absl::Duration throughput_time;
  std::vector<std::pair<size_t, int>> echoes;  // Bytes, timed echoes.
};

Plan PlanFor(const RpcSuiteOptions& o) {
  auto wanted = [&](const char* kind) {
    return o.only.empty() || o.only == kind;
  };
  Plan p;
  p.latency = wanted("latency");
  p.latency_calls = o.iterations > 0 ? o.iterations : o.quick ? 300 : 2000;
  if (wanted("throughput")) p.inflights = {1, 16, 128};
  p.throughput_time = o.quick ? absl::Milliseconds(300) : absl::Seconds(1);
  for (size_t mib : {1, 16, 64}) {
    if (wanted("bandwidth")) {
      p.echoes.push_back({mib << 20, o.quick ? 2 : (mib == 64 ? 3 : 8)});
    }
  }
  return p;
}

struct Variant {
  std::string system;
  std::string op;
  std::unique_ptr<EchoSystem> echo;   // ferry or bare gRPC, in process; or
  std::unique_ptr<PeerProcess> peer;  // a peer program.

  Row MakeRow(const char* metric, int inflight, int64_t bytes,
              double value) const {
    return {"rpc", metric, system, op, bytes, 2, inflight, value};
  }
};

// One round of every measurement on an in-process system.
absl::Status EchoRound(Variant& v, const Plan& p, SampleSet* samples) {
  if (p.latency) {
    std::vector<double> latencies;
    FERRY_RETURN_IF_ERROR(Latency(*v.echo, p.latency_calls, &latencies));
    samples->Add(v.MakeRow("latency_p50_us", 1, 8, Percentile(latencies, 50)));
    samples->Add(v.MakeRow("latency_p99_us", 1, 8, Percentile(latencies, 99)));
  }
  for (int inflight : p.inflights) {
    FERRY_ASSIGN_OR_RETURN(Rate rate,
                           Throughput(*v.echo, inflight, p.throughput_time));
    samples->Add(v.MakeRow("calls_per_s", inflight, 8, rate.calls_per_s));
    samples->Add(
        v.MakeRow("cpu_us_per_call", inflight, 8, rate.cpu_us_per_call));
  }
  for (auto [bytes, echoes] : p.echoes) {
    FERRY_ASSIGN_OR_RETURN(double mbps, Bandwidth(*v.echo, bytes, echoes));
    samples->Add(v.MakeRow("bandwidth_MBps", 1, bytes, mbps));
  }
  return absl::OkStatus();
}

// The same round by a peer program: the plan as its requests.
absl::Status PeerRound(Variant& v, const Plan& p, SampleSet* samples) {
  std::vector<std::string> requests;
  if (p.latency) requests.push_back(absl::StrCat("latency ", p.latency_calls));
  for (int inflight : p.inflights) {
    requests.push_back(absl::StrCat("throughput ", inflight, " ",
                                    absl::ToDoubleSeconds(p.throughput_time)));
  }
  for (auto [bytes, echoes] : p.echoes) {
    requests.push_back(absl::StrCat("bandwidth ", bytes, " ", echoes));
  }
  for (const std::string& request : requests) {
    FERRY_ASSIGN_OR_RETURN(std::vector<Row> rows,
                           v.peer->Request(request, kPeerBound));
    for (const Row& row : rows) {
      if (row.suite != "rpc" || row.system != v.system || row.op != v.op) {
        return absl::InternalError(absl::StrCat(
            v.peer->name(), ": a row of ", row.suite, "/", row.system, "/",
            row.op, " for ", v.system, "/", v.op));
      }
      samples->Add(row);
    }
  }
  return absl::OkStatus();
}

absl::Status Round(Variant& v, const Plan& p, SampleSet* samples) {
  return v.peer != nullptr ? PeerRound(v, p, samples)
                           : EchoRound(v, p, samples);
}

}  // namespace

absl::Status RunRpcSuite(const RpcSuiteOptions& options, Report* report) {
  // Same host: ferry uses its unix-abstract socket by default ("echo");
  // "echo_tcp" forces TCP loopback, like the bare baseline's "echo";
  // "ferry_socket" keeps large calls on the socket instead of memory files.
  std::vector<Variant> variants;
  auto wanted = [&](absl::string_view system, absl::string_view op) {
    return options.variant.empty() ||
           options.variant == absl::StrCat(system, "/", op);
  };
  auto add = [&](const char* system, const char* op, bool ferry, bool local,
                 bool observed = true,
                 bool shared_memory = true) -> absl::Status {
    if (!wanted(system, op)) return absl::OkStatus();
    absl::StatusOr<std::unique_ptr<EchoSystem>> echo =
        ferry ? StartFerryEcho(local, observed, shared_memory)
              : StartBareEcho(local);
    if (!echo.ok()) return echo.status();
    variants.push_back({system, op, *std::move(echo), nullptr});
    return absl::OkStatus();
  };
  FERRY_RETURN_IF_ERROR(add("grpc", "echo", false, false));
  FERRY_RETURN_IF_ERROR(add("ferry", "echo_tcp", true, false));
  FERRY_RETURN_IF_ERROR(add("grpc", "echo_uds", false, true));
  FERRY_RETURN_IF_ERROR(add("ferry", "echo", true, true));
  FERRY_RETURN_IF_ERROR(add("ferry_socket", "echo", true, true, true, false));
  if (options.unobserved || options.variant == "ferry_unobserved/echo") {
    FERRY_RETURN_IF_ERROR(add("ferry_unobserved", "echo", true, true, false));
  }
  for (const char* system : {"torch_rpc", "torch_rpc_shm"}) {
    if (options.peers == nullptr || !wanted(system, "echo")) continue;
    FERRY_ASSIGN_OR_RETURN(
        std::unique_ptr<PeerProcess> peer,
        PeerProcess::Start(options.peers->Command(
                               "torch_rpc_bench.py",
                               {"--serve", absl::StrCat("--system=", system)}),
                           kPeerStartBound));
    variants.push_back({system, "echo", nullptr, std::move(peer)});
  }
  // Ray's actor call, where the peers' Python has Ray (the peers
  // environment); left out, saying why, where it has not.
  if (options.peers != nullptr && wanted("ray_actor", "echo")) {
    absl::StatusOr<std::unique_ptr<PeerProcess>> ray = PeerProcess::Start(
        options.peers->Command("ray_bench.py",
                               {"--serve", "--system=ray_actor"}),
        kPeerStartBound);
    if (ray.ok()) {
      variants.push_back({"ray_actor", "echo", nullptr, *std::move(ray)});
    } else if (ray.status().code() == absl::StatusCode::kUnimplemented) {
      std::fprintf(stderr, "ferry_bench: no ray_actor rows: %s\n",
                   std::string(ray.status().message()).c_str());
    } else {
      return ray.status();
    }
  }
  // Interleaved rounds, medians reported: the host's drift hits every
  // system alike instead of whichever ran during a slow spell.
  const Plan plan = PlanFor(options);
  SampleSet samples;
  // Odd rounds run the variants in reverse: none always runs first.
  for (int round = 0; round < options.rounds; ++round) {
    for (size_t k = 0; k < variants.size(); ++k) {
      FERRY_RETURN_IF_ERROR(
          Round(variants[round % 2 == 0 ? k : variants.size() - 1 - k], plan,
                &samples));
    }
  }
  for (const Row& r : samples.Medians()) report->Add(r);
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace ferry
