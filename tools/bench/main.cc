// ferry_bench: ferry against a bare gRPC baseline built from the same
// libraries, in one run (docs/DESIGN.md "Performance"); with --peers also
// against torch's RPC (TensorPipe) and Gloo process group, when Debian's
// python3-torch is installed, and Ray's actor call and collectives where
// the Python given has Ray (the peers environment).
//
//   ferry_bench [--suite=rpc|rref|collectives|sparse|all] [--quick] [--json]
//               [--peers]
//   ferry_bench --suite=scale [--max_world=128]   # ferryd jobs, not in "all"
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "rpc/base/status_util.h"
#include "rpc/process_tuning.h"
#include "tools/bench/collective_bench.h"
#include "tools/bench/peer_setup.h"
#include "tools/bench/report.h"
#include "tools/bench/rpc_bench.h"
#include "tools/bench/rref_bench.h"
#include "tools/bench/scale_bench.h"
#include "tools/bench/sparse_bench.h"

ABSL_FLAG(std::string, suite, "all",
          "rpc, rref, collectives, sparse or all; or scale (jobs of real "
          "ferryd daemons of 2 to --max_world ranks: not part of all)");
ABSL_FLAG(int, min_world, 2, "scale suite: the smallest world size");
ABSL_FLAG(int, max_world, 128, "scale suite: the largest world size");
ABSL_FLAG(std::string, ferryctl, "",
          "scale suite: the ferryctl to start jobs with (default: the one "
          "beside ferry_bench)");
ABSL_FLAG(bool, quick, false, "a short smoke run (under a minute)");
ABSL_FLAG(bool, json, false, "JSON rows on stdout instead of a table");
ABSL_FLAG(int, rounds, 0,
          "interleaved rounds per measurement, medians reported (default 3; "
          "1 with --quick)");
ABSL_FLAG(std::string, only, "",
          "rpc suite: only latency, throughput or bandwidth; collectives "
          "suite: only this collective (e.g. all_reduce)");
ABSL_FLAG(std::string, variant, "",
          "rpc suite: only this system (grpc/echo, ferry/echo_tcp, "
          "grpc/echo_uds, ferry/echo, ferry_socket/echo, "
          "ferry_unobserved/echo), e.g. for "
          "profiling; collectives suite: ferry, ferry_unobserved or gloo; with "
          "--peers also torch_rpc/echo, "
          "torch_rpc_shm/echo, ray_actor/echo, torch_gloo, ray_collective");
ABSL_FLAG(bool, peers, false,
          "rpc and collectives suites: also measure torch.distributed.rpc "
          "(TensorPipe) and torch's Gloo backend in the same rounds, through "
          "python3 with Debian's python3-torch (tools/dev bench --peers "
          "installs it); fails at once if there is none. Ray's actor call "
          "and ray.util.collective too where that Python has Ray (the peers "
          "environment's: --python=$HOME/.cache/ferry/peers-venv/bin/python), "
          "left out saying why where it has not");
ABSL_FLAG(std::string, python, "",
          "--peers: the Python that imports torch (default: /usr/bin/python3, "
          "then python3 on PATH)");
ABSL_FLAG(std::string, peers_dir, "",
          "--peers: the directory of torch_rpc_bench.py and "
          "torch_gloo_bench.py (default: ferry_bench's runfiles)");
ABSL_FLAG(int64_t, direct_bytes, 0,
          "collectives suite: ferry's threshold between direct and ring/tree "
          "algorithms (default: the worker's), to choose it by measurement");
ABSL_FLAG(int64_t, split_bytes, 0,
          "collectives suite: the per-rank size from which ferry splits a "
          "direct all_reduce into two rounds (default: the worker's)");
ABSL_FLAG(std::vector<std::string>, sizes, {},
          "collectives suite: per-rank payload sizes in bytes, comma-separated "
          "(default: 8,65536,1048576,16777216)");
ABSL_FLAG(int, tree_world, 0,
          "collectives suite: the world size from which ferry's broadcast "
          "uses the binomial tree (default: the worker's), to choose it by "
          "measurement");
ABSL_FLAG(int, iterations, 0,
          "rpc suite: timed calls of the latency measurement (default 2000); "
          "collectives suite: ops per measurement (default: calibrated). A "
          "fixed count for instruction counts: run N and 2N under callgrind "
          "and take the difference");
ABSL_FLAG(std::vector<std::string>, worlds, {},
          "collectives suite: world sizes, comma-separated (default: 2,4)");
ABSL_FLAG(bool, unobserved, false,
          "rpc and collectives suites: also measure ferry with its flight "
          "recorder, metrics and tracing off (system ferry_unobserved), in "
          "the same interleaved rounds as ferry with them on (the default): "
          "their overhead");
