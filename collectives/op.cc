#include "collectives/op.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/base/status_util.h"
#include "rpc/base/timed_wait.h"

namespace ferry {

namespace {
// How long a timed-out rank asks the others whether they joined.
constexpr absl::Duration kProbe = absl::Seconds(2);
// How long an abort notice is given to reach each member.
constexpr absl::Duration kAbortDelivery = absl::Seconds(2);
}  // namespace

Op::Op(ProcessGroup& group, std::string name, std::string key,
       std::string label, absl::Duration timeout)
    : group_(group),
      context_(group.context()),
      name_(std::move(name)),
      key_(std::move(key)),
      label_(std::move(label)),
      timeout_(timeout),
      deadline_(context_.agent().timers().clock()->Now() + timeout) {
  context_.Began(key_, absl::StrCat(name_, " op ", label_), group.members());
}

Op::~Op() {
  // Nothing of the op may linger: a message that still arrives is refused.
  context_.mailbox().Close(key_);
  context_.Ended(key_);
}

std::string Op::Who(int r) const {
  return absl::StrCat("rank ", r, " (",
                      context_.agent().directory().at(group_.global(r)).name,
                      ")");
}

absl::Status Op::Error(absl::StatusCode code, absl::string_view message) const {
  return absl::Status(code, absl::StrCat(name_, " op ", label_, ": ", message));
}

absl::Status Op::BadInput(absl::string_view message) const {
  return Error(absl::StatusCode::kInvalidArgument,
               absl::StrCat(Who(rank()), ": ", message));
}

void Op::Send(int to, int step, Value message) {
  sends_.emplace_back(to, context_.exchange().Send(
                              group_.global(to), {key_, step, context_.rank()},
                              message, deadline_));
}

absl::StatusOr<Value> Op::Recv(int from, int step) {
  Future<Value> message =
      context_.mailbox().Receive({key_, step, group_.global(from)});
  // Timed by the node's timers, so the deadline is the node's clock's.
  absl::StatusOr<Value> v =
      AwaitUntil(context_.agent().timers(), message, deadline_);
  if (v.ok()) return v;
  if (!message.IsReady()) return TimedOut(from);
  return Fail(v.status());  // Aborted: by a member, or a peer died.
}

absl::Status Op::Flush() {
  for (auto& [to, sent] : sends_) {
    absl::StatusOr<Done> r = AwaitUntil(context_.agent().timers(), sent,
                                        deadline_ + absl::Seconds(1));
    if (r.ok()) continue;
    absl::Status aborted = context_.mailbox().AbortStatus(key_);
    if (!aborted.ok()) return Fail(aborted);
    if (r.status().code() == absl::StatusCode::kDeadlineExceeded)
      return TimedOut(to);
    // The receiver refused the message with the op's own failure (it was
    // aborted there): that is the op's status, not a transport error.
    if (absl::StartsWith(r.status().message(),
                         absl::StrCat(name_, " op ", label_, ": "))) {
      return Fail(r.status());
    }
    return Fail(Error(
        r.status().code(),
        absl::StrCat("sending to ", Who(to), ": ", r.status().message())));
  }
  sends_.clear();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Value>> Op::ExchangeEach(
    int step, absl::FunctionRef<Value(int to)> message_for) {
  const int n = size();
  for (int k = 1; k < n; ++k)
    Send((rank() + k) % n, step, message_for((rank() + k) % n));
  std::vector<Value> all(n);
  all[rank()] = message_for(rank());
  for (int k = 1; k < n; ++k) {
    const int from = (rank() - k + n) % n;
    FERRY_ASSIGN_OR_RETURN(all[from], Recv(from, step));
  }
  return all;
}

absl::StatusOr<std::vector<Value>> Op::ExchangeAll(int step,
                                                   const Value& mine) {
  return ExchangeEach(step, [&](int) { return mine; });
}

absl::Status Op::TimedOut(int waited_for) {
  // Ask every member, at once and briefly, whether it began this op.
  std::vector<std::pair<int, Future<Value>>> asks;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    asks.emplace_back(
        r, context_.agent().RpcAsync(absl::StrCat(group_.global(r)),
                                     "ferry.collective_joined", {Value(key_)},
                                     {.timeout = kProbe}));
  }
  std::vector<std::string> missing;  // "1 (worker1)"
  for (auto& [r, ask] : asks) {
    absl::StatusOr<Value> joined = ask.Wait(kProbe + absl::Seconds(1));
    if (!joined.ok() || !joined->is_bool() || !joined->as_bool()) {
      missing.push_back(Who(r).substr(5));
    }
  }
  const int64_t ms = absl::ToInt64Milliseconds(timeout_);
  if (!missing.empty()) {
    return Fail(Error(absl::StatusCode::kDeadlineExceeded,
                      absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                                   absl::StrJoin(missing, ", "),
                                   " did not join within ", ms, " ms")));
  }
  return Fail(Error(absl::StatusCode::kDeadlineExceeded,
                    absl::StrCat("no message from ", Who(waited_for),
                                 " within ", ms, " ms (every member joined)")));
}

absl::Status Op::Fail(absl::Status status) {
  // The first abort wins; if it was another member's (or a death's), its
  // status is the op's and the others have been told already.
  absl::Status first = context_.mailbox().Abort(key_, status);
  if (failed_ || first != status) return first;
  // A stopping worker does not speak for the op: the others hear of it by
  // membership, naming it as gone (not "stopping", which its own abort
  // would race in before its transport stops).
  if (context_.stopping()) return status;
  failed_ = true;
  for (int r = 0; r < size(); ++r) {
    if (r == rank()) continue;
    context_.exchange().SendAbort(
        group_.global(r), key_, status,
        context_.agent().timers().clock()->Now() + kAbortDelivery);
  }
  return status;
}

}  // namespace ferry
