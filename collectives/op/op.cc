#include "collectives/op/op.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/op/group_state.h"
#include "rpc/base/status_util.h"
#include "rpc/metrics.h"
#include "rpc/tracing.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {

namespace {
// How long a timed-out rank asks the others whether they joined.
constexpr absl::Duration kProbe = absl::Seconds(2);
// How long an abort notice is given to reach each member.
constexpr absl::Duration kAbortDelivery = absl::Seconds(2);
// How long after its deadline an op that succeeded here waits for its last
// sends at most.
constexpr absl::Duration kFlushGrace = absl::Seconds(1);
// How long a send whose connection broke waits for membership to report
// its receiver dead, at most (never past the op's deadline).
constexpr absl::Duration kDeathReport = absl::Seconds(2);

// The op's trace: a child of the calling thread's (a function serving a
// call), else a trace of its own.
TraceContext OpTrace(CollectiveContext& context) {
  if (!context.host().tracing()) return TraceContext();
  if (CurrentTrace().valid()) return CurrentTrace().Child();
  return NewTrace(false);
}

// About the bytes of a message (its header and tensors), for the metrics.
int64_t MessageBytes(const Message& m) {
  int64_t bytes = static_cast<int64_t>(m.header.size());
  for (const Tensor& t : m.tensors) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

uint64_t RecordBegin(ProcessGroup& group, const OpSpec& spec) {
  return group.state().context().recorder().Record(
      {.group = group.name(),
       .group_ranks = group.members(),
       .group_rank = group.rank(),
       .key = spec.key,
       .op = spec.name,
       .sequence = spec.sequence,
       .inputs = spec.inputs,
       .timeout = spec.timeout});
}
}  // namespace

std::shared_ptr<Op> Op::Begin(ProcessGroup& group, const OpSpec& spec,
                              Ended ended) {
  std::shared_ptr<Op> op(new Op(group, spec, std::move(ended)));
  std::weak_ptr<Op> weak = op;
  Timers::TimerId id =
      op->context_.host().timers().RunAt(op->deadline_, [weak] {
        if (std::shared_ptr<Op> o = weak.lock()) o->OnDeadline();
      });
  absl::MutexLock lock(&op->mu_);
  op->timers_.push_back(id);
  return op;
}

Op::Op(ProcessGroup& group, const OpSpec& spec, Ended ended)
    : group_(group),
      keep_group_(group.weak_from_this().lock()),
      context_(group.state().context()),
      name_(spec.name),
      key_(spec.key),
      label_(spec.label),
      timeout_(spec.timeout),
      deadline_(context_.host().timers().clock()->Now() + spec.timeout),
      record_id_(RecordBegin(group, spec)),
      parent_span_(CurrentTrace().span_id),
      trace_(OpTrace(context_)),
      ended_(std::move(ended)) {
  context_.Began(key_, absl::StrCat(name_, " op ", label_), group.members(),
                 this);
}

Op::~Op() {
  // Every op ends through End; one dropped without (an algorithm that lost
  // its continuation) must still not leave its caller waiting, nor its
  // messages behind.
  Ended ended;
  std::vector<Timers::TimerId> timers;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kEnded) return;
    phase_ = Phase::kEnded;
    ended = std::move(ended_);
    timers.swap(timers_);
  }
  for (Timers::TimerId id : timers) context_.host().timers().Cancel(id);
  context_.mailbox().Close(key_);
  context_.Ended(key_);
  absl::Status abandoned = Error(absl::StatusCode::kInternal, "abandoned");
  context_.OpEnded(record_id_, abandoned);
  std::move(ended)(std::move(abandoned));
}

std::string Op::Who(int r) const {
  return absl::StrCat("rank ", r, " (",
                      context_.host().directory().at(group_.members()[r]).name,
                      ")");
}

absl::Status Op::Error(absl::StatusCode code, absl::string_view message) const {
  return absl::Status(code, absl::StrCat(name_, " op ", label_, ": ", message));
}

absl::Status Op::BadInput(absl::string_view message) const {
  return Error(absl::StatusCode::kInvalidArgument,
               absl::StrCat(Who(rank()), ": ", message));
}

absl::Status Op::Mismatched(int other, absl::string_view theirs) const {
  // A peer's op name is printed bounded: it came off the wire.
  return Error(
      absl::StatusCode::kInvalidArgument,
      absl::StrCat("collectives called in a different order: ", Who(other),
                   " runs ", theirs.substr(0, 64), " as op ", key_, " where ",
                   Who(rank()), " runs ", name_));
}

