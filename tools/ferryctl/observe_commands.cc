#include "tools/ferryctl/observe_commands.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/flight_dumps.h"
#include "rpc/base/status_util.h"
#include "rpc/metrics.h"
#include "rpc/value/json.h"
#include "tools/ferryctl/analyze.h"
#include "tools/runtime/job_dir.h"

namespace ferry {
namespace ctl {

namespace {

// The function every worker's collectives register
// (collectives/collective_context.cc).
constexpr char kFlightRecorderFunction[] = "ferry.flight_recorder";
// And every worker's agent (rpc/agent.cc).
constexpr char kMetricsFunction[] = "ferry.metrics";

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
    absl::Status written =
        dump.ok() ? WriteDumpFile(out, (*w)->name, *dump) : dump.status();
    if (written.ok()) {
      files.push_back(absl::StrCat(out, "/", (*w)->name, ".json"));
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

absl::StatusOr<std::string> AnalyzeCommand(const std::string& dir, bool json) {
  FERRY_ASSIGN_OR_RETURN(std::vector<RankDump> dumps, ReadDumps(dir));
  Value report = Analyze(dumps);
  return json ? ToJson(report) + "\n" : AnalysisText(report);
}

}  // namespace ctl
}  // namespace ferry
