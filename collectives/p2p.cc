// Point-to-point over the collectives' transport: each message is an op of
// its own, keyed by its pair, tag and number (op_key.h's point-to-point
// keys, so a receiver checks a frame's sender against the key before it
// reads it), sent with Exchange and received from the Mailbox. A receive
// from one source is an op in the worker's context, so that source's
// death fails it at once; its deadline aborts it in the mailbox, which
// also refuses the message if it comes later (its sender learns so).
//
// A receive from any source asks the mailbox for the next message from
// every other rank at once; the first to come is taken, the other asks are
// withdrawn, and a message that came anyway meanwhile is kept (P2pBook)
// for the next receive of its number. It takes its tag's turn (P2pBook) so
// no receive from one source asks for the same message meanwhile.
#include "collectives/p2p.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collectives/op/collective_context.h"
#include "collectives/op/group_state.h"
#include "collectives/op/message.h"
#include "collectives/op/p2p_book.h"
#include "collectives/transport/op_key.h"
#include "rpc/base/trace_context.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {

namespace {

constexpr absl::Duration kLongest = absl::Hours(24 * 7);

absl::Duration TimeoutOf(ProcessGroup& group,
                         const CollectiveOptions& options) {
  absl::Duration t = options.timeout > absl::ZeroDuration()
                         ? options.timeout
                         : group.state().context().host().default_timeout();
  // "No timeout" and absurd ones become a week: deadlines stay finite.
  if (t <= absl::ZeroDuration() || t > kLongest) t = kLongest;
  return t;
}

std::string Who(ProcessGroup& group, int r) {
  return absl::StrCat(
      "rank ", r, " (",
      group.state().context().host().directory().at(group.members()[r]).name,
      ")");
}

std::string FromWhom(ProcessGroup& group, int src, int64_t tag) {
  return absl::StrCat("recv from ",
                      src == kAnySource ? "any rank" : Who(group, src),
                      " with tag ", tag);
}

absl::Status Named(absl::string_view what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

absl::Status CheckPeer(ProcessGroup& group, int peer, absl::string_view field,
                       bool any) {
  if (any && peer == kAnySource) return absl::OkStatus();
  if (peer < 0 || peer >= group.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", peer, " is not a rank of the group (size ",
                     group.size(), ")"));
  }
  if (peer == group.rank()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " ", peer, " is this rank itself"));
  }
  return absl::OkStatus();
}

std::string KeyFrom(ProcessGroup& group, int src, int64_t tag, bool take) {
  const int me = group.members()[group.rank()], from = group.members()[src];
  const uint64_t epoch = group.state().context().Epoch({from, me});
  const uint64_t seq = group.state().p2p().NextReceive(src, tag, epoch, take);
  return PointToPointKey(group.name(), from, me, tag, seq, epoch);
}

// The tensor `envelope` carries from `src`, in `into` if given.
absl::StatusOr<Received> Unpack(ProcessGroup& group, int src,
                                const Value& envelope, const TensorOut& into) {
  absl::StatusOr<Message> m = FromEnvelope(envelope);
  if (!m.ok() || m->tensors.size() != 1) {
    return absl::InternalError(
        absl::StrCat("malformed message from ", Who(group, src)));
  }
  Received got{src, std::move(m->tensors[0])};
  if (into == nullptr) return got;
  const Tensor& t = got.tensor;
  if (t.dtype() != into->dtype() || t.shape() != into->shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        Who(group, src), " sent ", DTypeName(t.dtype()), " ",
        ShapeString(t.shape()), " but the output is ", DTypeName(into->dtype()),
        " ", ShapeString(into->shape())));
  }
  // Unless it was received there already.
  if (t.nbytes() > 0 && t.data() != into->data()) {
    std::memcpy(into->data(), t.data(), t.nbytes());
  }
  got.tensor = *into->View(0, into->numel()).Reshape(into->shape());
  return got;
}

// A deadline timer that may be cancelled before it is known.
struct Deadline {
  absl::Mutex mu;
  bool over ABSL_GUARDED_BY(mu) = false;
  Timers::TimerId timer ABSL_GUARDED_BY(mu) = 0;