absl::Status Op::Malformed(int from, absl::string_view what) const {
  return Error(absl::StatusCode::kInternal,
               absl::StrCat("malformed message from ", Who(from), ": ", what));
}

// ---- Messages ----

void Op::Send(int to, int step, const Message& message) {
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kEnded) return;
  }
  Future<Done> delivered = context_.transport().Send(
      group_.members()[to], {key_, step, context_.rank()},
      ToEnvelope(message, name_), deadline_, trace_);
  if (Metrics* metrics = context_.host().metrics()) {
    metrics->Sent(group_.members()[to], Metrics::Traffic::kCollective,
                  MessageBytes(message));
  }
  {
    absl::MutexLock lock(&mu_);
    sends_.push_back({to, delivered});
  }
  delivered.Then([weak = weak_from_this(), to](const absl::StatusOr<Done>& r) {
    if (r.ok()) return;
    if (std::shared_ptr<Op> self = weak.lock())
      self->SendFailed(r.status(), to);
  });
}

void Op::SendFailed(absl::Status status, int to) {
  // Transport failures wait: a death is reported by membership (naming the
  // dead worker, on every member), a peer that is slow or gone by the
  // deadline's probe. Anything else is the receiver refusing this message
  // for good — over --max_mailbox_mb, malformed — and without this the op
  // would wait for it, here and there, until its deadline.
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
      return;
    default:
      break;
  }
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kRunning) return;  // Flushing: Flushed reports it.
  }
  absl::Status aborted = context_.mailbox().AbortStatus(key_);
  Fail(aborted.ok() ? FlushError(to, status) : aborted);
}

void Op::Expect(int from, int step, std::optional<TensorLanding> at,
                absl::AnyInvocable<void(Value) &&> arrived) {
  bool late;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kRunning) return;
    waiting_.push_back({step, from});
    // Asked for after the deadline (the algorithm was computing when it
    // passed): time out now.
    late = deadline_passed_;
    if (late) phase_ = Phase::kProbing;
  }
  // Still asked for when late: an abort meanwhile is then seen here.
  context_.mailbox()
      .Receive({key_, step, group_.members()[from]}, std::move(at))
      .Then(
          [self = shared_from_this(), from, step, arrived = std::move(arrived)](
              const absl::StatusOr<Value>& message) mutable {
            const bool running = self->Arrived(from, step, message.ok());
            // Aborted: by a member, by a death, or by this worker stopping.
            if (!message.ok()) return self->Fail(message.status());
            if (running) std::move(arrived)(*message);
          });
  if (late) Probe(from);
}

bool Op::Arrived(int from, int step, bool message) {
  bool first, running;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
      if (it->from == from && it->step == step) {
        waiting_.erase(it);
        break;
      }
    }
    first = message && !started_;
    started_ = started_ || message;
    running = phase_ == Phase::kRunning;
  }
  if (first) context_.recorder().Started(record_id_);
  return running;
}

std::vector<int> Op::WaitingFor() const {
  std::vector<int> ranks;
  absl::MutexLock lock(&mu_);
  for (const Waiting& w : waiting_) {
    if (std::find(ranks.begin(), ranks.end(), w.from) == ranks.end())
      ranks.push_back(w.from);
  }
  return ranks;
}

void Op::RecordOutputs(std::vector<TensorSummary> outputs) {
  context_.recorder().SetOutputs(record_id_, std::move(outputs));
}

void Op::Recv(int from, int step, OnMessage then,
              std::optional<TensorLanding> at) {
  Expect(from, step, std::move(at),
         [self = shared_from_this(), from,
          then = std::move(then)](Value envelope) mutable {
           absl::StatusOr<Message> m = FromEnvelope(envelope);
           if (!m.ok())
             return self->Fail(self->Malformed(from, m.status().message()));
           if (!m->op.empty() && m->op != self->name_)
             return self->Fail(self->Mismatched(from, m->op));
           if (Metrics* metrics = self->context_.host().metrics()) {
             metrics->Received(self->group_.members()[from],
                               Metrics::Traffic::kCollective, MessageBytes(*m));
           }
           std::move(then)(*std::move(m));
         });
}

