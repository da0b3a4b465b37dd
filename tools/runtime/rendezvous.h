// --rendezvous for ferryd and ferryctl: where the job's membership lives.
// Empty: the embedded master (--master). etcd://HOST:PORT[,…]/JOB: etcd,
// reached with the etcd_* settings below.
#ifndef FERRY_TOOLS_RUNTIME_RENDEZVOUS_H_
#define FERRY_TOOLS_RUNTIME_RENDEZVOUS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/base/timers.h"
#include "rpc/membership/membership_backend.h"

namespace ferry {

struct RendezvousSettings {
  std::string url;  // Flag --rendezvous, else env FERRY_RENDEZVOUS.
  // TLS to etcd (PEM files; empty CA: plaintext) and an etcd user whose
  // password is the first line of a file.
  std::string etcd_ca_file;
  std::string etcd_cert_file;
  std::string etcd_key_file;
  std::string etcd_user;
  std::string etcd_password_file;
  // The lease TTL (the heartbeat timeout) and how long to look for a
  // healthy etcd member.
  absl::Duration ttl = absl::Seconds(30);
  absl::Duration connect_timeout = absl::Seconds(10);
};

using BackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<MembershipBackend>>(Timers*)>;

// The backend factory for AgentOptions/RpcClientOptions, or an empty
// function for the embedded master (empty url). INVALID_ARGUMENT for a
// bad url, unreadable password file or bad TLS settings, at once.
absl::StatusOr<BackendFactory> BackendFactoryFor(RendezvousSettings settings);

// `flag` if set, else $FERRY_RENDEZVOUS, else "".
std::string RendezvousUrl(const std::string& flag);

// A worker started without a rank, on a backend that assigns ranks (etcd):
// its rank is taken before the worker is built for it (every layer knows
// its rank from the start).
struct ReservedRank {
  int rank = -1;
  // Hands the agent the backend that holds the reservation (once), whose
  // Join then publishes the worker's address under that rank.
  BackendFactory factory;
};
// Makes the backend with `factory` on `timers` (which must outlive the
// worker) and reserves the first free rank of a job of `world_size` for
// this process (`host`, `pid`), within `timeout`. INVALID_ARGUMENT for a
// backend that cannot pick ranks; ALREADY_EXISTS when every rank is held.
absl::StatusOr<ReservedRank> ReserveFirstFreeRank(
    const BackendFactory& factory, Timers* timers, int world_size,
    const std::string& host, int64_t pid, absl::Duration timeout);

}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_RENDEZVOUS_H_
