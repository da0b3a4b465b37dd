// One collective call on one rank, driven by completions: no thread waits
// for a peer. An algorithm sends (asynchronously) and asks for messages with
// a continuation; each continuation runs once its messages are in, on
// whichever thread completed them (gRPC's, receiving; or the caller's, if
// they were there already), and sends or asks for the next ones. So any
// number of ops progress on a few threads, and only a caller waiting for a
// result (Work::Wait, the sync API) blocks — its own thread.
//
//   void Run(Result<Tensor> result, Tensor t) {
//     Op& op = result.op();
//     op.ExchangeAll(0, Message::OfTensors({t}),
//                    [result = std::move(result)](std::vector<Message> all)
//                        mutable { … std::move(result).Set(sum); });
//   }
//
// Continuations of one op never run concurrently as long as the algorithm
// has one request for messages outstanding at a time (every algorithm
// here but the pipelined ring all_reduce, whose pieces share only what
// they lock), so their state needs no lock; a continuation must not block.
//
// Failure is uniform: an op that fails here — bad input, a mismatch, its
// deadline, a dead peer — is aborted on every member with the same status,
// so all ranks report the same error and none waits for its own deadline.
// Once failed (or done), no continuation of the op runs. At its deadline
// (on the node's timers) an op still waiting asks each member whether it
// joined the op, and names those that never came.
#ifndef FERRY_COLLECTIVES_OP_OP_H_
#define FERRY_COLLECTIVES_OP_OP_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/op/collective_context.h"
#include "collectives/op/message.h"
#include "collectives/op/process_group.h"
#include "collectives/recorder/flight_recorder.h"
#include "rpc/base/future.h"
#include "rpc/base/timers.h"
#include "rpc/base/trace_context.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_landing.h"
#include "rpc/value/value.h"

namespace ferry {

// How an op is named across the job (runner.h's PrepareOp makes it).
struct OpSpec {
  std::string name;   // "all_reduce"
  std::string key;    // "world/17", "g0,2#0/t:<tag>"
  std::string label;  // "17", or the tag
  absl::Duration timeout;
  int64_t sequence = -1;  // The group's sequence number; -1 if tagged.
  // This rank's input, for the flight recorder (flight_recorder.h).
  std::vector<TensorSummary> inputs;
};

class Op : public std::enable_shared_from_this<Op>, public RunningOp {
 public:
  using Ended = absl::AnyInvocable<void(absl::Status) &&>;
  using OnMessage = absl::AnyInvocable<void(Message) &&>;
  // Messages by group rank (this rank's own entry as the caller says).
  using OnMessages = absl::AnyInvocable<void(std::vector<Message>) &&>;

  // Begins op `spec` on `group` here (its deadline runs from now). `ended`
  // runs exactly once: with OK after Succeed() once every message this
  // rank sent was delivered, or with the op's failure — after the op is
  // over here (nothing of it is left in the mailbox). The op keeps the
  // group alive if a shared_ptr owns it.
  static std::shared_ptr<Op> Begin(ProcessGroup& group, const OpSpec& spec,
                                   Ended ended);
  ~Op();

  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  int rank() const { return group_.rank(); }
  int size() const { return group_.size(); }
  const std::string& name() const { return name_; }
  const CollectiveConfig& config() const { return context_.config(); }
  const Limits& limits() const { return context_.host().limits(); }

  // "rank 2 (worker2)" for group rank `r`.
  std::string Who(int r) const;
  // `code` with "<name> op <label>: <message>".
  absl::Status Error(absl::StatusCode code, absl::string_view message) const;
  // INVALID_ARGUMENT for this rank's input: "<name> op <label>: rank 2
  // (worker2): <message>".
  absl::Status BadInput(absl::string_view message) const;
  // INTERNAL: the message from group rank `from` is not what the algorithm
  // sends ("malformed message from rank 1 (worker1): <what>").
  absl::Status Malformed(int from, absl::string_view what) const;

  // Sends `message` to group rank `to` as this op's message number `step`.
  // A send the receiver refuses for good (a limit, a malformed message)
  // fails the op at once; transport failures surface when the op ends
  // (Succeed waits for every send) or through membership and the deadline.
  void Send(int to, int step, const Message& message) ABSL_LOCKS_EXCLUDED(mu_);
  // Where the first tensor of a message should be received (TensorLanding:
  // a region of the op's output), by group rank of the sender; empty, or
  // nullopt for a rank: anywhere. Only a message that arrives after it is
  // asked for, with a tensor of the landing's size, lands; the algorithm
  // sees with landing.Holds(tensor) whether it has nothing left to copy.
  using Landings = std::vector<std::optional<TensorLanding>>;

  // Runs `then` with message `step` from group rank `from` once it is in.
  void Recv(int from, int step, OnMessage then,
            std::optional<TensorLanding> at = std::nullopt)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `then` once message `step` from each of `from` is in; the vector
  // has one entry per group rank (empty for ranks not in `from`).
  // Malformed messages fail the op in rank order.
  void RecvFrom(std::vector<int> from, int step, OnMessages then,
                Landings at = {}) ABSL_LOCKS_EXCLUDED(mu_);

  // One round of messages `step`, pairwise shifted (rank r sends to r+1,
  // r+2, … and receives from r-1, r-2, …, so no rank is everyone's first
  // destination): message_for(to) goes to each other rank; `then` gets
  // what each rank sent this one, by group rank (this rank's own entry is
  // message_for(rank())).
  void ExchangeEach(int step, absl::FunctionRef<Message(int to)> message_for,
                    OnMessages then, Landings at = {});
  // The same with one message for everyone: every rank's `mine`.
  void ExchangeAll(int step, const Message& mine, OnMessages then,
                   Landings at = {});