namespace {

// Messages of one RecvFrom, as they come in (on any thread).
struct Gathering {
  explicit Gathering(std::vector<int> f, int n, Op::OnMessages t)
      : from(std::move(f)), then(std::move(t)), got(n), left(from.size()) {}

  const std::vector<int> from;
  Op::OnMessages then;  // Taken by the last arrival only.
  absl::Mutex mu;
  std::vector<Value> got ABSL_GUARDED_BY(mu);
  size_t left ABSL_GUARDED_BY(mu);
};

}  // namespace

void Op::RecvFrom(std::vector<int> from, int step, OnMessages then,
                  Landings at) {
  if (from.empty()) {
    std::move(then)(std::vector<Message>(size()));
    return;
  }
  auto g =
      std::make_shared<Gathering>(std::move(from), size(), std::move(then));
  for (int f : g->from) {
    std::optional<TensorLanding> landing;
    if (static_cast<size_t>(f) < at.size()) landing = std::move(at[f]);
    Expect(f, step, std::move(landing),
           [self = shared_from_this(), g, f](Value envelope) {
             std::vector<Value> got;
             {
               absl::MutexLock lock(&g->mu);
               g->got[f] = std::move(envelope);
               if (--g->left > 0) return;
               got.swap(g->got);
             }
             // All in: read them in rank order, so a malformed one fails the op
             // the same way whichever arrived first.
             std::vector<Message> messages(got.size());
             std::vector<bool> asked(got.size(), false);
             for (int r : g->from) asked[r] = true;
             for (int r = 0; r < static_cast<int>(got.size()); ++r) {
               if (!asked[r]) continue;
               absl::StatusOr<Message> m = FromEnvelope(got[r]);
               if (!m.ok())
                 return self->Fail(self->Malformed(r, m.status().message()));
               if (!m->op.empty() && m->op != self->name_)
                 return self->Fail(self->Mismatched(r, m->op));
               if (Metrics* metrics = self->context_.host().metrics()) {
                 metrics->Received(self->group_.members()[r],
                                   Metrics::Traffic::kCollective,
                                   MessageBytes(*m));
               }
               messages[r] = *std::move(m);
             }
             std::move(g->then)(std::move(messages));
           });
  }
}

void Op::ExchangeEach(int step, absl::FunctionRef<Message(int to)> message_for,
                      OnMessages then, Landings at) {
  const int n = size(), me = rank();
  std::vector<int> from;
  for (int k = 1; k < n; ++k) {
    Send((me + k) % n, step, message_for((me + k) % n));
    from.push_back((me - k + n) % n);
  }
  RecvFrom(
      std::move(from), step,
      [mine = message_for(me), me,
       then = std::move(then)](std::vector<Message> all) mutable {
        all[me] = std::move(mine);
        std::move(then)(std::move(all));
      },
      std::move(at));
}

void Op::ExchangeAll(int step, const Message& mine, OnMessages then,
                     Landings at) {
  ExchangeEach(
      step, [&](int) { return mine; }, std::move(then), std::move(at));
}

void Op::WhenSent(absl::AnyInvocable<void() &&> then) {
  std::vector<Sent> sends;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kRunning) return;
    sends = sends_;
  }
  if (sends.empty()) return std::move(then)();
  auto left = std::make_shared<std::atomic<size_t>>(sends.size());
  auto next = std::make_shared<absl::AnyInvocable<void() &&>>(std::move(then));
  for (const Sent& s : sends) {
    s.delivered.Then([self = shared_from_this(), left, next,
                      to = s.to](const absl::StatusOr<Done>& r) {
      if (!r.ok()) return self->Unsent(r.status(), to);
      if (left->fetch_sub(1) != 1) return;
      {
        absl::MutexLock lock(&self->mu_);
        if (self->phase_ != Phase::kRunning) return;
      }
      std::move (*next)();
    });
  }
}

void Op::Unsent(absl::Status status, int to) {
  // As a failed flush: nothing else would end an op that waits for no
  // message (its deadline only times out receives).
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kRunning) return;
    phase_ = Phase::kProbing;
  }
  absl::Status aborted = context_.mailbox().AbortStatus(key_);
  if (!aborted.ok()) return Fail(aborted);
  if (status.code() == absl::StatusCode::kDeadlineExceeded) return Probe(to);
  FailSend(to, status);
}

// ---- Ending ----

