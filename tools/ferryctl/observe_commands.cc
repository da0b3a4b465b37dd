#include "tools/ferryctl/observe_commands.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "collectives/recorder/flight_dumps.h"
#include "rpc/base/status_util.h"
#include "rpc/metrics.h"
#include "rpc/tracing.h"
#include "rpc/value/json.h"
#include "tools/ferryctl/analyze.h"
#include "tools/runtime/job_dir.h"

namespace ferry {
namespace ctl {

namespace {

// The function every worker's collectives register
// (collectives/op/collective_context.cc).
constexpr char kFlightRecorderFunction[] = "ferry.flight_recorder";
// And every worker's agent (rpc/agent.cc).
constexpr char kMetricsFunction[] = "ferry.metrics";
constexpr char kStacksFunction[] = "ferry.stacks";
constexpr char kTraceFunction[] = "ferry.trace";
// Python workers' own (tools/python/ferry/_rpc.py).
constexpr char kPythonStacksFunction[] = "ferry.python_stacks";
constexpr char kEventsFunction[] = "ferry.membership_events";
// How long one poll of a worker's events is held open there.
constexpr int64_t kWatchPollMs = 20000;

const Value& Field(const Value& v, const char* key) {
  static const Value* null = new Value();
  const Value* f = v.is_map() ? v.Find(key) : nullptr;
  return f != nullptr ? *f : *null;
}

std::string Text(const Value& v, const char* key) {
  const Value& f = Field(v, key);
  return f.is_string() ? f.as_string() : "";
}

const Value::List& List(const Value& v, const char* key) {
  static const Value::List* empty = new Value::List();
  const Value& f = Field(v, key);
  return f.is_list() ? f.as_list() : *empty;
}

// `spans` as a forest: a span whose parent is not among them is a root;
// siblings by start time.
Value SpanTree(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.start < b.start; });
  std::map<uint64_t, std::vector<size_t>> children;
  absl::flat_hash_set<uint64_t> ids;
  for (const Span& s : spans) ids.insert(s.context.span_id);
  std::vector<size_t> roots;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (ids.contains(spans[i].parent_span_id)) {
      children[spans[i].parent_span_id].push_back(i);
    } else {
      roots.push_back(i);
    }
  }
  // Depth-first, bounded by the number of spans (ids are unique).
  std::function<Value(size_t, size_t)> node = [&](size_t i, size_t depth) {
    Value v = SpanToValue(spans[i]);
    Value::List kids;
    if (depth < spans.size()) {
      for (size_t k : children[spans[i].context.span_id])
        kids.push_back(node(k, depth + 1));
    }
    v.as_map()["children"] = Value(std::move(kids));
    return v;
  };
  Value::List out;
  for (size_t r : roots) out.push_back(node(r, 0));
  return Value(std::move(out));
}

void TreeText(const Value::List& spans, int depth, std::string* out) {
  for (const Value& s : spans) {
    const Value& ns = Field(s, "duration_ns");
    absl::StrAppend(
        out, std::string(2 * depth, ' '), Text(s, "name"), " on ",
        Text(s, "worker"),
        Text(s, "peer").empty() ? "" : absl::StrCat(" for ", Text(s, "peer")),
        " ", Text(s, "status"), " ",
        absl::StrFormat("%.3f ms", ns.is_int() ? ns.as_int() / 1e6 : 0.0),
        " (span ", Text(s, "span_id"), ")\n");
    TreeText(List(s, "children"), depth + 1, out);
  }
}

std::string DefaultDumpDir(const std::string& master) {
  const std::string stamp =
      absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::UTCTimeZone());
  if (std::optional<std::string> job = jobs::FindJob(master)) {
    return absl::StrCat(*job, "/dump-", stamp);
  }
  return absl::StrCat("ferry-dump-", stamp);
}

}  // namespace

absl::StatusOr<Value> DumpCommand(Session& session, std::string out,
                                  const std::vector<std::string>& workers) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  std::vector<std::string> targets = workers;
  if (targets.empty()) targets = WorkerNames(client->rpc().directory());
  if (out.empty()) out = DefaultDumpDir(session.master());
  Value::List files, failed;
  absl::Status first;
  for (const std::string& target : targets) {
    absl::StatusOr<const WorkerInfo*> w =
        client->rpc().directory().Resolve(target);
    absl::StatusOr<Value> dump =
        w.ok() ? client->rpc().RpcSync((*w)->name, kFlightRecorderFunction, {},
                                       {.timeout = session.timeout()})
               : absl::StatusOr<Value>(w.status());
    // Named by rank: a worker's name is its own words, no path.
    absl::Status written =
        dump.ok() ? WriteDumpFile(out, (*w)->rank, *dump) : dump.status();
    if (written.ok()) {
      files.push_back(absl::StrCat(out, "/", DumpFileName((*w)->rank)));
      continue;
    }
    if (first.ok()) first = written;
    failed.push_back(
        Value(Value::Map{{"worker", target}, {"error", written.ToString()}}));
  }
  if (files.empty()) return first;
  return Value(Value::Map{{"dir", out},
                          {"files", std::move(files)},
                          {"failed", std::move(failed)}});
}

