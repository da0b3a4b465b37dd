// ferryd: one worker of a ferry job, as a daemon.
//
//   ferryd --rank=1 --world_size=4 --master=10.0.0.1:29500
//   RANK=1 WORLD_SIZE=4 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 ferryd
//   ferryd --world_size=4 --rendezvous=etcd://10.0.0.5:2379/job1  (first
//                                                free rank, by transaction)
//
// Logs one line per lifecycle event to stderr. SIGTERM/SIGINT = graceful
// leave. Exit status 0 after a clean stop; 1 if it could not start, or if
// the job ended under it: it was fenced (declared dead by the master), or
// the master (worker0) died or left — then every pending call and op has
// failed naming the cause, and the last line says why.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rpc/auth/net_util.h"
#include "rpc/auth/security.h"
#include "rpc/base/status_util.h"
#include "rpc/base/timers.h"
#include "rpc/process_tuning.h"
#include "tools/ferryd/help.h"
#include "tools/ferryd/launch_env.h"
#include "tools/ferryd/limit_flags.h"
#include "tools/runtime/file_write.h"
#include "tools/runtime/rendezvous.h"
#include "tools/runtime/worker_impl.h"
#include "tools/version.h"

ABSL_FLAG(std::optional<std::string>, name, std::nullopt,
          "worker name (env FERRY_NAME; default worker<rank>)");
ABSL_FLAG(std::optional<int>, rank, std::nullopt,
          "rank (env FERRY_RANK, RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK); "
          "none on etcd: the first free rank");
ABSL_FLAG(std::optional<int>, world_size, std::nullopt,
          "number of workers (env FERRY_WORLD_SIZE, WORLD_SIZE, SLURM_NTASKS, "
          "OMPI_COMM_WORLD_SIZE)");
ABSL_FLAG(std::string, rendezvous, "",
          "where membership lives: etcd://HOST:PORT[,HOST:PORT...]/JOB "
          "(env FERRY_RENDEZVOUS); empty: the embedded master (--master)");
ABSL_FLAG(std::string, etcd_ca, "", "PEM CA for TLS to etcd");
ABSL_FLAG(std::string, etcd_cert, "", "PEM client certificate for etcd");
ABSL_FLAG(std::string, etcd_key, "", "PEM client key for etcd");
ABSL_FLAG(std::string, etcd_user, "", "etcd user");
ABSL_FLAG(std::string, etcd_password_file, "",
          "file whose first line is the etcd user's password");
ABSL_FLAG(std::optional<std::string>, master, std::nullopt,
          "HOST:PORT of rank 0 (env FERRY_MASTER, MASTER_ADDR:MASTER_PORT)");
ABSL_FLAG(std::string, listen, "", "HOST:PORT to listen on (port 0 = pick)");
ABSL_FLAG(int64_t, timeout_ms, 60000, "default call timeout (0 = none)");
ABSL_FLAG(int64_t, startup_timeout_ms, 60000,
          "how long to wait for every worker to join");
ABSL_FLAG(int64_t, shutdown_timeout_ms, 10000,
          "bound on each phase of a graceful shutdown");
// Why 30 s: 128 workers on 2 cores (an all_reduce over all of them keeps
// every core busy for many seconds) starve the master: with 3 s live
// workers were declared dead, and with 10 s the workers declared the live
// master dead. A death still ends pending work within half a call's
// default 60 s, and a broken connection fails the calls on it at once.
ABSL_FLAG(int64_t, heartbeat_timeout_ms, 30000,
          "declare a node dead after this long without contact: the master "
          "a silent worker or client, a worker a silent master (it then "
          "fails its pending work and exits 1)");
ABSL_FLAG(int, executor_threads, 8, "threads running registered functions");
ABSL_FLAG(int64_t, rref_lease_ms, 10000,
          "an owner drops the rrefs of a holder silent for this long");
ABSL_FLAG(int64_t, max_rrefs, 1 << 20,
          "most live rrefs a node may hold (RESOURCE_EXHAUSTED beyond)");
