// The job a script's job statements run against: a ferryctl Session
// (its --master or --local job), through the commands of commands.h.
#ifndef FERRY_TOOLS_FERRYCTL_SESSION_JOB_H_
#define FERRY_TOOLS_FERRYCTL_SESSION_JOB_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/value/value.h"
#include "tools/ferryctl/script.h"
#include "tools/ferryctl/session.h"

namespace ferry {
namespace ctl {

class SessionJob final : public ScriptJob {
 public:
  // `session` must outlive this.
  explicit SessionJob(Session& session) : session_(session) {}

  absl::StatusOr<Value> Call(const std::string& worker, const std::string& fn,
                             std::vector<Value> args) override;
  absl::StatusOr<Value> Remote(const std::string& worker, const std::string& fn,
                               std::vector<Value> args) override;
  absl::StatusOr<Value> Fetch(const Value& rref) override;
  absl::StatusOr<Value> RRefs(const std::string& worker) override;
  absl::StatusOr<Value> JobStatus() override;
  absl::StatusOr<Value> Functions(const std::string& worker) override;
  absl::StatusOr<Value> Collective(const std::string& op,
                                   Value request) override;
  // Really sleeps.
  void Sleep(absl::Duration duration) override;

 private:
  Session& session_;
};

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_SESSION_JOB_H_
