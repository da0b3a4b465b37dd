#include "tools/runtime/rendezvous.h"

#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"
#include "rpc/membership/etcd/etcd_options.h"
#include "rpc/membership/etcd_backend.h"
#include "rpc/membership/rendezvous_url.h"

namespace ferry {

namespace {

absl::StatusOr<std::string> ReadPassword(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the etcd password from ", path));
  }
  return line;
}

}  // namespace

std::string RendezvousUrl(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("FERRY_RENDEZVOUS");
  return env != nullptr ? env : "";
}

absl::StatusOr<BackendFactory> BackendFactoryFor(RendezvousSettings settings) {
  if (settings.url.empty()) return BackendFactory();
  FERRY_ASSIGN_OR_RETURN(EtcdRendezvous where,
                         ParseRendezvousUrl(settings.url));
  EtcdBackendOptions options;
  options.job = where.job;
  options.ttl = settings.ttl;
  options.etcd.endpoints = where.endpoints;
  options.etcd.tls_ca_file = settings.etcd_ca_file;
  options.etcd.tls_cert_file = settings.etcd_cert_file;
  options.etcd.tls_key_file = settings.etcd_key_file;
  options.etcd.user = settings.etcd_user;
  options.etcd.connect_timeout = settings.connect_timeout;
  if (!settings.etcd_password_file.empty()) {
    FERRY_ASSIGN_OR_RETURN(options.etcd.password,
                           ReadPassword(settings.etcd_password_file));
  }
  FERRY_RETURN_IF_ERROR(ValidateEtcdOptions(options.etcd));
  return BackendFactory(
      [options](Timers* timers)
          -> absl::StatusOr<std::unique_ptr<MembershipBackend>> {
        EtcdBackendOptions o = options;
        // Renewals and retries on the node's own timers and clock.
        o.etcd.timers = timers;
        o.etcd.clock = timers->clock();
        FERRY_ASSIGN_OR_RETURN(std::unique_ptr<EtcdBackend> backend,
                               EtcdBackend::Connect(std::move(o)));
        return std::unique_ptr<MembershipBackend>(std::move(backend));
      });
}

absl::StatusOr<ReservedRank> ReserveFirstFreeRank(
    const BackendFactory& factory, Timers* timers, int world_size,
    const std::string& host, int64_t pid, absl::Duration timeout) {
  if (!factory) {
    return absl::InvalidArgumentError(
        "the embedded master cannot pick a rank: set --rank");
  }
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<MembershipBackend> backend,
                         factory(timers));
  if (!backend->rank_is_assignable()) {
    return absl::InvalidArgumentError(absl::StrCat(
        backend->description(), " cannot pick a rank: set --rank"));
  }
  JoinSpec spec;
  spec.self.rank = -1;
  spec.self.host = host;
  spec.self.pid = pid;
  spec.world_size = world_size;
  FERRY_ASSIGN_OR_RETURN(int rank, backend->ReserveRank(spec, timeout));
  // std::function must be copyable: the backend moves out on the first call.
  auto held =
      std::make_shared<std::unique_ptr<MembershipBackend>>(std::move(backend));
  return ReservedRank{
      rank,
      [held](Timers*) -> absl::StatusOr<std::unique_ptr<MembershipBackend>> {
        if (*held == nullptr) {
          return absl::FailedPreconditionError(
              "the backend holding the reserved rank was handed out already");
        }
        return std::move(*held);
      }};
}

}  // namespace ferry
