#include "tools/ferryctl/session_job.h"

#include <utility>

#include "absl/time/clock.h"
#include "tools/ferryctl/commands.h"

namespace ferry {
namespace ctl {

absl::StatusOr<Value> SessionJob::Call(const std::string& worker,
                                       const std::string& fn,
                                       std::vector<Value> args) {
  return CallCommand(session_, worker, fn, std::move(args));
}

absl::StatusOr<Value> SessionJob::Remote(const std::string& worker,
                                         const std::string& fn,
                                         std::vector<Value> args) {
  return RemoteRRef(session_, worker, fn, std::move(args));
}

absl::StatusOr<Value> SessionJob::Fetch(const Value& rref) {
  return FetchCommand(session_, rref);
}

absl::StatusOr<Value> SessionJob::RRefs(const std::string& worker) {
  return RRefsCommand(session_, worker);
}

absl::StatusOr<Value> SessionJob::JobStatus() {
  return StatusCommand(session_);
}

absl::StatusOr<Value> SessionJob::Functions(const std::string& worker) {
  return FunctionsCommand(session_, worker);
}

absl::StatusOr<Value> SessionJob::Collective(const std::string& op,
                                             Value request) {
  return CollectiveCommand(session_, op, std::move(request));
}

void SessionJob::Sleep(absl::Duration duration) { absl::SleepFor(duration); }

}  // namespace ctl
}  // namespace ferry