ABSL_FLAG(bool, local_socket, true,
          "also serve same-host peers on a unix-abstract socket");
ABSL_FLAG(bool, shared_memory, true,
          "send large calls (2 MiB or more) between same-host peers in "
          "memory files instead of the unix-abstract socket");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate (TLS)");
ABSL_FLAG(std::string, tls_key, "",
          "PEM private key (TLS; must not be readable by group or others)");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA certificate (TLS)");
ABSL_FLAG(std::string, tls_server_name, "",
          "name to expect in peers' certificates");
ABSL_FLAG(bool, tls_client_certs, true,
          "with TLS, require peers' certificates (mutual TLS); false: "
          "server-authenticated TLS, callers prove themselves by the token");
ABSL_FLAG(std::string, tls_identity, "none",
          "with mutual TLS, san: a worker's Join and calls count only over a "
          "connection whose client certificate names it (subjectAltName DNS "
          "or URI equal to its --name, e.g. worker2); none: the credential "
          "membership gave it alone");
ABSL_FLAG(std::string, token_file, "",
          "file holding the job's secret token, required on every call (must "
          "not be readable by group or others)");
ABSL_FLAG(bool, insecure, false,
          "serve plaintext on addresses other hosts reach, with no token or "
          "identity checks: only where every host is trusted");
ABSL_FLAG(bool, reflection, false, "serve gRPC's reflection service");
ABSL_FLAG(int64_t, flight_recorder_entries, 2000,
          "recent collectives and point-to-point ops the flight recorder "
          "keeps (`ferryctl dump`; 0: none)");
ABSL_FLAG(std::string, dump_dir, "",
          "where this worker writes its flight recorder dump "
          "(<dir>/worker<rank>.json) when a collective fails or times out "
          "(`ferryctl up` sets <job dir>/flight_recorder); empty: nowhere");
ABSL_FLAG(std::string, metrics_listen, "",
          "serve Prometheus metrics at http://HOST:PORT/metrics (plain HTTP, "
          "read-only; port 0 picks one, shown by `ferryctl status`); empty: "
          "not served (`ferryctl status --format=prometheus` reads them "
          "anyway)");
ABSL_FLAG(std::string, trace_file, "",
          "append every span this worker records to this file as JSON lines "
          "(and sample the traces it starts); empty: only traces sampled by "
          "their caller (`ferryctl call --trace`) are kept, in memory");
ABSL_FLAG(std::string, address_file, "",
          "write the listening address here once listening");
ABSL_FLAG(std::string, ready_file, "",
          "write {name, rank, address, pid} (JSON) here once joined");

