// What a ferryctl command runs against: the job at --master (or
// FERRY_MASTER, or 127.0.0.1:29500), or an in-process job of --local=N
// workers that lives as long as the command.
#ifndef FERRY_TOOLS_FERRYCTL_SESSION_H_
#define FERRY_TOOLS_FERRYCTL_SESSION_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/auth/security.h"
#include "tools/ferryctl/cli.h"
#include "tools/runtime/local_job.h"
#include "tools/runtime/rendezvous.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {
namespace ctl {

inline constexpr char kDefaultMaster[] = "127.0.0.1:29500";

// The global security flags (--token_file, --tls_cert, --tls_key,
// --tls_ca, --tls_server_name, --insecure): as options, and as ferryd flags
// for `up`. Without --token_file (and not --insecure), a session uses the
// token of the job this user's `up` started at the master, if any
// (tools/runtime/job_dir.h).
SecurityOptions SecurityFlags(const CommandLine& cl);
std::vector<std::string> SecurityFlagsForFerryd(const CommandLine& cl);

class Session {
 public:
  // INVALID_ARGUMENT for malformed global flags; starts the --local job.
  static absl::StatusOr<std::unique_ptr<Session>> Open(const CommandLine& cl);
  ~Session();

  // Connects on first use.
  absl::StatusOr<ClientImpl*> client();

  const std::string& master() const { return master_; }
  // Per-operation timeout (--timeout_ms; 0 = none).
  absl::Duration timeout() const { return timeout_; }
  // The timeout as a bound for things that must end (0 → a long bound).
  absl::Duration bound() const {
    return timeout_ == absl::ZeroDuration() ? absl::Hours(24) : timeout_;
  }

 private:
  Session() = default;
  std::string master_;
  absl::Duration timeout_ = absl::Seconds(60);
  std::shared_ptr<const Security> security_;
  // Set with --rendezvous (membership in etcd); empty: the master.
  BackendFactory backend_;
  std::unique_ptr<LocalJob> local_;
  std::unique_ptr<ClientImpl> client_;
};

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_SESSION_H_
