#include "tools/ferryctl/help.h"

#include <map>

namespace ferry {
namespace ctl {

namespace {

constexpr char kGeneral[] = R"(usage: ferryctl [global flags] COMMAND [ARGS]

Drive a ferry job: start and stop local clusters, call functions, script.

commands:
  up          start a local cluster of ferryd daemons
  down        shut every worker down gracefully and wait for them to exit
  status      every worker's state (JSON)
  functions   the functions a worker offers
  call        call a function on a worker
  remote      create a value on a worker (an RRef), fetch it, release it
  rrefs       the owner tables of the workers (RRefs they hold for others)
  collective  run a collective (all_reduce, all_to_all, ...) across the workers
  run         run a script of statements
  stacks      a worker's threads and stacks, and what each of its waits is for
  dump        the workers' flight recorders (recent collectives) into files
  analyze     compare flight recorder dumps: the first op where ranks differ
  watch       membership events (deaths, replacements, revocations) as they come

global flags:
  --master=HOST:PORT   the job's rank 0 (default $FERRY_MASTER or 127.0.0.1:29500)
  --rendezvous=etcd://HOST:PORT[,HOST:PORT...]/JOB
                       find the job in etcd instead of at --master (default
                       $FERRY_RENDEZVOUS)
  --etcd_ca=F --etcd_cert=F --etcd_key=F
                       TLS to etcd: its CA, and this process's certificate and key
  --etcd_user=U --etcd_password_file=F
                       an etcd user, and the file holding its password
  --timeout_ms=N       bound on each operation (default 60000; 0 = none)
  --local=N            run the command against a fresh in-process job of N workers
  --token_file=F       the job's secret token (default: the token of the job
                       this user's `ferryctl up` started at --master; up makes
                       a fresh one in the job's private directory)
  --tls_cert=F --tls_key=F --tls_ca=F
                       mutual TLS: this process's certificate and key, and the CA
                       that signed the workers' (up: the daemons use the same);
                       only --tls_ca: check the workers' certificates, prove
                       yourself with the token
  --insecure           plaintext with no token, on any address (trusted networks)
  --tls_server_name=N  name to expect in the workers' certificates
  -h, --help           help (also: ferryctl COMMAND --help)
  --version            ferry's version ("ferryctl 0.1")

Results are JSON on stdout. Errors print "ferryctl: CODE: message" on stderr
and exit 1; usage errors exit 2.

examples:
  ferryctl up --world_size=3
  ferryctl call worker1 add '[{"dtype":"float32","data":[1,2]}, 3]'
  ferryctl status
  echo '{"ranks":[{"dtype":"int32","data":[1]},{"dtype":"int32","data":[2]}]}' |
    ferryctl collective all_reduce
  ferryctl down
  ferryctl --local=2 run demo.ferry
)";

const std::map<std::string, std::string>& Texts() {
  static const auto* texts = new std::map<std::string, std::string>{
      {"up",
       R"(usage: ferryctl up --world_size=N [--port=P] [--dir=D] [-- FERRYD FLAGS]

Starts N ferryd daemons on 127.0.0.1 (rank 0 on port P, default 29500; 0
picks a free port), waits until all joined, and prints
  {"master":"127.0.0.1:P","dir":D,"workers":[{"name","rank","address","pid"},...]}
The daemons outlive ferryctl; logs are in D (default $TMPDIR/ferry-UID-P).
Flags after -- go to every ferryd.

examples:
  ferryctl up --world_size=4
  ferryctl up --world_size=2 --port=0 -- --heartbeat_timeout_ms=1000
)"},
      {"down", R"(usage: ferryctl down

Asks every worker of the job to shut down gracefully (all agree, drain, stop)
and returns when their processes have exited (daemons that do not exit in
time are terminated, then killed). Prints {"stopped":[{name,rank,pid,how}]}
with how one of graceful, terminated, killed, already_gone (it had died
before), or remote (on another host: not waited for).

example:
  ferryctl --master=127.0.0.1:29500 down
)"},
      {"status", R"(usage: ferryctl status [--format=table|json]

Every worker's state: a table at a terminal (the default there), JSON
otherwise (the default when stdout is a pipe or a file):
  {"workers":[{name, rank, address, owned_rrefs, user_rrefs, inflight,
   collectives_inflight, heap_bytes, limits:{max_message_mb, ...}, ...}]}
"limits" holds the bounds the worker enforces, by ferryd flag name (see
`ferryd --help`); the table omits them.
An unreachable worker shows "state":"unreachable" and its "error".

examples:
  ferryctl status
  ferryctl status --format=json | jq '.workers[].owned_rrefs'
  ferryctl status --format=json | jq '.workers[0].limits'
)"},
      {"dump", R"(usage: ferryctl dump [--out=DIR] [WORKER...]

Writes each WORKER's (default: every worker's) flight recorder -- its recent
collectives and point-to-point ops, with their states and times, in torch's
flight recorder format -- to DIR/<worker>.json, one file per worker. DIR
defaults to dump-<UTC time> in the job's directory (when this user's `up`
started the job), else ferry-dump-<UTC time> here. Workers also write their
dump into their --dump_dir when an op fails or times out. Prints
  {"dir":DIR,"files":[...],"failed":[{"worker","error"}]}

examples:
  ferryctl dump --out=/tmp/dumps
  ferryctl analyze /tmp/dumps
)"},
      {"watch", R"(usage: ferryctl watch [WORKER] [--count=N] [--all]

Prints the job's membership events as WORKER sees them (default: the first
worker that answers, worker0 first), one JSON line each, until interrupted
or N lines were printed:
  {"seq":3,"event":"died","rank":2,"worker":"worker2",
   "detail":"worker2 missed heartbeats for 2000 ms","time":"...",
   "seen_by":"worker1"}
"event" is "died" or "left" (with the cause), "replaced" (a new process took
the rank), or "revoked" (with "group", and who revoked it and why). --all
prints the events the worker kept (its last 1024) first. When the watched
worker stops answering, the next live one is watched from then on, after
what it kept about the one that stopped.

examples:
  ferryctl watch
  ferryctl watch worker1 --count=2
)"},
      {"analyze", R"(usage: ferryctl analyze DIR [--format=text|json]

Reads every worker's flight recorder dump in DIR (from `ferryctl dump`, or
written by the workers when an op failed) and prints, per process group:
the first op where the ranks disagree (a different op, or input dtypes or
sizes where they must match) with the ranks on each side; ops some ranks
wait in that others never began; and the slowest rank (the last to arrive,
by wall clock). One screen of text, or JSON with --format=json.

examples:
  ferryctl analyze /tmp/dumps
  ferryctl analyze --format=json /tmp/dumps | jq '.groups[].mismatch'
)"},
      {"functions", R"(usage: ferryctl functions [WORKER]

Lists the functions WORKER (default worker0) offers, with signatures:
  {"worker":W,"functions":[{"name","signature","doc"}]}

example:
  ferryctl functions worker1
)"},
      {"call", R"(usage: ferryctl call WORKER FUNC [ARGS]
       ferryctl call --trace WORKER FUNC [ARGS]

Calls FUNC on WORKER (a name or a rank) with ARGS, a JSON array (default
[]), and prints the result as JSON. Tensors are written
{"dtype":"float32","shape":[2,2],"data":[1,2,3,4]} (shape optional for 1-D).

With --trace the call starts a sampled trace (W3C traceparent): every
worker it reaches -- through nested calls, RRef fetches, collectives --
records a span, and ferryctl prints
  {"result":R,"trace_id":T,"spans":[{name, worker, span_id, parent_span_id,
   duration_ns, status, peer, children:[...]}]}
and the span tree for people on stderr.

examples:
  ferryctl call worker1 add '[{"dtype":"float32","data":[1,1]}, 3]'
  ferryctl call 2 arange '[5]'
  ferryctl --timeout_ms=500 call worker1 sleep_ms '[2000]'   # DEADLINE_EXCEEDED
  ferryctl call --trace worker0 to_here '[...]'              # the span tree
)"},
      {"stacks", R"(usage: ferryctl stacks WORKER [--format=text|json]

Every thread of WORKER's process with its symbolized stack, and what each
ferry wait is waiting for: the calls executing there (function, caller,
how long), the collectives waiting there and for which ranks, and threads
blocked in a call or collective. A Python worker adds its Python threads'
stacks. Text at a terminal, JSON otherwise:
  {"worker","pid","threads":[{"tid","name","frames":[...],"waiting"?}],
   "calls":[{"function","caller","running_ms"}],
   "collectives":[{"group","op","key","waiting_for":[...],"waiting_ms"}],
   "python":[{"thread","frames":[{"file","line","function","code"}]}]?}

examples:
  ferryctl stacks worker2
  ferryctl stacks --format=json worker2 | jq '.collectives'
)"},
      {"remote", R"(usage: ferryctl remote WORKER FUNC [ARGS]

Runs FUNC(ARGS) on WORKER, which keeps the result as an RRef it owns; waits
for the owner's confirmation, fetches the value, releases the RRef, and
prints {"rref":ID,"owner":WORKER,"value":VALUE}.

example:
  ferryctl remote worker1 add '[{"dtype":"float32","data":[1,1]}, 3]'
)"},
      {"rrefs", R"(usage: ferryctl rrefs [WORKER]

Lists the owner table of WORKER (default: every worker): each RRef it owns,
who created it, its state, its age, and the copies (forks) that keep it:
  {"workers":[{"worker":W,"rrefs":[{"id","creator","state","age_ms",
   "forks":[{"fork","holder","holder_name","confirmed"}]}]}]}

example:
  ferryctl rrefs worker1
)"},
      {"collective",
       R"(usage: ferryctl collective OP     (the request is read from stdin)

Runs collective OP across the workers: each worker takes part with its own
input, and the outputs are gathered. The request is a JSON object:
  {"ranks": [input of rank 0, input of rank 1, ...],   one per worker
   "timeout_ms": N,                                    optional (default --timeout_ms)
   ...the op's parameters}
and the response {"ranks": [output of rank 0, ...]}. A null input means
that rank does not take part (the others then fail, naming it).

ops and their inputs (T = a tensor, {"dtype","shape"?,"data"}):
  all_to_all          input: a list of one T per rank; output: likewise
  all_to_all_single   input: T or {"input":T,"input_splits":[..],"output_splits":[..]}
                      (splits optional: even); output: T
  all_gather          input: T; output: the list of every rank's T.
                      With "axis":k, input: T or nested lists/maps of T,
                      output: the same structure concatenated along k (tf)
  all_reduce          "op": sum|prod|min|max|avg|band|bor|bxor (default sum)
  reduce_scatter      "op"; input: a list of one T per rank (or T split evenly)
  broadcast           "src": rank; output: rank src's input everywhere
  scatter             "src"; rank src's input: a list of one value per rank
  gather              "dst"; rank dst's output: every rank's input, others null
  barrier             inputs: anything but null; outputs null
  sparse_features_all_to_all
                      "id_list_features_per_rank", "id_score_list_features_per_rank",
                      "stagger"; input: {"id_list": KJT, "id_score_list": KJT}
                      with KJT = {"keys","lengths","values","weights"?}; same out
  kjt_all_to_all      "features_per_rank", "stagger"; input and output: a KJT
With "group": [ranks], only those ranks take part (the others' inputs: null).


examples:
  echo '{"ranks":[{"dtype":"int64","data":[0,1]},{"dtype":"int64","data":[2,3]}]}' |
    ferryctl collective all_to_all_single
  echo '{"ranks":[{"dtype":"float32","data":[1]},{"dtype":"float32","data":[3]}],
         "op":"avg"}' | ferryctl collective all_reduce
  echo '{"ranks":[{}, null], "timeout_ms":1000}' | ferryctl collective barrier
                                              # DEADLINE_EXCEEDED naming rank 1
)"},
      {"run", R"(usage: ferryctl run FILE     (FILE "-" reads stdin)

Runs a script, one statement per line:
  # comment
  [NAME =] call WORKER FUNC [ARGS]
  [NAME =] remote WORKER FUNC [ARGS]   binds the RRef, held until the end
  [NAME =] fetch $R                    the RRef's value (to_here)
  [NAME =] collective OP REQUEST       REQUEST as for `ferryctl collective`
  [NAME =] status
  [NAME =] functions [WORKER]
  [NAME =] rrefs [WORKER]
  [NAME =] value VALUE                 VALUE itself, e.g. to name a request
  print VALUE                          VALUE as JSON
  show VALUE                           VALUE for people: per rank, tensors
                                       as tensor([...]), KJTs as tables
  echo TEXT                            TEXT as is
  expect VALUE JSON                    fails with a diff if unequal
  sleep MS
$NAME stands for a value anywhere inside JSON (and for WORKER); $R in a
call's arguments passes the RRef itself. A JSON argument may span lines
while brackets are open. Unassigned results are printed as JSON lines.

example:
  R = remote worker1 add [{"dtype":"float32","data":[1,1]}, 3]
  X = fetch $R
  expect $X {"dtype":"float32","data":[4,4]}
  Y = call worker2 to_here [$R]
  print $Y
)"},
  };
  return *texts;
}

}  // namespace

std::string HelpText(const std::string& command) {
  if (command.empty()) return kGeneral;
  auto it = Texts().find(command);
  return it == Texts().end() ? "" : it->second;
}

}  // namespace ctl
}  // namespace ferry
