// Work: the handle of a collective started asynchronously.
//
//   Work<Tensor> w = AllReduceAsync(group, t);
//   … overlap other work …
//   absl::StatusOr<Tensor> sum = w.Wait(absl::Seconds(30));
#ifndef FERRY_COLLECTIVES_OP_WORK_H_
#define FERRY_COLLECTIVES_OP_WORK_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"

namespace ferry {

template <typename T>
class Work {
 public:
  // `what` names the op for people ("all_reduce op world/5"; "" if none).
  explicit Work(Future<T> result, std::string what = "")
      : result_(std::move(result)), what_(std::move(what)) {}

  // The op's result. DEADLINE_EXCEEDED if it is not done within `timeout`
  // (the op itself goes on, bounded by its own deadline; wait again).
  absl::StatusOr<T> Wait(absl::Duration timeout) const {
    return result_.Wait(timeout);
  }
  bool IsCompleted() const { return result_.IsReady(); }
  // OK while the op runs or once it succeeded; its error once it failed.
  absl::Status status() const {
    if (!result_.IsReady()) return absl::OkStatus();
    return result_.Wait(absl::ZeroDuration()).status();
  }
  // For composition (Then, Map).
  const Future<T>& future() const { return result_; }
  // The op, for people: its name and key ("all_reduce op world/5").
  const std::string& what() const { return what_; }

 private:
  Future<T> result_;
  std::string what_;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_WORK_H_
