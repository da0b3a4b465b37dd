#include "collectives/client/service.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "collectives/algorithms/by_name.h"
#include "collectives/collectives.h"
#include "collectives/op/runner.h"
#include "collectives/transport/op_key.h"
#include "rpc/auth/authenticator.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"

namespace ferry {

namespace {

// Most client-driven ops running on one worker at once; beyond, new ones
// are refused (each holds its inputs and messages until it ends).
constexpr int64_t kMaxClientOps = 256;

struct ClientOp {
  std::string name;
  std::string op_id;
  Value input;
  Value params;
  absl::Duration timeout;
};

absl::StatusOr<ClientOp> ParseArgs(std::vector<Value> args) {
  if (args.size() != 5) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expects 5 arguments (op, op_id, input, params, timeout_ms), got ",
        args.size()));
  }
  if (!args[0].is_string())
    return absl::InvalidArgumentError("op must be a string");
  if (!args[1].is_string() || args[1].as_string().empty() ||
      args[1].as_string().size() > kMaxOpTagBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "op_id must be a string of 1 to ", kMaxOpTagBytes, " bytes"));
  }
  if (!args[3].is_null() && !args[3].is_map()) {
    return absl::InvalidArgumentError("params must be a map or null");
  }
  if (!args[4].is_int() || args[4].as_int() < 0 ||
      args[4].as_int() > kMaxCollectiveTimeoutMs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "timeout_ms must be an integer in [0, ", kMaxCollectiveTimeoutMs, "]"));
  }
  return ClientOp{args[0].as_string(), args[1].as_string(), std::move(args[2]),
                  std::move(args[3]), absl::Milliseconds(args[4].as_int())};
}

// The group of a client's op: the world, or params "group" (a list of
// ranks, taken out of the params) — named after its ranks and living as
// long as the op.
absl::StatusOr<std::shared_ptr<ProcessGroup>> GroupOf(
    CollectiveContext& context, Value& params) {
  Value* group = params.is_map() ? &params.as_map()["group"] : nullptr;
  if (group == nullptr || group->is_null()) {
    if (params.is_map()) params.as_map().erase("group");
    return std::shared_ptr<ProcessGroup>(std::shared_ptr<void>(),
                                         &context.world());
  }
  std::vector<int> ranks;
  if (group->is_list()) {
    for (const Value& r : group->as_list()) {
      if (!r.is_int() || r.as_int() < 0 || r.as_int() > INT32_MAX) break;
      ranks.push_back(static_cast<int>(r.as_int()));
    }
  }
  if (!group->is_list() || ranks.size() != group->as_list().size()) {
    return absl::InvalidArgumentError("\"group\" must be a list of ranks");
  }
  params.as_map().erase("group");
  return context.ClientGroup(std::move(ranks));
}

// The op's timeout: the client's, or else this worker's default, within
// --max_collective_timeout_ms. RESOURCE_EXHAUSTED if the client asked for
// more.
absl::StatusOr<absl::Duration> TimeoutOf(CollectiveContext& context,
                                         absl::Duration asked) {
  const int64_t max_ms = context.host().limits().max_collective_timeout_ms;
  const absl::Duration max = absl::Milliseconds(max_ms);
  if (asked > max) {
    return OverLimit(
        absl::StrCat(context.host().name(), ": a client's collective asks ",
                     "to wait up to ", absl::FormatDuration(asked)),
        absl::FormatDuration(max), "max_collective_timeout_ms", max_ms);
  }
  if (asked > absl::ZeroDuration()) return asked;
  const absl::Duration fallback = context.host().default_timeout();
  return fallback > absl::ZeroDuration() ? std::min(fallback, max) : max;
}

// Refuses the op here and fails it on every member at once, so the others
// need not wait for it to time out.
Future<Value> RefuseEverywhere(ProcessGroup& group, const ClientOp& op,
                               const absl::Status& why) {
  if (by_name::Find(op.name) == nullptr) {
    return RunCollectiveAsync(group, op.name, Value(), Value()).future();
  }
  return RunOpAsync<Value>(group, op.name,
                           CollectiveOptions{absl::Seconds(1), op.op_id},
                           [why](Result<Value> refused) {
                             Op& o = refused.op();
                             o.Fail(o.Error(why.code(), why.message()));
                           });
}

