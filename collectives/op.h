// One collective call on one rank: how the algorithms talk. Sends are
// asynchronous; receives block this thread (collectives run on their
// caller's thread, or on the collectives executor) up to the op's deadline.
//
// Failure is uniform: an op that fails here — bad input, a mismatch, a
// timeout, a dead peer — is aborted on every member with the same status,
// so all ranks report the same error and none waits for its own deadline.
// A rank that times out asks each member whether it joined the op, and
// names those that never came.
#ifndef FERRY_COLLECTIVES_OP_H_
#define FERRY_COLLECTIVES_OP_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "collectives/collective_context.h"
#include "collectives/process_group.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"

namespace ferry {

class Op {
 public:
  // `name`: "all_reduce"; `label`: its number in messages ("17", or a
  // client's op id); `key`: unique in the job.
  Op(ProcessGroup& group, std::string name, std::string key, std::string label,
     absl::Duration timeout);
  ~Op();

  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

  int rank() const { return group_.rank(); }
  const ProcessGroup& group() const { return group_; }
  int size() const { return group_.size(); }
  const std::string& name() const { return name_; }
  const CollectiveConfig& config() const { return group_.context().config(); }

  // "rank 2 (worker2)" for group rank `r`.
  std::string Who(int r) const;
  // `code` with "<name> op <label>: <message>".
  absl::Status Error(absl::StatusCode code, absl::string_view message) const;
  // INVALID_ARGUMENT for this rank's input: "<name> op <label>: rank 2
  // (worker2): <message>".
  absl::Status BadInput(absl::string_view message) const;

  // Sends `message` to group rank `to` as this op's message number `step`.
  // Failures surface in Recv or Flush.
  void Send(int to, int step, Value message);
  // The message `step` from group rank `from`.
  absl::StatusOr<Value> Recv(int from, int step);
  // Waits until every message sent was received.
  absl::Status Flush();

  // One round of messages `step`, pairwise shifted (rank r sends to r+1,
  // r+2, … and receives from r-1, r-2, …, so no rank is everyone's first
  // destination): message_for(to) goes to each other rank; returns what
  // each rank sent this one, by group rank (this rank's own entry is
  // message_for(rank())).
  absl::StatusOr<std::vector<Value>> ExchangeEach(
      int step, absl::FunctionRef<Value(int to)> message_for);
  // The same with one message for everyone: every rank's `mine`.
  absl::StatusOr<std::vector<Value>> ExchangeAll(int step, const Value& mine);

  // Fails the op on every member (once) and returns `status` (or the
  // status another member failed it with first).
  absl::Status Fail(absl::Status status);

 private:
  absl::Status TimedOut(int waited_for);

  ProcessGroup& group_;
  CollectiveContext& context_;
  const std::string name_;
  const std::string key_;
  const std::string label_;
  const absl::Duration timeout_;
  const absl::Time deadline_;
  std::vector<std::pair<int, Future<Done>>> sends_;
  bool failed_ = false;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_H_