absl::StatusOr<std::string> MetricsCommand(Session& session) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  std::vector<std::string> texts;
  std::string missing;
  absl::Status first;
  for (const WorkerInfo& w : client->rpc().directory().workers()) {
    absl::StatusOr<Value> text = client->rpc().RpcSync(
        w.name, kMetricsFunction, {},
        {.timeout = std::min(session.bound(), absl::Seconds(10))});
    if (text.ok() && text->is_string()) {
      texts.push_back(text->as_string());
      continue;
    }
    absl::Status why =
        text.ok() ? absl::InternalError("not text") : text.status();
    if (first.ok()) first = why;
    // A comment: Prometheus' text format allows them anywhere.
    absl::StrAppend(&missing, "# ", w.name,
                    " did not answer: ", StatusCodeName(why.code()), "\n");
  }
  if (texts.empty()) return first;
  return MergeExpositions(texts) + missing;
}

absl::StatusOr<Value> StacksCommand(Session& session,
                                    const std::string& worker) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  FERRY_ASSIGN_OR_RETURN(const WorkerInfo* w,
                         client->rpc().directory().Resolve(worker));
  const absl::Duration timeout = std::min(session.bound(), absl::Seconds(30));
  FERRY_ASSIGN_OR_RETURN(Value stacks,
                         client->rpc().RpcSync(w->name, kStacksFunction, {},
                                               {.timeout = timeout}));
  if (!stacks.is_map()) return absl::InternalError("ferry.stacks: not a map");
  absl::StatusOr<Value> python = client->rpc().RpcSync(
      w->name, kPythonStacksFunction, {}, {.timeout = timeout});
  if (python.ok()) {
    stacks.as_map()["python"] = *std::move(python);
  } else if (python.status().code() != absl::StatusCode::kNotFound) {
    stacks.as_map()["python_error"] = python.status().ToString();
  }
  return stacks;
}

std::string StacksText(const Value& stacks) {
  std::string out = absl::StrCat(Text(stacks, "worker"), " (pid ",
                                 ToJson(Field(stacks, "pid")), ")\n");
  for (const Value& c : List(stacks, "calls")) {
    absl::StrAppend(&out, "executing ", Text(c, "function"), " for ",
                    Text(c, "caller"), " since ",
                    ToJson(Field(c, "running_ms")), " ms\n");
  }
  for (const Value& c : List(stacks, "collectives")) {
    std::vector<std::string> names;
    for (const Value& n : List(c, "waiting_for")) {
      if (n.is_string()) names.push_back(n.as_string());
    }
    absl::StrAppend(&out, "waiting in ", Text(c, "op"), " ", Text(c, "key"),
                    " for ", absl::StrJoin(names, ", "), " since ",
                    ToJson(Field(c, "waiting_ms")), " ms\n");
  }
  for (const Value& t : List(stacks, "threads")) {
    absl::StrAppend(&out, "\nthread ", ToJson(Field(t, "tid")), " \"",
                    Text(t, "name"), "\"");
    if (!Text(t, "waiting").empty())
      absl::StrAppend(&out, " waiting: ", Text(t, "waiting"));
    absl::StrAppend(&out, "\n");
    int i = 0;
    for (const Value& f : List(t, "frames")) {
      absl::StrAppend(&out, "  #", i++, " ",
                      f.is_string() ? f.as_string() : "?", "\n");
    }
  }
  for (const Value& t : List(stacks, "python")) {
    absl::StrAppend(&out, "\nPython thread \"", Text(t, "thread"), "\"\n");
    for (const Value& f : List(t, "frames")) {
      absl::StrAppend(&out, "  File \"", Text(f, "file"), "\", line ",
                      ToJson(Field(f, "line")), ", in ", Text(f, "function"),
                      "\n");
      if (!Text(f, "code").empty())
        absl::StrAppend(&out, "    ", Text(f, "code"), "\n");
    }
  }
  return out;
}

