#include "tools/bench/collective_bench.h"

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/collectives.h"
#include "rpc/base/status_util.h"
#include "rpc/value/tensor_math.h"
#include "tools/bench/cpu_clock.h"
#include "tools/bench/gloo_baseline.h"
#include "tools/bench/peer_process.h"
#include "tools/bench/unobserved.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace bench {

namespace {

const char* const kOps[] = {"all_to_all_single", "all_gather", "all_reduce",
                            "reduce_scatter", "broadcast"};

// A peer program's start (importing torch, connecting W ranks) and one
// request (one timing), on a loaded 2-core host.
constexpr absl::Duration kPeerStartBound = absl::Minutes(2);
constexpr absl::Duration kPeerBound = absl::Minutes(5);

MakeOp FerryOp(LocalJob& job, const std::string& op, int64_t bytes) {
  return [&job, op, bytes](int rank) -> absl::StatusOr<OneOp> {
    ProcessGroup& world = job.worker(rank).collectives().world();
    if (op == "all_reduce") {
      FERRY_ASSIGN_OR_RETURN(
          Tensor t,
          Fill(DType::kFloat32, {std::max<int64_t>(bytes / 4, 1)}, 1.0));
      return OneOp([&world, t] { return AllReduce(world, t).status(); });
    }
    if (op == "reduce_scatter") {
      std::vector<Tensor> inputs(world.size());
      for (Tensor& t : inputs) {
        FERRY_ASSIGN_OR_RETURN(
            t, Fill(DType::kFloat32, {ReduceScatterChunk(bytes, world.size())},
                    1.0));
      }
      return OneOp(
          [&world, inputs] { return ReduceScatter(world, inputs).status(); });
    }
    FERRY_ASSIGN_OR_RETURN(Tensor t, Fill(DType::kUInt8, {bytes}, 1.0));
    if (op == "all_gather")
      return OneOp([&world, t] { return AllGather(world, t).status(); });
    if (op == "all_to_all_single") {
      return OneOp([&world, t] { return AllToAllSingle(world, t).status(); });
    }
    return OneOp(
        [&world, t] { return Broadcast(world, Value(t), 0).status(); });
  };
}

// One system's time per op, and its CPU time per op (all ranks together;
// negative where the system does not say).
struct OpTime {
  absl::Duration wall;
  absl::Duration cpu = -absl::Nanoseconds(1);
};

// Times `iterations` ops of one system (all its ranks).
using TimeOps = std::function<absl::StatusOr<OpTime>(int iterations)>;

// Enough iterations for about `budget` of measuring, from one probe.
absl::StatusOr<int> Calibrate(const TimeOps& time, absl::Duration budget) {
  FERRY_ASSIGN_OR_RETURN(OpTime once, time(1));
  int64_t n = once.wall > absl::ZeroDuration() ? budget / once.wall : 200;
  return static_cast<int>(std::clamp<int64_t>(n, 3, 200));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// A peer program (tools/bench/peers/: torch's Gloo, Ray's collectives)
// timing `op` as TimeOnThreads does, in its own processes.
TimeOps PeerOps(PeerProcess& peer, const std::string& op, int64_t bytes,
                int world) {
  return [&peer, op, bytes, world](int n) -> absl::StatusOr<OpTime> {
    FERRY_ASSIGN_OR_RETURN(
        std::vector<Row> rows,
        peer.Request(absl::StrCat("time ", op, " ", bytes, " ", n),
                     kPeerBound));
    // op_time_us, then (from peers that measure it) cpu_us_per_op.
    auto is = [&](const Row& r, const char* metric) {
      return r.op == op && r.size_bytes == bytes && r.world == world &&
             r.metric == metric;
    };
    if (rows.empty() || rows.size() > 2 || !is(rows[0], "op_time_us") ||
        (rows.size() == 2 && !is(rows[1], "cpu_us_per_op"))) {
      return absl::InternalError(
          absl::StrCat(peer.name(), ": not one op_time_us row for ", op, " ",
                       bytes, " B, world ", world));
    }
    OpTime t{absl::Microseconds(rows[0].value)};
    if (rows.size() == 2) t.cpu = absl::Microseconds(rows[1].value);
    return t;
  };
}

// A peer program measuring another system's collectives in its own
// processes.
struct Peer {
  std::string system;
  std::unique_ptr<PeerProcess> process;
  bool has_op = true;  // For the op being measured.
};

struct System {
  const char* name;
  TimeOps time;
  Peer* peer = nullptr;  // Whose program measures it, if one does.
  std::vector<double> us;
  std::vector<double> cpu_us;
  int iterations = 0;
};

std::vector<System> SystemsFor(const CollectiveSuiteOptions& o, int world,
                               LocalJob& job, LocalJob* unobserved,
                               GlooGroup& gloo, std::vector<Peer>& peers,
                               const std::string& op, int64_t bytes) {
  auto on_threads = [world](MakeOp make) -> TimeOps {
    return [world, make](int n) -> absl::StatusOr<OpTime> {
      OpTime t;
      FERRY_ASSIGN_OR_RETURN(t.wall, TimeOnThreads(world, n, make, &t.cpu));
      return t;
    };
  };
  std::vector<System> systems;
  if (o.system.empty() || o.system == "ferry") {
    systems.push_back({"ferry", on_threads(FerryOp(job, op, bytes))});
  }
  if (unobserved != nullptr &&
      (o.system.empty() || o.system == "ferry_unobserved")) {
    systems.push_back(
        {"ferry_unobserved", on_threads(FerryOp(*unobserved, op, bytes))});
  }
  if (o.system.empty() || o.system == "gloo") {
    systems.push_back({"gloo", on_threads([&gloo, op, bytes](int rank) {
                         return gloo.Op(op, bytes, rank);
                       })});
  }
  for (Peer& peer : peers) {
    if (!peer.has_op) continue;
    systems.push_back(
        {peer.system.c_str(), PeerOps(*peer.process, op, bytes, world), &peer});
  }
  return systems;
}

absl::Status Failed(const absl::Status& s, const System& system,
                    const std::string& op, int64_t bytes, int world) {
  return absl::Status(
      s.code(), absl::StrCat(system.name, " ", op, " ", bytes, " B, world ",
                             world, ": ", s.message()));
}

// torch's Gloo (an error if it cannot start: --peers asked for it), and
// Ray's collectives where the peers' Python has Ray (left out, saying why,
// where it has not).
absl::StatusOr<std::vector<Peer>> StartPeers(const CollectiveSuiteOptions& o,
                                             int world) {
  std::vector<Peer> peers;
  if (o.peers == nullptr) return peers;
  const std::string w = absl::StrCat("--world=", world);
  if (o.system.empty() || o.system == "torch_gloo") {
    FERRY_ASSIGN_OR_RETURN(
        std::unique_ptr<PeerProcess> gloo,
        PeerProcess::Start(
            o.peers->Command("torch_gloo_bench.py", {"--serve", w}),
            kPeerStartBound));
    peers.push_back({"torch_gloo", std::move(gloo)});
  }
  if (o.system.empty() || o.system == "ray_collective") {
    absl::StatusOr<std::unique_ptr<PeerProcess>> ray = PeerProcess::Start(
        o.peers->Command("ray_bench.py",
                         {"--serve", "--system=ray_collective", w}),
        kPeerStartBound);
    if (ray.ok()) {
      peers.push_back({"ray_collective", *std::move(ray)});
    } else if (ray.status().code() == absl::StatusCode::kUnimplemented) {
      std::fprintf(stderr, "ferry_bench: no ray_collective rows: %s\n",
                   std::string(ray.status().message()).c_str());
    } else {
      return ray.status();
    }
  }
  return peers;
}

absl::Status RunWorld(const CollectiveSuiteOptions& o, int world,
                      Report* report) {
  LocalJob::Options job_options;
  job_options.configure = [&](WorkerConfig& w) {
    // ferryd's default, not LocalJob's 2 s for tests: a run under callgrind
    // or on a starved host must not see false deaths.
    w.heartbeat_timeout = absl::Seconds(30);
    if (o.direct_bytes > 0) w.collectives.direct_bytes = o.direct_bytes;
    if (o.split_bytes > 0) w.collectives.split_bytes = o.split_bytes;
    if (o.tree_world > 0) w.collectives.tree_world = o.tree_world;
    if (o.ring_piece_bytes >= 0) {
      w.collectives.ring_piece_bytes = o.ring_piece_bytes;
    }
  };
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<LocalJob> job,
                         LocalJob::Start(world, job_options));
  std::unique_ptr<LocalJob> unobserved;
  if (o.unobserved || o.system == "ferry_unobserved") {
    LocalJob::Options quiet = job_options;
    quiet.configure = [&](WorkerConfig& w) {
      job_options.configure(w);
      Unobserved(w);
    };
    FERRY_ASSIGN_OR_RETURN(unobserved, LocalJob::Start(world, quiet));
  }
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<GlooGroup> gloo,
                         GlooGroup::Connect(world));
  FERRY_ASSIGN_OR_RETURN(std::vector<Peer> peers, StartPeers(o, world));
  const std::vector<int64_t> sizes =
      !o.sizes.empty() ? o.sizes
      : o.quick        ? std::vector<int64_t>{8, 1 << 20}
                       : std::vector<int64_t>{8, 64 << 10, 1 << 20, 16 << 20};
  const absl::Duration budget =
      o.quick ? absl::Milliseconds(100) : absl::Milliseconds(400);
  for (const char* op : kOps) {
    if (!o.only_op.empty() && o.only_op != op) continue;
    // A peer without this op (torch 1.13's Gloo: reduce_scatter; Ray:
    // all_to_all_single) is left out of it, said once.
    for (Peer& peer : peers) peer.has_op = true;
    for (int64_t bytes : sizes) {
      std::vector<System> systems =
          SystemsFor(o, world, *job, unobserved.get(), *gloo, peers, op, bytes);
      for (auto s = systems.begin(); s != systems.end();) {
        absl::StatusOr<int> n = o.iterations > 0
                                    ? absl::StatusOr<int>(o.iterations)
                                    : Calibrate(s->time, budget);
        Peer* peer = s->peer;
        if (n.ok()) {
          (s++)->iterations = *n;
        } else if (n.status().code() == absl::StatusCode::kUnimplemented &&
                   peer != nullptr) {
          std::fprintf(stderr, "ferry_bench: no %s row for %s: %s\n", s->name,
                       op, std::string(n.status().message()).c_str());
          peer->has_op = false;
          s = systems.erase(s);
        } else {
          return Failed(n.status(), *s, op, bytes, world);
        }
      }
      // Rounds alternate the systems, so drifting machine load hits all;
      // odd rounds run them in reverse, so none always runs first or just
      // after the same other (a ferry job and its unobserved twin measured
      // 1.06-1.09x apart at 64 KiB in one order, 1.00x as two processes).
      for (int round = 0; round < o.rounds; ++round) {
        for (size_t k = 0; k < systems.size(); ++k) {
          System& s = systems[round % 2 == 0 ? k : systems.size() - 1 - k];
          absl::StatusOr<OpTime> t = s.time(s.iterations);
          if (!t.ok()) return Failed(t.status(), s, op, bytes, world);
          s.us.push_back(absl::ToDoubleMicroseconds(t->wall));
          if (t->cpu >= absl::ZeroDuration()) {
            s.cpu_us.push_back(absl::ToDoubleMicroseconds(t->cpu));
          }
        }
      }
      for (System& s : systems) {
        report->Add({"collectives", "op_time_us", s.name, op, bytes, world, 1,
                     Median(s.us)});
        if (!s.cpu_us.empty()) {
          report->Add({"collectives", "cpu_us_per_op", s.name, op, bytes, world,
                       1, Median(s.cpu_us)});
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<absl::Duration> TimeOnThreads(int world, int iterations,
                                             const MakeOp& make,
                                             absl::Duration* cpu) {
  std::vector<absl::Status> errors(world);
  std::barrier sync(world);
  absl::Time start, end;
  absl::Duration cpu_start, cpu_end;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<OneOp> op = make(r);
      absl::Status s = op.ok() ? (*op)() : op.status();
      sync.arrive_and_wait();
      if (r == 0) {
        start = absl::Now();
        cpu_start = ProcessCpuTime();
      }
      for (int i = 0; s.ok() && i < iterations; ++i) s = (*op)();
      errors[r] = s;
      // A rank that failed still arrives, so the others are not stranded
      // (their ops fail too: a collective needs everyone).
      sync.arrive_and_wait();
      if (r == 0) {
        end = absl::Now();
        cpu_end = ProcessCpuTime();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : errors) FERRY_RETURN_IF_ERROR(s);
  if (cpu != nullptr) *cpu = (cpu_end - cpu_start) / iterations;
  return (end - start) / iterations;
}

absl::Status RunCollectiveSuite(const CollectiveSuiteOptions& options,
                                Report* report) {
  const std::vector<int> worlds =
      options.worlds.empty() ? std::vector<int>{2, 4} : options.worlds;
  for (int world : worlds) {
    FERRY_RETURN_IF_ERROR(RunWorld(options, world, report));
  }
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace ferry
