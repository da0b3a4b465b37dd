#include "tools/bench/collective_bench.h"

#include <algorithm>
#include <barrier>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/collectives.h"
#include "rpc/base/status_util.h"
#include "rpc/value/tensor_math.h"
#include "tools/bench/gloo_baseline.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace bench {

namespace {

const char* const kOps[] = {"all_to_all_single", "all_gather", "all_reduce",
                            "broadcast"};

MakeOp FerryOp(LocalJob& job, const std::string& op, int64_t bytes) {
  return [&job, op, bytes](int rank) -> absl::StatusOr<OneOp> {
    ProcessGroup& world = job.worker(rank).collectives().world();
    if (op == "all_reduce") {
      FERRY_ASSIGN_OR_RETURN(
          Tensor t,
          Fill(DType::kFloat32, {std::max<int64_t>(bytes / 4, 1)}, 1.0));
      return OneOp([&world, t] { return AllReduce(world, t).status(); });
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

// Enough iterations for about `budget` of measuring, from one probe.
absl::StatusOr<int> Calibrate(int world, const MakeOp& make,
                              absl::Duration budget) {
  FERRY_ASSIGN_OR_RETURN(absl::Duration once, TimeOnThreads(world, 1, make));
  int64_t n = once > absl::ZeroDuration() ? budget / once : 200;
  return static_cast<int>(std::clamp<int64_t>(n, 3, 200));
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

absl::Status RunWorld(const CollectiveSuiteOptions& o, int world,
                      Report* report) {
  LocalJob::Options job_options;
  job_options.configure = [&](WorkerConfig& w) {
    if (o.direct_bytes > 0) w.collectives.direct_bytes = o.direct_bytes;
  };
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<LocalJob> job,
                         LocalJob::Start(world, job_options));
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<GlooGroup> gloo,
                         GlooGroup::Connect(world));
  const std::vector<int64_t> sizes =
      o.quick ? std::vector<int64_t>{8, 1 << 20}
              : std::vector<int64_t>{8, 64 << 10, 1 << 20, 16 << 20};
  const absl::Duration budget =
      o.quick ? absl::Milliseconds(100) : absl::Milliseconds(400);
  for (const char* op : kOps) {
    if (!o.only_op.empty() && o.only_op != op) continue;
    for (int64_t bytes : sizes) {
      struct System {
        const char* name;
        MakeOp make;
        std::vector<double> us;
        int iterations = 0;
      };
      std::vector<System> systems;
      if (o.system.empty() || o.system == "ferry") {
        systems.push_back({"ferry", FerryOp(*job, op, bytes)});
      }
      if (o.system.empty() || o.system == "gloo") {
        systems.push_back({"gloo", [&gloo, op, bytes](int rank) {
                             return gloo->Op(op, bytes, rank);
                           }});
      }
      for (System& s : systems) {
        FERRY_ASSIGN_OR_RETURN(s.iterations, Calibrate(world, s.make, budget));
      }
      // Rounds alternate the systems, so drifting machine load hits both.
      for (int round = 0; round < o.rounds; ++round) {
        for (System& s : systems) {
          absl::StatusOr<absl::Duration> t =
              TimeOnThreads(world, s.iterations, s.make);
          if (!t.ok()) {
            return absl::Status(
                t.status().code(),
                absl::StrCat(s.name, " ", op, " ", bytes, " B, world ", world,
                             ": ", t.status().message()));
          }
          s.us.push_back(absl::ToDoubleMicroseconds(*t));
        }
      }
      for (System& s : systems) {
        report->Add({"collectives", "op_time_us", s.name, op, bytes, world, 1,
                     Median(s.us)});
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<absl::Duration> TimeOnThreads(int world, int iterations,
                                             const MakeOp& make) {
  std::vector<absl::Status> errors(world);
  std::barrier sync(world);
  absl::Time start, end;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<OneOp> op = make(r);
      absl::Status s = op.ok() ? (*op)() : op.status();
      sync.arrive_and_wait();
      if (r == 0) start = absl::Now();
      for (int i = 0; s.ok() && i < iterations; ++i) s = (*op)();
      errors[r] = s;
      // A rank that failed still arrives, so the others are not stranded
      // (their ops fail too: a collective needs everyone).
      sync.arrive_and_wait();
      if (r == 0) end = absl::Now();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : errors) FERRY_RETURN_IF_ERROR(s);
  return (end - start) / iterations;
}

absl::Status RunCollectiveSuite(const CollectiveSuiteOptions& options,
                                Report* report) {
  for (int world : {2, 4})
    FERRY_RETURN_IF_ERROR(RunWorld(options, world, report));
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace ferry
