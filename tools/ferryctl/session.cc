#include "tools/ferryctl/session.h"

#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"
#include "tools/runtime/job_dir.h"

namespace ferry {
namespace ctl {

SecurityOptions SecurityFlags(const CommandLine& cl) {
  return SecurityOptions{
      .tls_cert_file = cl.Flag("tls_cert").value_or(""),
      .tls_key_file = cl.Flag("tls_key").value_or(""),
      .tls_ca_file = cl.Flag("tls_ca").value_or(""),
      .tls_server_name = cl.Flag("tls_server_name").value_or(""),
      .token_file = cl.Flag("token_file").value_or(""),
      .insecure = cl.BoolFlag("insecure"),
  };
}

std::vector<std::string> SecurityFlagsForFerryd(const CommandLine& cl) {
  std::vector<std::string> out;
  for (const char* name :
       {"token_file", "tls_cert", "tls_key", "tls_ca", "tls_server_name"}) {
    if (auto v = cl.Flag(name))
      out.push_back(absl::StrCat("--", name, "=", *v));
  }
  if (cl.BoolFlag("insecure")) out.push_back("--insecure");
  return out;
}

namespace {

// The security flags, with the token of a job this user's `up` started at
// `master` when none was given.
SecurityOptions SecurityFor(const CommandLine& cl, const std::string& master) {
  SecurityOptions o = SecurityFlags(cl);
  if (o.token_file.empty() && !o.insecure) {
    if (std::optional<std::string> dir = jobs::FindJob(master)) {
      const std::string token = *dir + "/token";
      if (access(token.c_str(), R_OK) == 0) o.token_file = token;
    }
  }
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Session>> Session::Open(const CommandLine& cl) {
  auto s = std::unique_ptr<Session>(new Session());
  FERRY_ASSIGN_OR_RETURN(int64_t timeout_ms, cl.IntFlag("timeout_ms", 60000));
  s->timeout_ = absl::Milliseconds(timeout_ms);
  FERRY_ASSIGN_OR_RETURN(int64_t local, cl.IntFlag("local", 0));
  if (local > 0) {
    FERRY_ASSIGN_OR_RETURN(s->security_, Security::Load(SecurityFlags(cl)));
    LocalJob::Options job;
    job.configure = [&s](WorkerConfig& o) { o.security = s->security_; };
    FERRY_ASSIGN_OR_RETURN(s->local_,
                           LocalJob::Start(static_cast<int>(local), job));
    s->master_ = s->local_->master();
  } else if (auto m = cl.Flag("master")) {
    s->master_ = *m;
  } else if (const char* env = std::getenv("FERRY_MASTER"); env && *env) {
    s->master_ = env;
  } else {
    s->master_ = kDefaultMaster;
  }
  if (local == 0) {
    FERRY_ASSIGN_OR_RETURN(s->security_,
                           Security::Load(SecurityFor(cl, s->master_)));
    FERRY_ASSIGN_OR_RETURN(
        s->backend_,
        BackendFactoryFor(
            {.url = RendezvousUrl(cl.Flag("rendezvous").value_or("")),
             .etcd_ca_file = cl.Flag("etcd_ca").value_or(""),
             .etcd_cert_file = cl.Flag("etcd_cert").value_or(""),
             .etcd_key_file = cl.Flag("etcd_key").value_or(""),
             .etcd_user = cl.Flag("etcd_user").value_or(""),
             .etcd_password_file = cl.Flag("etcd_password_file").value_or(""),
             .ttl = absl::Seconds(30),
             .connect_timeout = std::min(s->bound(), absl::Seconds(10))}));
  }
  return s;
}

Session::~Session() {
  if (client_ != nullptr) client_->Close();
  client_.reset();
  if (local_ != nullptr) local_->ShutdownAll().IgnoreError();
}

absl::StatusOr<ClientImpl*> Session::client() {
  if (client_ == nullptr) {
    RpcClientOptions o;
    o.master = master_;
    o.description = absl::StrCat("ferryctl pid ", getpid());
    o.connect_timeout = std::min(bound(), absl::Seconds(10));
    o.default_timeout = timeout_;
    o.security = security_;
    o.membership_backend = backend_;
    FERRY_ASSIGN_OR_RETURN(client_, ClientImpl::Connect(o));
  }
  return client_.get();
}

}  // namespace ctl
}  // namespace ferry