  // Runs `then` once every message this rank sent so far was delivered
  // (at once if none): for an algorithm about to overwrite memory it sent
  // from (a collective writing its result over its input). A send that
  // fails fails the op instead; `then` never runs once the op ended.
  void WhenSent(absl::AnyInvocable<void() &&> then) ABSL_LOCKS_EXCLUDED(mu_);

  // The algorithm is done here: the op ends OK once every send was
  // delivered (or fails, if one was not).
  void Succeed() ABSL_LOCKS_EXCLUDED(mu_);
  // Fails the op on every member (once) with `status` — or with the status
  // another member failed it with first — and ends it here.
  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Observing (flight_recorder.h, collective_context.h) ----
  const std::string& op_name() const override { return name_; }
  // Whether the flight recorder keeps this op (then record its outputs).
  bool recorded() const { return record_id_ != 0; }
  void RecordOutputs(std::vector<TensorSummary> outputs);
  // The group ranks whose messages this op waits for now, in the order
  // asked.
  std::vector<int> WaitingFor() const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class Phase {
    kRunning,   // The algorithm runs (or waits for messages).
    kProbing,   // The deadline passed: asking who joined.
    kFlushing,  // The algorithm succeeded: waiting for its sends.
    kEnded,
  };
  struct Waiting {
    int step;
    int from;
  };
  struct Sent {
    int to;
    Future<Done> delivered;
  };

  Op(ProcessGroup& group, const OpSpec& spec, Ended ended);

  // Calls `arrived` with message `step` from `from` while the op runs.
  void Expect(int from, int step, std::optional<TensorLanding> at,
              absl::AnyInvocable<void(Value) &&> arrived)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The message is in (`message`), or the op was aborted: whether the op
  // still runs.
  bool Arrived(int from, int step, bool message) ABSL_LOCKS_EXCLUDED(mu_);
  void OnDeadline() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a flush still waiting kFlushGrace after the deadline.
  void ArmFlushBackstop() ABSL_LOCKS_EXCLUDED(mu_);
  void OnFlushDeadline() ABSL_LOCKS_EXCLUDED(mu_);
  // Every send arrived (OK), or the send to `to` did not.
  void Flushed(absl::Status status, int to) ABSL_LOCKS_EXCLUDED(mu_);
  // The send to `to` that WhenSent waits for failed.
  void Unsent(absl::Status status, int to) ABSL_LOCKS_EXCLUDED(mu_);
  // The send to `to` failed while the algorithm runs.
  void SendFailed(absl::Status status, int to) ABSL_LOCKS_EXCLUDED(mu_);
  // Asks every member whether it joined; then fails the op, naming those
  // that did not (or `waited_for` if all did).
  void Probe(int waited_for);
  // `ops[r]`: the op member r runs under this op's key ("" if none).
  void Probed(int waited_for, const std::vector<std::string>& ops);
  // INVALID_ARGUMENT: group rank `other` runs op `theirs` under this op's
  // key (a program that calls collectives in a different order there).
  absl::Status Mismatched(int other, absl::string_view theirs) const;
  // Ends the op here with `status`: exactly once.
  void End(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts the op's end (metrics) and records its span (tracing).
  void Account(const absl::Status& status);
  absl::Status FlushError(int to, const absl::Status& status) const;
  // Fails the op for a send to `to` that failed with `status`; a broken
  // connection after waiting up to kDeathReport for `to`'s death report.
  void FailSend(int to, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // Constant after construction.
  ProcessGroup& group_;
  const std::shared_ptr<ProcessGroup> keep_group_;  // Null if unowned.
  CollectiveContext& context_;
  const std::string name_;
  const std::string key_;
  const std::string label_;
  const absl::Duration timeout_;
  const absl::Time deadline_;
  const uint64_t record_id_;  // In the flight recorder; 0 if not kept.
  // The op's span: in the trace of the call it runs in (if any); its
  // messages carry it.
  const uint64_t parent_span_;
  const TraceContext trace_;

  mutable absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kRunning;
  bool deadline_passed_ ABSL_GUARDED_BY(mu_) = false;
  bool aborts_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool started_ ABSL_GUARDED_BY(mu_) = false;  // A peer's message came.
  Ended ended_ ABSL_GUARDED_BY(mu_);
  // Receives asked for and not yet in, in the order asked (the first is
  // what a timed-out op names).
  std::vector<Waiting> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<Sent> sends_ ABSL_GUARDED_BY(mu_);
  std::vector<Timers::TimerId> timers_ ABSL_GUARDED_BY(mu_);
};

// The result of an op, set once by its algorithm on success (failures go
// through Op::Fail). Move-only; continuations carry it along.
template <typename T>
class Result {
 public:
  using Store = absl::AnyInvocable<void(T) &&>;

  Result(std::shared_ptr<Op> op, Store store)
      : op_(std::move(op)), store_(std::move(store)) {}

  Op& op() const { return *op_; }
  const std::shared_ptr<Op>& shared_op() const { return op_; }

  // `value` is the op's result here; the op ends once its sends arrived.
  void Set(T value) && {
    if (op_->recorded()) op_->RecordOutputs(Summarize(value));
    std::move(store_)(std::move(value));
    op_->Succeed();
  }
  void Fail(absl::Status status) && { op_->Fail(std::move(status)); }

  // A Result<U> whose value becomes this one's through `f` (for results
  // presented another way: the typed result of a call by name as a Value).
  template <typename U, typename F>
  Result<U> Map(F f) && {
    return Result<U>(
        op_, [store = std::move(store_), f = std::move(f)](U u) mutable {
          std::move(store)(f(std::move(u)));
        });
  }

 private:
  std::shared_ptr<Op> op_;
  Store store_;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_OP_H_