  void Arm(Timers& timers, absl::Time when, Timers::Callback cb) {
    Timers::TimerId id = timers.RunAt(when, std::move(cb));
    absl::MutexLock lock(&mu);
    if (over) {
      timers.Cancel(id);
    } else {
      timer = id;
    }
  }
  // Whether this call ended it (the first to).
  bool End(Timers& timers) {
    Timers::TimerId id;
    {
      absl::MutexLock lock(&mu);
      if (over) return false;
      over = true;
      id = timer;
    }
    if (id != 0) timers.Cancel(id);
    return true;
  }
};

// ---- A receive from one source ----

void ReceiveFrom(std::shared_ptr<ProcessGroup> group, int src, int64_t tag,
                 TensorOut into, absl::Time deadline, absl::Duration timeout,
                 Promise<Received> result) {
  CollectiveContext& context = group->state().context();
  const std::string key = KeyFrom(*group, src, tag, /*take=*/true);
  const std::string what = FromWhom(*group, src, tag);
  auto finish = [group, tag, result](absl::StatusOr<Received> r) {
    result.Set(std::move(r));
    group->state().p2p().Finished(tag, /*any_source=*/false);
  };
  if (std::optional<Value> kept = group->state().p2p().Take(key)) {
    return finish(Unpack(*group, src, *kept, into));
  }
  const MessageKey mkey{key, 0, group->members()[src]};
  // A message that arrived whole is received even if this worker is
  // stopping or its sender died since: a sender's process may exit right
  // after its last send (gloo's receiver reads it from the socket then).
  if (std::optional<Value> held = context.mailbox().TakeHeld(mkey)) {
    context.mailbox().Close(key);  // A duplicate is refused from now.
    absl::StatusOr<Received> got = Unpack(*group, src, *held, into);
    return finish(got.ok() ? std::move(got) : Named(what, got.status()));
  }
  // A death of the source fails it at once (Began's members are by group
  // rank; the others take no part).
  std::vector<int> members(group->size(), -1);
  members[src] = group->members()[src];
  context.Began(key, what, std::move(members));
  auto deadline_timer = std::make_shared<Deadline>();
  std::optional<TensorLanding> landing;
  if (into != nullptr) landing = TensorLanding::Within(*into, 0, into->numel());
  context.mailbox()
      .Receive(mkey, std::move(landing))
      .Then([group, src, into, key, what, deadline_timer,
             finish](const absl::StatusOr<Value>& message) mutable {
        CollectiveContext& context = group->state().context();
        deadline_timer->End(context.host().timers());
        context.Ended(key);
        context.mailbox().Close(key);  // A duplicate is refused from now.
        if (!message.ok()) return finish(Named(what, message.status()));
        absl::StatusOr<Received> got = Unpack(*group, src, *message, into);
        finish(got.ok() ? std::move(got) : Named(what, got.status()));
      });
  std::weak_ptr<CollectiveContext> weak = context.weak_from_this();
  deadline_timer->Arm(
      context.host().timers(), deadline, [weak, key, what, timeout] {
        std::shared_ptr<CollectiveContext> c = weak.lock();
        if (c == nullptr) return;
        c->mailbox()
            .Abort(key, absl::DeadlineExceededError(absl::StrCat(
                            "no message within ",
                            absl::ToInt64Milliseconds(timeout), " ms")))
            .IgnoreError();
      });
}

// ---- A receive from any source ----

struct AnySource {
  std::shared_ptr<ProcessGroup> group;
  int64_t tag;
  std::string op;  // How the receive is shown among the worker's ops.
  TensorOut into;
  Promise<Received> result;
  std::vector<int> sources;  // Group ranks asked.
  std::vector<std::string> keys;
  Deadline deadline;

  absl::Mutex mu;
  bool decided ABSL_GUARDED_BY(mu) = false;
  size_t unsettled ABSL_GUARDED_BY(mu) = 0;  // Asks not answered yet.

  // The answer to ask `i`: what it got (or why not).
  void Answered(size_t i, const absl::StatusOr<Value>& message);
  // Ends the receive with `r` (once): withdraws the other asks.
  void Decide(absl::StatusOr<Received> r, int taken);
  // One ask is settled; the last one gives the tag's turn back.
  void Settled();
};