namespace ferry {
namespace {

absl::Mutex log_mu;
std::string log_name = "ferryd";

void Log(absl::string_view event, absl::string_view detail) {
  absl::MutexLock lock(&log_mu);
  std::string line = absl::StrCat(
      absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                       absl::UTCTimeZone()),
      " ", log_name, " ", event, detail.empty() ? "" : " ", detail, "\n");
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

// The file a flag names, written whole or not at all (readers such as
// ferryctl up wait for it): errors name the flag and the OS's reason.
absl::Status WriteFlagFile(absl::string_view flag, const std::string& path,
                           const std::string& text) {
  return Annotate(WriteFile(path, text, {.mode = 0644, .atomic = true}),
                  absl::StrCat("--", flag));
}

absl::StatusOr<WorkerConfig> BuildOptions() {
  const std::string rendezvous = RendezvousUrl(absl::GetFlag(FLAGS_rendezvous));
  PlacementFlags flags{absl::GetFlag(FLAGS_name),
                       absl::GetFlag(FLAGS_rank),
                       absl::GetFlag(FLAGS_world_size),
                       absl::GetFlag(FLAGS_master),
                       /*needs_master=*/rendezvous.empty(),
                       /*rank_assignable=*/!rendezvous.empty()};
  FERRY_ASSIGN_OR_RETURN(Placement p, ResolvePlacement(flags, ProcessEnv));
  WorkerConfig o;
  o.name = p.name;
  o.rank = p.rank;
  o.world_size = p.world_size;
  o.master = p.master;
  o.listen = absl::GetFlag(FLAGS_listen);
  o.default_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  o.startup_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_startup_timeout_ms));
  o.shutdown_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_shutdown_timeout_ms));
  o.heartbeat_timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_heartbeat_timeout_ms));
  o.executor_threads = absl::GetFlag(FLAGS_executor_threads);
  FERRY_ASSIGN_OR_RETURN(
      o.membership_backend,
      BackendFactoryFor(
          {.url = rendezvous,
           .etcd_ca_file = absl::GetFlag(FLAGS_etcd_ca),
           .etcd_cert_file = absl::GetFlag(FLAGS_etcd_cert),
           .etcd_key_file = absl::GetFlag(FLAGS_etcd_key),
           .etcd_user = absl::GetFlag(FLAGS_etcd_user),
           .etcd_password_file = absl::GetFlag(FLAGS_etcd_password_file),
           .ttl = o.heartbeat_timeout,
           .connect_timeout = o.startup_timeout}));
  FERRY_ASSIGN_OR_RETURN(o.limits, LimitsFromFlags());
  // Outgoing calls obey the same message bound as incoming ones.
  o.channels.max_message_bytes = static_cast<int>(
      std::min<int64_t>(o.limits.max_message_bytes, INT32_MAX));
  o.local_socket = absl::GetFlag(FLAGS_local_socket);
  o.channels.use_shared_memory = absl::GetFlag(FLAGS_shared_memory);
  o.rref.lease = absl::Milliseconds(absl::GetFlag(FLAGS_rref_lease_ms));
  o.rref.max_live_rrefs = absl::GetFlag(FLAGS_max_rrefs);
  FERRY_ASSIGN_OR_RETURN(TlsIdentity tls_identity,
                         ParseTlsIdentity(absl::GetFlag(FLAGS_tls_identity)));
  SecurityOptions security{
      .tls_cert_file = absl::GetFlag(FLAGS_tls_cert),
      .tls_key_file = absl::GetFlag(FLAGS_tls_key),
      .tls_ca_file = absl::GetFlag(FLAGS_tls_ca),
      .tls_server_name = absl::GetFlag(FLAGS_tls_server_name),
      .tls_client_certs = absl::GetFlag(FLAGS_tls_client_certs),
      .tls_identity = tls_identity,
      .token_file = absl::GetFlag(FLAGS_token_file),
      .insecure = absl::GetFlag(FLAGS_insecure),
  };
  FERRY_ASSIGN_OR_RETURN(o.security, Security::Load(security));
  o.reflection = absl::GetFlag(FLAGS_reflection);
  o.collectives.flight_recorder_entries =
      absl::GetFlag(FLAGS_flight_recorder_entries);
  o.collectives.dump_dir = absl::GetFlag(FLAGS_dump_dir);
  o.telemetry.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.telemetry.trace_file = absl::GetFlag(FLAGS_trace_file);
  o.on_event = Log;
  Log("starting",
      absl::StrCat(
          "rank=", p.rank < 0 ? "(first free)" : absl::StrCat(p.rank),
          " world_size=", p.world_size,
          rendezvous.empty()
              ? absl::StrCat(" master=", p.master.empty() ? "(self)" : p.master)
              : absl::StrCat(" rendezvous=", rendezvous),
          " placement=", p.source, " pid=", getpid()));
  return o;
}

// SIGTERM/SIGINT are blocked in every thread and taken here, so the leave
// runs on an ordinary thread, not in a signal handler.
void WatchSignals(WorkerImpl* worker) {
  RpcAgent* agent = &worker->rpc();
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  if (sigwait(&set, &sig) != 0 || agent->stopped()) return;
  Log("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  if (agent->Status().state() != "running") {
    // Still joining: nothing to drain, and joining may wait long.
    Log("stopped", "signalled before the job was formed");
    std::_Exit(128 + sig);
  }
  agent->Leave().IgnoreError();
}

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "ferryd: %s: %s\n",
               StatusCodeName(status.code()).c_str(),
               std::string(status.message()).c_str());
  return 1;
}

