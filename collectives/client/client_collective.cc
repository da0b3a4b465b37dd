#include "collectives/client/client_collective.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "collectives/algorithms/by_name.h"
#include "collectives/client/service.h"

namespace ferry {

namespace {

// Beyond the op's own deadline, what the workers get to report it: a rank
// that timed out first asks the others who joined (a couple of seconds).
constexpr absl::Duration kReportMargin = absl::Seconds(5);

struct Parsed {
  std::vector<Value> inputs;
  Value params;
  int64_t timeout_ms = 0;
};

absl::StatusOr<Parsed> Parse(const RpcClient& client, absl::string_view op,
                             const Value& request) {
  if (by_name::Find(op) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown collective '", op,
                     "' (known: ", absl::StrJoin(by_name::Names(), ", "), ")"));
  }
  const int world = client.directory().world_size();
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(op, " request: ", why));
  };
  if (!request.is_map()) return bad("must be a JSON object with \"ranks\"");
  const Value* ranks = request.Find("ranks");
  if (ranks == nullptr || !ranks->is_list()) {
    return bad("\"ranks\" must be a list with one input per rank");
  }
  if (static_cast<int>(ranks->as_list().size()) != world) {
    return bad(absl::StrCat("\"ranks\" has ", ranks->as_list().size(),
                            " entries but the job has ", world, " workers"));
  }
  Parsed p;
  p.inputs = ranks->as_list();
  Value::Map params;
  for (const auto& [k, v] : request.as_map()) {
    if (k == "ranks") continue;
    if (k == "timeout_ms") {
      if (!v.is_int() || v.as_int() < 0 ||
          v.as_int() > kMaxCollectiveTimeoutMs) {
        return bad(absl::StrCat("\"timeout_ms\" must be an integer in [0, ",
                                kMaxCollectiveTimeoutMs, "]"));
      }
      p.timeout_ms = v.as_int();
      continue;
    }
    params[k] = v;
  }
  // With "group", only its ranks take part: the others' inputs must be null.
  if (auto group = params.find("group");
      group != params.end() && group->second.is_list()) {
    std::vector<bool> member(world, false);
    for (const Value& r : group->second.as_list()) {
      if (r.is_int() && r.as_int() >= 0 && r.as_int() < world)
        member[r.as_int()] = true;
    }
    for (int r = 0; r < world; ++r) {
      if (!member[r] && !p.inputs[r].is_null()) {
        return bad(absl::StrCat(
            "rank ", r, " is not in \"group\" but has an input (use null)"));
      }
    }
  }
  p.params = Value(std::move(params));
  return p;
}

// The op's own error without "workerN: ferry.collective: ", and whether it
// was one (rather than a failure to reach the worker).
std::pair<absl::Status, bool> Unwrap(const absl::Status& s,
                                     const std::string& worker) {
  const std::string prefix =
      absl::StrCat(worker, ": ", kCollectiveFunction, ": ");
  if (!absl::StartsWith(s.message(), prefix)) return {s, false};
  return {absl::Status(s.code(), s.message().substr(prefix.size())), true};
}

}  // namespace

absl::StatusOr<Value> RunCollectiveFromClient(RpcClient& client,
                                              absl::string_view op,
                                              const Value& request) {
  absl::StatusOr<Parsed> p = Parse(client, op, request);
  if (!p.ok()) return p.status();
  // Unpredictable, and the workers run it only for this client.
  const std::string op_id = NewClientOpId(client.node());
  absl::Duration timeout = p->timeout_ms > 0 ? absl::Milliseconds(p->timeout_ms)
                                             : client.default_timeout();
  if (timeout <= absl::ZeroDuration()) timeout = absl::Seconds(60);
  const int64_t timeout_ms = absl::ToInt64Milliseconds(timeout);
  std::vector<std::optional<Future<Value>>> calls(p->inputs.size());
  for (size_t r = 0; r < p->inputs.size(); ++r) {
    if (p->inputs[r].is_null()) continue;
    calls[r] = client.RpcAsync(client.directory().at(static_cast<int>(r)).name,
                               kCollectiveFunction,
                               {Value(std::string(op)), Value(op_id),
                                p->inputs[r], p->params, Value(timeout_ms)},
                               {.timeout = timeout + kReportMargin});
  }
  Value::List outputs(p->inputs.size());
  std::optional<absl::Status> op_error, call_error;
  for (size_t r = 0; r < calls.size(); ++r) {
    if (!calls[r]) continue;
    absl::StatusOr<Value> out = calls[r]->Wait(timeout + 2 * kReportMargin);
    if (out.ok()) {
      outputs[r] = *std::move(out);
      continue;
    }
    auto [error, from_op] =
        Unwrap(out.status(), client.directory().at(static_cast<int>(r)).name);
    std::optional<absl::Status>& slot = from_op ? op_error : call_error;
    if (!slot) slot = error;
  }
  if (op_error) return *op_error;
  if (call_error) return *call_error;
  return Value(Value::Map{{"ranks", Value(std::move(outputs))}});
}

}  // namespace ferry