absl::StatusOr<Value> TracedCallCommand(Session& session,
                                        const std::string& worker,
                                        const std::string& fn,
                                        std::vector<Value> args,
                                        std::ostream& tree_out) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  const TraceContext root = NewTrace(/*sampled=*/true);
  absl::StatusOr<Value> result =
      client->rpc().RpcSync(worker, fn, std::move(args),
                            {.timeout = session.timeout(), .trace = root});
  // Every worker's spans of the trace: each records its own.
  std::vector<Span> spans;
  const absl::Duration timeout = std::min(session.bound(), absl::Seconds(10));
  for (const WorkerInfo& w : client->rpc().directory().workers()) {
    absl::StatusOr<Value> mine = client->rpc().RpcSync(
        w.name, kTraceFunction, {Value(root.trace_id())}, {.timeout = timeout});
    if (!mine.ok() || !mine->is_list()) continue;
    for (const Value& v : mine->as_list()) {
      absl::StatusOr<Span> span = SpanFromValue(v);
      if (span.ok()) spans.push_back(*std::move(span));
    }
  }
  Value traced(Value::Map{
      {"result", result.ok() ? *result : Value()},
      {"trace_id", root.trace_id()},
      {"spans", SpanTree(spans)},
  });
  tree_out << TraceText(traced);
  if (!result.ok()) return result.status();
  return traced;
}

std::string TraceText(const Value& traced) {
  std::string out = absl::StrCat("trace ", Text(traced, "trace_id"), "\n");
  TreeText(List(traced, "spans"), 1, &out);
  return out;
}

namespace {

// One poll of `worker`'s events above `after`, held at most `wait_ms`.
absl::StatusOr<Value> PollEvents(ClientImpl& client, const std::string& worker,
                                 int64_t after, int64_t wait_ms) {
  return client.rpc().RpcSync(
      worker, kEventsFunction, {Value(after), Value(wait_ms)},
      {.timeout = absl::Milliseconds(wait_ms) + absl::Seconds(10)});
}

// The workers to watch, in the order to try them.
std::vector<std::string> WatchOrder(ClientImpl& client,
                                    const std::string& worker) {
  if (!worker.empty()) return {worker};
  std::vector<std::string> order;
  for (const WorkerInfo& w : client.rpc().directory().workers()) {
    order.push_back(w.name);
  }
  return order;
}

}  // namespace

absl::Status WatchCommand(Session& session, const std::string& worker,
                          int64_t count, bool all, std::ostream& out,
                          std::ostream& notes) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  const std::vector<std::string> order = WatchOrder(*client, worker);
  int64_t printed = 0;
  std::string lost;  // The worker that stopped answering, if any.
  absl::Status last_error = absl::UnavailableError("no worker to watch");
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string& target = order[i];
    absl::StatusOr<const WorkerInfo*> info =
        client->rpc().directory().Resolve(target);
    if (info.ok() &&
        client->rpc().membership().DownReason(WorkerNode((*info)->rank))) {
      continue;  // Known gone.
    }
    // Where to start: its newest event (or all it kept).
    absl::StatusOr<Value> first =
        PollEvents(*client, target, std::numeric_limits<int64_t>::max(), 0);
    if (!first.ok()) {
      last_error = first.status();
      continue;
    }
    int64_t after = all ? 0
                    : Field(*first, "last").is_int()
                        ? Field(*first, "last").as_int()
                        : 0;
    std::vector<Value> backlog;
    if (!lost.empty()) {
      notes << "ferryctl watch: " << lost << " stopped answering ("
            << last_error.message() << "); watching " << target << "\n";
      // What the new one kept about the one lost.
      absl::StatusOr<Value> kept = PollEvents(*client, target, 0, 0);
      if (kept.ok() && Field(*kept, "events").is_list()) {
        for (const Value& e : Field(*kept, "events").as_list()) {
          if (Field(e, "worker").is_string() &&
              Field(e, "worker").as_string() == lost) {
            backlog.push_back(e);
          }
        }
      }
    }
    while (true) {
      for (Value& e : backlog) {
        if (e.is_map()) e.as_map()["seen_by"] = Value(target);
        out << ToJson(e) << std::endl;
        if (count > 0 && ++printed >= count) return absl::OkStatus();
      }
      absl::StatusOr<Value> got =
          PollEvents(*client, target, after, kWatchPollMs);
      if (!got.ok()) {
        last_error = got.status();
        break;
      }
      backlog.clear();
      const Value& events = Field(*got, "events");
      if (!events.is_list()) continue;
      for (const Value& e : events.as_list()) {
        backlog.push_back(e);
        if (Field(e, "seq").is_int()) {
          after = std::max(after, Field(e, "seq").as_int());
        }
      }
    }
    lost = target;
  }
  return absl::UnavailableError(absl::StrCat(
      "watch: no worker answers (the last: ", last_error.message(), ")"));
}

absl::StatusOr<std::string> AnalyzeCommand(const std::string& dir, bool json) {
  FERRY_ASSIGN_OR_RETURN(std::vector<RankDump> dumps, ReadDumps(dir));
  Value report = Analyze(dumps);
  return json ? ToJson(report) + "\n" : AnalysisText(report);
}

}  // namespace ctl
}  // namespace ferry