void Op::Succeed() {
  std::vector<Sent> sends;
  bool late;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kRunning) return;
    phase_ = Phase::kFlushing;
    sends = sends_;
    late = deadline_passed_;  // Else OnDeadline arms the backstop.
  }
  if (sends.empty()) return End(absl::OkStatus());
  if (late) ArmFlushBackstop();
  auto left = std::make_shared<std::atomic<size_t>>(sends.size());
  for (const Sent& s : sends) {
    s.delivered.Then([self = shared_from_this(), left,
                      to = s.to](const absl::StatusOr<Done>& r) {
      if (!r.ok()) return self->Flushed(r.status(), to);
      if (left->fetch_sub(1) == 1) self->Flushed(absl::OkStatus(), -1);
    });
  }
}

void Op::ArmFlushBackstop() {
  std::weak_ptr<Op> weak = weak_from_this();
  Timers::TimerId id =
      context_.host().timers().RunAt(deadline_ + kFlushGrace, [weak] {
        if (std::shared_ptr<Op> o = weak.lock()) o->OnFlushDeadline();
      });
  absl::MutexLock lock(&mu_);
  timers_.push_back(id);
}

void Op::OnFlushDeadline() {
  int to = -1;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kFlushing) return;
    for (const Sent& s : sends_) {
      if (!s.delivered.IsReady()) {
        to = s.to;
        break;
      }
    }
  }
  if (to >= 0) Flushed(absl::DeadlineExceededError("not delivered"), to);
}

void Op::Flushed(absl::Status status, int to) {
  {
    absl::MutexLock lock(&mu_);
    if (phase_ != Phase::kFlushing) return;
    if (!status.ok()) phase_ = Phase::kProbing;  // One outcome only.
  }
  if (status.ok()) return End(absl::OkStatus());
  absl::Status aborted = context_.mailbox().AbortStatus(key_);
  if (!aborted.ok()) return Fail(aborted);
  if (status.code() == absl::StatusCode::kDeadlineExceeded) return Probe(to);
  FailSend(to, status);
}

void Op::FailSend(int to, const absl::Status& status) {
  absl::Status failure = FlushError(to, status);
  if (status.code() != absl::StatusCode::kUnavailable &&
      status.code() != absl::StatusCode::kCancelled) {
    return Fail(std::move(failure));
  }
  // A broken connection is most often the receiver's death, which the
  // sender's transport sees a moment before membership reports it. The
  // report names the death (and is what every other member sees), so the
  // op waits for it briefly before failing with the transport's words.
  auto once = std::make_shared<std::atomic<bool>>(false);
  auto settle = [self = shared_from_this(), once,
                 failure](absl::Status aborted) {
    if (once->exchange(true)) return;
    self->Fail(aborted.ok() ? failure : std::move(aborted));
  };
  const absl::Time until = std::min(
      context_.host().timers().clock()->Now() + kDeathReport, deadline_);
  Timers::TimerId id = context_.host().timers().RunAt(
      until, [settle]() mutable { settle(absl::OkStatus()); });
  {
    absl::MutexLock lock(&mu_);
    timers_.push_back(id);
  }
  context_.mailbox().WhenAborted(key_).Then(
      [settle](const absl::StatusOr<Value>& r) mutable { settle(r.status()); });
}

absl::Status Op::FlushError(int to, const absl::Status& status) const {
  // The receiver refused the message with the op's own failure (it was
  // aborted there): that is the op's status, not a transport error.
  if (absl::StartsWith(status.message(),
                       absl::StrCat(name_, " op ", label_, ": "))) {
    return status;
  }
  return Error(status.code(),
               absl::StrCat("sending to ", Who(to), ": ", status.message()));
}

void Op::OnDeadline() {
  int waited_for;
  {
    absl::MutexLock lock(&mu_);
    deadline_passed_ = true;
    if (phase_ == Phase::kFlushing) {
      waited_for = -1;
    } else if (phase_ != Phase::kRunning || waiting_.empty()) {
      // Computing between receives: its next receive times out (Expect).
      return;
    } else {
      phase_ = Phase::kProbing;
      waited_for = waiting_.front().from;
    }
  }
  // Sends carry the deadline themselves; the backstop is for one whose
  // completion never comes (a retry dropped by stopped timers).
  if (waited_for < 0) return ArmFlushBackstop();
  Probe(waited_for);
}

