// Follows every change under a key prefix from a revision on, across
// broken streams and endpoints: when a stream breaks, a new one (on the next
// endpoint, after a backoff) resumes from the revision after the last event
// delivered, so no event is lost or delivered twice.
//
// Contracts:
// - on_events gets the events in revision order, in batches; calls never
//   overlap and never run under the client's locks (they run on a gRPC
//   thread: keep them short, never block).
// - on_end runs at most once, when the watch ends for good without Stop():
//   OUT_OF_RANGE if the history it needs was compacted away (Range the
//   prefix again and watch from its revision + 1), PERMISSION_DENIED if the
//   user may not read the prefix. No event follows it.
// - Reconnecting goes on until Stop(); each try is bounded by the stream
//   opening, and the pause between tries grows to the client's max backoff.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_WATCH_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_WATCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "rpc/membership/etcd/etcd_types.h"

namespace ferry {

class EtcdConnection;
class PrefixWatcher;

struct EtcdWatchCallbacks {
  absl::AnyInvocable<void(std::vector<EtcdEvent>)> on_events;
  absl::AnyInvocable<void(const absl::Status&) &&> on_end;  // May be empty.
};

class EtcdWatch {
 public:
  // Watches keys starting with `prefix` from `start_revision` (inclusive;
  // 0: from now on).
  static std::unique_ptr<EtcdWatch> Start(
      std::shared_ptr<EtcdConnection> connection, std::string prefix,
      int64_t start_revision, EtcdWatchCallbacks callbacks);

  // Stop().
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  // Ends the watch and waits, bounded, for a callback running on another
  // thread. Once it returns no callback runs. May be called from a callback.
  void Stop();

  // The revision the watch continues from: the last event's + 1 (0 until
  // the first stream was created when watching from now on).
  int64_t next_revision() const;
  // Streams opened so far (1 + reconnections).
  int streams_opened() const;

 private:
  explicit EtcdWatch(std::shared_ptr<PrefixWatcher> watcher);

  const std::shared_ptr<PrefixWatcher> watcher_;
};

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_WATCH_H_