// The client ops running on one worker.
struct ClientOps {
  std::atomic<int64_t> running{0};
};

Future<Value> RunClientOp(CollectiveContext& context, ClientOp op,
                          const std::shared_ptr<ClientOps>& ops) {
  absl::StatusOr<std::shared_ptr<ProcessGroup>> group =
      GroupOf(context, op.params);
  if (!group.ok()) return Future<Value>::Ready(group.status());
  absl::StatusOr<absl::Duration> timeout = TimeoutOf(context, op.timeout);
  if (!timeout.ok()) return RefuseEverywhere(**group, op, timeout.status());
  if (ops->running.fetch_add(1) >= kMaxClientOps) {
    ops->running.fetch_sub(1);
    return RefuseEverywhere(**group, op,
                            absl::ResourceExhaustedError(absl::StrCat(
                                context.host().name(), " already runs ",
                                kMaxClientOps, " collectives for clients")));
  }
  CollectiveOptions options{*timeout, op.op_id};
  Future<Value> result =
      RunCollectiveAsync(**group, op.name, std::move(op.input),
                         std::move(op.params), options)
          .future();
  // Keeps the group alive until the op is over.
  result.Then([group = *group, ops](const absl::StatusOr<Value>&) {
    ops->running.fetch_sub(1);
  });
  return result;
}

}  // namespace

std::string NewClientOpId(uint64_t client) {
  return absl::StrCat(client, ".", absl::Hex(RandomU64(), absl::kZeroPad16),
                      absl::Hex(RandomU64(), absl::kZeroPad16));
}

absl::Status CheckClientOpId(absl::string_view op_id, uint64_t caller) {
  const std::string mine = absl::StrCat(caller, ".");
  if (absl::StartsWith(op_id, mine)) return absl::OkStatus();
  // Whose it is, if it names a node at all.
  uint64_t owner = 0;
  const size_t dot = op_id.find('.');
  const bool named = dot != absl::string_view::npos &&
                     absl::SimpleAtoi(op_id.substr(0, dot), &owner);
  return absl::PermissionDeniedError(absl::StrCat(
      "op_id '", op_id.substr(0, 64), "' ",
      named ? absl::StrCat("belongs to ", IdentityLabel(owner))
            : std::string("names no node"),
      ", not to the caller, ", IdentityLabel(caller),
      ": a client's op ids are its own (\"<its node>.<random>\")"));
}

absl::Status RegisterCollectiveFunctions(
    const std::shared_ptr<CollectiveContext>& context) {
  std::weak_ptr<CollectiveContext> weak = context;
  auto ops = std::make_shared<ClientOps>();
  return context->host().registry().RegisterAsync(
      kCollectiveFunction,
      [weak, ops](const CallContext& call,
                  std::vector<Value> args) -> Future<Value> {
        absl::StatusOr<ClientOp> op = ParseArgs(std::move(args));
        if (!op.ok()) return Future<Value>::Ready(op.status());
        // Before anything runs under the id: another's is refused here.
        if (absl::Status mine = CheckClientOpId(op->op_id, call.caller_node);
            !mine.ok()) {
          return Future<Value>::Ready(mine);
        }
        std::shared_ptr<CollectiveContext> c = weak.lock();
        if (c == nullptr)
          return Future<Value>::Ready(absl::UnavailableError("stopping"));
        return RunClientOp(*c, *std::move(op), ops);
      },
      "ferry.collective(op: string, op_id: string, input: value, params: map, "
      "timeout_ms: int) -> value",
      {.doc = "runs collective `op` (named op_id across the job) with this "
              "worker's input; "
              "what `ferryctl collective` calls on every worker",
       .run_inline = true});
}

}  // namespace ferry