void AnySource::Answered(size_t i, const absl::StatusOr<Value>& message) {
  bool first = false;
  {
    absl::MutexLock lock(&mu);
    if (!decided && (message.ok() ||
                     message.status().code() != absl::StatusCode::kCancelled)) {
      decided = first = true;
    }
  }
  if (first && message.ok()) {
    // Taken: the source's next number is this one's.
    KeyFrom(*group, sources[i], tag, /*take=*/true);
    group->state().context().mailbox().Close(keys[i]);
    Decide(Unpack(*group, sources[i], *message, into), static_cast<int>(i));
  } else if (first) {
    Decide(Named(FromWhom(*group, kAnySource, tag), message.status()), -1);
  } else if (message.ok()) {
    // Came while another was taken: for the next receive of its number
    // (within the source's bound; past it, dropped: that receive then
    // waits until its deadline).
    group->state()
        .p2p()
        .Keep(group->members()[sources[i]], keys[i], *message)
        .IgnoreError();
  }
  Settled();
}

void AnySource::Decide(absl::StatusOr<Received> r, int taken) {
  deadline.End(group->state().context().host().timers());
  group->state().context().Ended(op);
  group->state().context().mailbox().Close(op);
  for (size_t j = 0; j < keys.size(); ++j) {
    if (static_cast<int>(j) == taken) continue;
    group->state().context().mailbox().Withdraw(
        {keys[j], 0, group->members()[sources[j]]});
  }
  if (!r.ok()) r = Named(FromWhom(*group, kAnySource, tag), r.status());
  result.Set(std::move(r));
}

void AnySource::Settled() {
  {
    absl::MutexLock lock(&mu);
    if (--unsettled > 0) return;
  }
  // Every ask answered (kept messages are kept by now): the next receive
  // of the tag may ask for the same numbers.
  group->state().p2p().Finished(tag, /*any_source=*/true);
}

void ReceiveAny(std::shared_ptr<ProcessGroup> group, int64_t tag,
                TensorOut into, absl::Time deadline, absl::Duration timeout,
                Promise<Received> result) {
  auto any = std::make_shared<AnySource>();
  any->group = group;
  any->tag = tag;
  any->into = std::move(into);
  any->result = std::move(result);
  for (int r = 0; r < group->size(); ++r) {
    if (r == group->rank()) continue;
    any->sources.push_back(r);
    any->keys.push_back(KeyFrom(*group, r, tag, /*take=*/false));
  }
  // A message kept from an earlier receive is the next of its source; else
  // one that arrived whole (received even if this worker is stopping or
  // its sender died since, as ReceiveFrom's).
  for (size_t i = 0; i < any->keys.size(); ++i) {
    std::optional<Value> kept = group->state().p2p().Take(any->keys[i]);
    if (!kept.has_value()) {
      kept = group->state().context().mailbox().TakeHeld(
          {any->keys[i], 0, group->members()[any->sources[i]]});
      if (kept.has_value())
        group->state().context().mailbox().Close(any->keys[i]);
    }
    if (!kept.has_value()) continue;
    KeyFrom(*group, any->sources[i], tag, /*take=*/true);
    absl::StatusOr<Received> got =
        Unpack(*group, any->sources[i], *kept, any->into);
    any->result.Set(
        got.ok() ? std::move(got)
                 : Named(FromWhom(*group, kAnySource, tag), got.status()));
    return group->state().p2p().Finished(tag, /*any_source=*/true);
  }
  if (any->sources.empty()) {
    any->result.Set(absl::InvalidArgumentError(absl::StrCat(
        FromWhom(*group, kAnySource, tag), ": the group has no other rank")));
    return group->state().p2p().Finished(tag, /*any_source=*/true);
  }
  {
    absl::MutexLock lock(&any->mu);
    any->unsettled = any->sources.size();
  }
  // Among the worker's ops while it waits, under a name no message has,
  // unique among those running (its state's address).
  any->op =
      absl::StrCat(group->name(), "/p:*>", group->members()[group->rank()], ":",
                   tag, "@", reinterpret_cast<uintptr_t>(any.get()));
  group->state().context().Began(any->op, FromWhom(*group, kAnySource, tag),
                                 std::vector<int>(group->size(), -1));
  // Every ask is made before any answer is looked at, so the asks the
  // first answer withdraws are all there.
  std::vector<Future<Value>> asks;
  for (size_t i = 0; i < any->sources.size(); ++i) {
    asks.push_back(group->state().context().mailbox().Receive(
        {any->keys[i], 0, group->members()[any->sources[i]]}));
  }
  for (size_t i = 0; i < asks.size(); ++i) {
    asks[i].Then([any, i](const absl::StatusOr<Value>& message) {
      any->Answered(i, message);
    });
  }
  any->deadline.Arm(
      group->state().context().host().timers(), deadline, [any, timeout] {
        {
          absl::MutexLock lock(&any->mu);
          if (any->decided) return;
          any->decided = true;
        }
        any->Decide(absl::DeadlineExceededError(absl::StrCat(
                        "no message within ",
                        absl::ToInt64Milliseconds(timeout), " ms")),
                    -1);
      });
}

}  // namespace

