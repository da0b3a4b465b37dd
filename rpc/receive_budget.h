// ReceiveBudget: the bytes that requests arriving as streams
// (rpc/chunked_message.h), and the values decoded from them (which
// reference their buffers), may hold at once. Incoming streams are
// buffered outside gRPC's own memory quota, so they get a budget of their
// own: --grpc_memory_mb in all, like gRPC's, and at most
// --max_stream_mb_per_peer of it for any one peer, so one peer (or a few
// half-sent streams of it) cannot take what every other caller needs.
//
// A peer is whoever a stream proved it is: the node its credential names
// ("worker2", "client node 4294967298"), or, for a caller that presented
// none, its connection ("ipv4:127.0.0.1:40312"). Bytes are taken as a
// stream's buffer grows with what actually arrived, not as its head
// announces (ChunkAssembler), and given back when the buffer is freed.
//
//   ReceiveBudget budget({.max_bytes = 2 << 30, .max_bytes_per_peer = 1 <<
//   30}); if (absl::Status s = budget.Take("worker2", n); !s.ok()) return s;
//   ...
//   budget.Give("worker2", n);
//
// Thread-safe.
#ifndef FERRY_RPC_RECEIVE_BUDGET_H_
#define FERRY_RPC_RECEIVE_BUDGET_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ferry {

class ReceiveBudget {
 public:
  struct Options {
    int64_t max_bytes = std::numeric_limits<int64_t>::max();  // All peers.
    int64_t max_bytes_per_peer = std::numeric_limits<int64_t>::max();
  };

  explicit ReceiveBudget(Options options) : options_(options) {}
  ReceiveBudget(const ReceiveBudget&) = delete;
  ReceiveBudget& operator=(const ReceiveBudget&) = delete;

  // Takes `n` (>= 0) more bytes for `peer` if the peer's share and the
  // total both still fit; otherwise takes nothing and returns
  // RESOURCE_EXHAUSTED naming the bound it would cross
  // (--max_stream_mb_per_peer or --grpc_memory_mb) and what is held.
  absl::Status Take(const std::string& peer, int64_t n)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back `n` bytes `peer` took.
  void Give(const std::string& peer, int64_t n) ABSL_LOCKS_EXCLUDED(mu_);

  // OK if one message of `bytes` could ever be held (it fits both bounds
  // when nothing else is held); the Take error otherwise.
  absl::Status CheckFits(int64_t bytes) const;

  int64_t used() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t used_by(const std::string& peer) const ABSL_LOCKS_EXCLUDED(mu_);
  // Peers holding bytes now.
  size_t peers() const ABSL_LOCKS_EXCLUDED(mu_);
  const Options& options() const { return options_; }

 private:
  absl::Status PeerOver(const std::string& peer, int64_t held, int64_t n) const;
  absl::Status TotalOver(int64_t held, int64_t n) const;

  const Options options_;
  mutable absl::Mutex mu_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  // Only peers holding bytes (an entry goes when it reaches 0).
  absl::flat_hash_map<std::string, int64_t> by_peer_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_RPC_RECEIVE_BUDGET_H_