namespace {

// The answers of one probe, as they come in: the op each member runs
// under the key ("" if none, or no answer).
struct Asking {
  Asking(std::vector<std::string> o, int l) : ops(std::move(o)), left(l) {}
  absl::Mutex mu;
  std::vector<std::string> ops ABSL_GUARDED_BY(mu);
  int left ABSL_GUARDED_BY(mu);
};

}  // namespace

void Op::Probe(int waited_for) {
  // Ask every member, at once and briefly, which op it began under this
  // key (if any).
  const int n = size();
  std::vector<std::string> ops(n);
  ops[rank()] = name_;
  if (n == 1) return Probed(waited_for, ops);
  auto asking = std::make_shared<Asking>(std::move(ops), n - 1);
  for (int r = 0; r < n; ++r) {
    if (r == rank()) continue;
    context_.host()
        .Call(group_.members()[r], "ferry.collective_op", {Value(key_)}, kProbe)
        .Then([self = shared_from_this(), asking, r,
               waited_for](const absl::StatusOr<Value>& answer) {
          std::string op = answer.ok() && answer->is_string()
                               ? answer->as_string().substr(0, 64)
                               : "";
          std::vector<std::string> all;
          {
            absl::MutexLock lock(&asking->mu);
            asking->ops[r] = std::move(op);
            if (--asking->left > 0) return;
            all = asking->ops;
          }
          self->Probed(waited_for, all);
        });
  }
}

void Op::Probed(int waited_for, const std::vector<std::string>& ops) {
  std::vector<std::string> missing;  // "1 (worker1)"
  for (int r = 0; r < size(); ++r) {
    if (ops[r].empty()) missing.push_back(Who(r).substr(5));
  }
  for (int r = 0; r < size() && missing.empty(); ++r) {
    if (ops[r] != name_) return Fail(Mismatched(r, ops[r]));
  }
  const int64_t ms = absl::ToInt64Milliseconds(timeout_);
  if (!missing.empty()) {
    return Fail(Error(absl::StatusCode::kDeadlineExceeded,
                      absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                                   absl::StrJoin(missing, ", "),
                                   " did not join within ", ms, " ms")));
  }
  Fail(Error(absl::StatusCode::kDeadlineExceeded,
             absl::StrCat("no message from ", Who(waited_for), " within ", ms,
                          " ms (every member joined)")));
}

void Op::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kEnded) return;
  }
  // The first abort wins; if it was another member's (or a death's), its
  // status is the op's and the others have been told already.
  absl::Status first = context_.mailbox().Abort(key_, status);
  // A stopping worker does not speak for the op: the others hear of it by
  // membership, naming it as gone (not "stopping", which its own abort
  // would race in before its transport stops).
  bool tell = first == status && !context_.stopping();
  {
    absl::MutexLock lock(&mu_);
    tell = tell && !aborts_sent_;
    aborts_sent_ = aborts_sent_ || tell;
  }
  if (tell) {
    const absl::Time until =
        context_.host().timers().clock()->Now() + kAbortDelivery;
    for (int r = 0; r < size(); ++r) {
      if (r == rank()) continue;
      context_.transport().SendAbort(group_.members()[r], key_, status, until);
    }
  }
  End(first);
}

void Op::End(absl::Status status) {
  Ended ended;
  std::vector<Timers::TimerId> timers;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == Phase::kEnded) return;
    phase_ = Phase::kEnded;
    ended = std::move(ended_);
    timers.swap(timers_);
    waiting_.clear();
    sends_.clear();
  }
  for (Timers::TimerId id : timers) context_.host().timers().Cancel(id);
  // Nothing of the op may linger: a message that still arrives is refused.
  context_.mailbox().Close(key_);
  context_.Ended(key_);
  context_.OpEnded(record_id_, status);
  Account(status);
  std::move(ended)(std::move(status));
}

void Op::Account(const absl::Status& status) {
  const absl::Duration elapsed =
      context_.host().timers().clock()->Now() - (deadline_ - timeout_);
  if (Metrics* metrics = context_.host().metrics()) {
    metrics->CollectiveEnded(name_, group_.name(), status.code(), elapsed);
  }
  Tracer* tracer = context_.host().tracer();
  if (tracer != nullptr && tracer->Records(trace_)) {
    tracer->Record({.name = absl::StrCat(name_, " ", key_),
                    .context = trace_,
                    .parent_span_id = parent_span_,
                    .start = absl::Now() - elapsed,
                    .duration = elapsed,
                    .status = StatusCodeName(status.code()),
                    .kind = "internal"});
  }
}

}  // namespace ferry