ABSL_FLAG(int64_t, ring_piece_bytes, -1,
          "collectives suite: ferry's pipelined-ring piece size (0: one "
          "ring; default: the worker's), to choose it by measurement");

namespace {

int BenchMain(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "ferry_bench [--suite=rpc|rref|collectives|sparse|all] [--quick] "
      "[--json] [--peers]");
  // --help lists this binary's own flags (Abseil's default looks for a
  // file named after the binary).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "tools/bench/");
  };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  // Same process settings for ferry and the bare baseline.
  ferry::TuneProcessForServing();
  const std::string suite = absl::GetFlag(FLAGS_suite);
  const bool quick = absl::GetFlag(FLAGS_quick);
  if (suite != "all" && suite != "rpc" && suite != "rref" &&
      suite != "collectives" && suite != "sparse" && suite != "scale") {
    std::fprintf(stderr, "ferry_bench: unknown --suite=%s\n", suite.c_str());
    return 2;
  }
  const int rounds = absl::GetFlag(FLAGS_rounds) > 0
                         ? absl::GetFlag(FLAGS_rounds)
                         : (quick ? 1 : 3);
  // The peers are found first: a missing torch is said at once, not after
  // the rest has run.
  std::optional<ferry::bench::PeerSetup> peers;
  if (absl::GetFlag(FLAGS_peers)) {
    absl::StatusOr<ferry::bench::PeerSetup> found =
        ferry::bench::FindPeers({.python = absl::GetFlag(FLAGS_python),
                                 .dir = absl::GetFlag(FLAGS_peers_dir)});
    if (!found.ok()) {
      std::fprintf(stderr, "ferry_bench: --peers: %s\n",
                   std::string(found.status().message()).c_str());
      return 1;
    }
    peers = *std::move(found);
  }
  const ferry::bench::PeerSetup* peer_setup = peers ? &*peers : nullptr;
  ferry::bench::Report report(absl::GetFlag(FLAGS_json));
  absl::Status status;
  if (status.ok() && (suite == "all" || suite == "rpc")) {
    ferry::bench::RpcSuiteOptions o;
    o.quick = quick;
    o.rounds = rounds;
    o.variant = absl::GetFlag(FLAGS_variant);
    o.only = absl::GetFlag(FLAGS_only);
    o.iterations = absl::GetFlag(FLAGS_iterations);
    o.peers = peer_setup;
    o.unobserved = absl::GetFlag(FLAGS_unobserved);
    status = ferry::bench::RunRpcSuite(o, &report);
  }
  if (status.ok() && (suite == "all" || suite == "rref")) {
    status = ferry::bench::RunRRefSuite(quick, &report);
  }
  if (status.ok() && (suite == "all" || suite == "collectives")) {
    ferry::bench::CollectiveSuiteOptions o;
    o.quick = quick;
    o.rounds = rounds;
    o.direct_bytes = absl::GetFlag(FLAGS_direct_bytes);
    o.split_bytes = absl::GetFlag(FLAGS_split_bytes);
    for (const std::string& size : absl::GetFlag(FLAGS_sizes)) {
      int64_t bytes;
      if (!absl::SimpleAtoi(size, &bytes) || bytes < 1) {
        std::fprintf(stderr, "ferry_bench: --sizes: '%s' is not a size\n",
                     size.c_str());
        return 2;
      }
      o.sizes.push_back(bytes);
    }
    for (const std::string& world : absl::GetFlag(FLAGS_worlds)) {
      int w;
      if (!absl::SimpleAtoi(world, &w) || w < 1 || w > 64) {
        std::fprintf(stderr, "ferry_bench: --worlds: '%s' is not 1 to 64\n",
                     world.c_str());
        return 2;
      }
      o.worlds.push_back(w);
    }
    o.iterations = absl::GetFlag(FLAGS_iterations);
    o.tree_world = absl::GetFlag(FLAGS_tree_world);
    o.ring_piece_bytes = absl::GetFlag(FLAGS_ring_piece_bytes);
    o.only_op = absl::GetFlag(FLAGS_only);
    o.system = absl::GetFlag(FLAGS_variant);
    o.peers = peer_setup;
    o.unobserved = absl::GetFlag(FLAGS_unobserved);
    status = ferry::bench::RunCollectiveSuite(o, &report);
  }
  if (status.ok() && (suite == "all" || suite == "sparse")) {
    status = ferry::bench::RunSparseSuite(quick, rounds, &report);
  }
  if (status.ok() && suite == "scale") {
    status = ferry::bench::RunScaleSuite(
        {.quick = quick,
         .rounds = rounds,
         .min_world = absl::GetFlag(FLAGS_min_world),
         .max_world = absl::GetFlag(FLAGS_max_world),
         .ferryctl = absl::GetFlag(FLAGS_ferryctl)},
        &report);
  }
  report.Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "ferry_bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { ferry::ExitProcess(BenchMain(argc, argv)); }
