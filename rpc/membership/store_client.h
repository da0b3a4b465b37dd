// KeyValueStore: torch.distributed's Store operations over ferry's
// membership — the embedded master's StoreService (store_service.h), or
// etcd (keys under "/ferry/<job>/store/", no ferry process needed) — so
// torch programs rendezvous on ferry (ferry.store; "ferry://MASTER" and
// "etcd://HOST:PORT[,…]/JOB" init methods).
//
//   auto store = ConnectMasterStore("10.0.0.1:29500", security, {});
//   (*store)->Set("key", "value");
//   absl::StatusOr<std::string> v = (*store)->Get("key", absl::Seconds(30));
//
// Every call is bounded: by its `wait` where it waits for keys
// (DEADLINE_EXCEEDED naming the first key still missing), else by the
// store's call timeout. Errors carry the server's codes and bounds
// (store_service.h; etcd's own, and its request size limit). Thread-safe.
#ifndef FERRY_RPC_MEMBERSHIP_STORE_CLIENT_H_
#define FERRY_RPC_MEMBERSHIP_STORE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/auth/security.h"
#include "rpc/membership/etcd/etcd_options.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace ferry {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  virtual absl::Status Set(const std::string& key,
                           const std::string& value) = 0;
  // The value of `key`, waiting for it at most `wait`.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          absl::Duration wait) = 0;
  // Adds `amount` to the decimal integer at `key` (0 if unset): the sum.
  virtual absl::StatusOr<int64_t> Add(const std::string& key,
                                      int64_t amount) = 0;
  // Sets `desired` if the value is `expected` (or, with an empty
  // `expected`, if the key is unset); returns the value after.
  virtual absl::StatusOr<std::string> CompareSet(
      const std::string& key, const std::string& expected,
      const std::string& desired) = 0;
  // Whether there was a key to delete.
  virtual absl::StatusOr<bool> Delete(const std::string& key) = 0;
  // Returns once every key is set; DEADLINE_EXCEEDED after `wait`.
  virtual absl::Status Wait(const std::vector<std::string>& keys,
                            absl::Duration wait) = 0;
  // Whether every key is set, now.
  virtual absl::StatusOr<bool> Check(const std::vector<std::string>& keys) = 0;
  virtual absl::StatusOr<int64_t> NumKeys() = 0;
};

struct StoreClientOptions {
  // The deadline of each call that does not wait for keys (and what a
  // waiting one may take beyond its wait).
  absl::Duration call_timeout = absl::Seconds(30);
};

// The store of the job whose embedded master is at `master` ("HOST:PORT"),
// reached with `security` (the job's token, TLS). Nothing is sent before
// the first call.
absl::StatusOr<std::unique_ptr<KeyValueStore>> ConnectMasterStore(
    const std::string& master, std::shared_ptr<const Security> security,
    StoreClientOptions options = {});

// The same over `channel`, already open to the master at `master` (a
// worker's membership channel, carrying its credential).
std::unique_ptr<KeyValueStore> MasterStoreOver(
    std::shared_ptr<grpc::Channel> channel, const std::string& master,
    StoreClientOptions options = {});

// A store in etcd under "/ferry/<job>/store/" (`job` as ferry's etcd
// rendezvous names jobs). UNAVAILABLE if no endpoint answers within
// etcd.connect_timeout.
absl::StatusOr<std::unique_ptr<KeyValueStore>> ConnectEtcdStore(
    EtcdOptions etcd, const std::string& job, StoreClientOptions options = {});

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_STORE_CLIENT_H_