Work<Done> SendAsync(ProcessGroup& group, const Tensor& tensor, int dst,
                     int64_t tag, const CollectiveOptions& options) {
  absl::Status ok = CheckPeer(group, dst, "dst", /*any=*/false);
  if (!ok.ok()) return Work<Done>(Future<Done>::Ready(Named("send", ok)));
  CollectiveContext& context = group.state().context();
  const std::string what =
      absl::StrCat("send to ", Who(group, dst), " with tag ", tag);
  if (context.stopping()) {
    return Work<Done>(Future<Done>::Ready(absl::UnavailableError(
        absl::StrCat(what, ": ", context.host().name(), " is stopping"))));
  }
  const int me = group.members()[group.rank()], to = group.members()[dst];
  const uint64_t epoch = context.Epoch({me, to});
  const uint64_t seq = group.state().p2p().NextSend(dst, tag, epoch);
  const std::string key =
      PointToPointKey(group.name(), me, to, tag, seq, epoch);
  const absl::Time deadline =
      context.host().timers().clock()->Now() + TimeoutOf(group, options);
  Future<Done> sent = context.transport().Send(
      to, {key, 0, me}, ToEnvelope(Message::OfTensors({tensor})), deadline,
      TraceContext());
  return Work<Done>(
      sent.Map([what](const absl::StatusOr<Done>& r) -> absl::StatusOr<Done> {
        if (!r.ok()) return Named(what, r.status());
        return Done();
      }));
}

absl::Status Send(ProcessGroup& group, const Tensor& tensor, int dst,
                  int64_t tag, const CollectiveOptions& options) {
  const absl::Duration timeout = TimeoutOf(group, options);
  return SendAsync(group, tensor, dst, tag, options)
      .Wait(timeout + absl::Seconds(10))
      .status();
}

Work<Received> RecvAsync(ProcessGroup& group, int src, int64_t tag,
                         TensorOut into, const CollectiveOptions& options) {
  absl::Status ok = CheckPeer(group, src, "src", /*any=*/true);
  if (!ok.ok()) {
    return Work<Received>(Future<Received>::Ready(Named("recv", ok)));
  }
  std::shared_ptr<ProcessGroup> shared = group.weak_from_this().lock();
  if (shared == nullptr) {
    return Work<Received>(Future<Received>::Ready(absl::FailedPreconditionError(
        "recv: the group must be owned by a shared_ptr (as NewGroup's are)")));
  }
  const absl::Duration timeout = TimeoutOf(group, options);
  const absl::Time deadline =
      group.state().context().host().timers().clock()->Now() + timeout;
  Promise<Received> result;
  const bool any = src == kAnySource;
  group.state().p2p().Queue(
      tag, any,
      [shared, src, tag, into = std::move(into), deadline, timeout, result,
       any]() mutable {
        if (any) {
          return ReceiveAny(std::move(shared), tag, std::move(into), deadline,
                            timeout, result);
        }
        ReceiveFrom(std::move(shared), src, tag, std::move(into), deadline,
                    timeout, result);
      });
  return Work<Received>(result.future());
}

absl::StatusOr<Received> Recv(ProcessGroup& group, int src, int64_t tag,
                              TensorOut into,
                              const CollectiveOptions& options) {
  const absl::Duration timeout = TimeoutOf(group, options);
  return RecvAsync(group, src, tag, std::move(into), options)
      .Wait(timeout + absl::Seconds(10));
}

}  // namespace ferry