// Without a rank (on etcd): takes the first free one now, so the worker is
// built for it, on timers of its own that `timers` keeps (the agent's
// backend renews the reservation's lease on them).
absl::Status TakeFirstFreeRank(WorkerConfig* o,
                               std::unique_ptr<ThreadTimers>* timers) {
  *timers = std::make_unique<ThreadTimers>();
  FERRY_ASSIGN_OR_RETURN(
      ReservedRank reserved,
      ReserveFirstFreeRank(o->membership_backend, timers->get(), o->world_size,
                           LocalHostName(), getpid(), o->startup_timeout));
  o->rank = reserved.rank;
  o->name = absl::StrCat("worker", reserved.rank);
  o->membership_backend = std::move(reserved.factory);
  o->timers = timers->get();
  Log("rank", absl::StrCat("took rank ", o->rank, " (the first free one)"));
  return absl::OkStatus();
}

int Run() {
  absl::StatusOr<WorkerConfig> options = BuildOptions();
  if (!options.ok()) return Fail(options.status());
  // Declared before the worker: it stops first, then its timers.
  std::unique_ptr<ThreadTimers> timers;
  if (options->rank < 0) {
    absl::Status taken = TakeFirstFreeRank(&*options, &timers);
    if (!taken.ok()) return Fail(taken);
  }
  log_name = options->name;
  WorkerImpl worker(*options);
  RpcAgent& agent = worker.rpc();
  absl::StatusOr<std::string> address = worker.Listen();
  if (!address.ok()) return Fail(address.status());
  if (!absl::GetFlag(FLAGS_address_file).empty()) {
    absl::Status s = WriteFlagFile("address_file",
                                   absl::GetFlag(FLAGS_address_file), *address);
    if (!s.ok()) return Fail(s);
  }
  std::thread signals(WatchSignals, &worker);
  signals.detach();  // Blocked in sigwait; ends with the process.
  absl::Status started = worker.Start();
  if (!started.ok()) return Fail(started);
  if (!absl::GetFlag(FLAGS_ready_file).empty()) {
    std::string json = absl::StrCat(
        "{\"name\":\"", agent.name(), "\",\"rank\":", agent.rank(),
        ",\"address\":\"", agent.address(), "\",\"pid\":", getpid(), "}\n");
    absl::Status s =
        WriteFlagFile("ready_file", absl::GetFlag(FLAGS_ready_file), json);
    if (!s.ok()) return Fail(s);
  }
  while (!agent.WaitStopped(absl::Seconds(1))) {
  }
  // As the agent stops timers of its own last.
  if (timers != nullptr) timers->Stop();
  if (absl::Status ended = agent.exit_status(); !ended.ok()) {
    Log("exit", ended.message());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  // Block the signals before gRPC starts threads, so only sigwait sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  constexpr char kUsage[] =
      "ferryd: one worker of a ferry job\n"
      "  ferryd --rank=R --world_size=N --master=HOST:PORT [flags]\n"
      "  (or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, SLURM_*, OMPI_* env)\n"
      "  ferryd --version   ferry's version";
  if (ferry::AsksForHelp(argc, argv)) {
    ferry::PrintHelp(std::cout, kUsage,
                     {{"tools/ferryd/main.cc", "The worker and its job"},
                      {"tools/ferryd/limit_flags.cc",
                       "Limits: what one peer, call or stream may use"}});
    return 0;
  }
  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig usage_config;  // --version: ferry's, not Abseil's.
  usage_config.version_string = [] {
    return absl::StrCat("ferryd ", ferry::FerryVersion(), "\n");
  };
  absl::SetFlagsUsageConfig(usage_config);
  absl::ParseCommandLine(argc, argv);
  ferry::TuneProcessForServing();
  ferry::ExitProcess(ferry::Run());
}
