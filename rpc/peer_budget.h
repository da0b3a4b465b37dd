// PeerBudget: what peers make this worker hold, counted per peer and in
// all, so one peer cannot take what every other caller needs. One class
// for every kind of held bytes or things, each with its own budget and
// flags:
//
//   - requests arriving as streams (rpc/chunked_message.h) and the values
//     decoded from them (which reference their buffers): at most
//     --max_stream_mb_per_peer for one peer, --grpc_memory_mb in all
//     (they are buffered outside gRPC's own memory quota). Bytes are taken
//     as a stream's buffer grows with what actually arrived, not as its
//     head announces (ChunkAssembler), and given back when it is freed;
//   - replies answered but not yet written to their caller's connection
//     (rpc/call_service.h): at most --max_reply_mb_per_peer for one peer,
//     --grpc_memory_mb in all, taken when a reply is handed to gRPC and
//     given back once it was written or its call ended;
//   - values kept as RRefs for other nodes' remote() calls
//     (rref/owner_table.h): at most --max_rref_mb_per_peer for one
//     creator, --max_rref_mb in all, taken when the value is stored and
//     given back when it is freed;
//   - streams open (call streams and collective Exchange streams, counted,
//     not in bytes): at most --max_open_streams_per_peer for one peer,
//     --max_open_streams in all (OpenStreamsBudget), taken once the
//     stream's caller is known and given back when the stream ends.
//
// A peer is whoever a call proved it is: the node its credential names
// ("worker2", "client3"), or, for a caller that presented none, its
// connection ("the caller at ipv4:127.0.0.1:40312") or claimed node.
//
//   PeerBudget budget({.max_bytes = 2 << 30, .max_bytes_per_peer = 1 << 30});
//   if (absl::Status s = budget.Take("worker2", n); !s.ok()) return s;
//   ...
//   budget.Give("worker2", n);
//
// Thread-safe.
#ifndef FERRY_RPC_PEER_BUDGET_H_
#define FERRY_RPC_PEER_BUDGET_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "rpc/base/limits.h"

namespace ferry {

class PeerBudget {
 public:
  struct Options {
    // All peers, and one peer: bytes, or things where `unit` is set.
    int64_t max_bytes = std::numeric_limits<int64_t>::max();
    int64_t max_bytes_per_peer = std::numeric_limits<int64_t>::max();
    // What the bytes are, for errors ("streamed requests", "replies not
    // yet sent"), and the flags (without "--", in MiB) of the two bounds.
    std::string what = "streamed requests";
    // Empty: bytes are counted. Otherwise the things counted, plural
    // ("streams"): amounts read "3 streams", the flags are in units, and
    // `what` says how they are held ("streams open").
    std::string unit;
    std::string peer_flag = "max_stream_mb_per_peer";
    std::string total_flag = "grpc_memory_mb";
  };

  explicit PeerBudget(Options options) : options_(std::move(options)) {}
  PeerBudget(const PeerBudget&) = delete;
  PeerBudget& operator=(const PeerBudget&) = delete;

  // Takes `n` (>= 0) more bytes for `peer` if the peer's share and the
  // total both still fit; otherwise takes nothing and returns
  // RESOURCE_EXHAUSTED naming the peer, the bound it would cross (its
  // flag) and what is held.
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
  // "64 MiB" or "3 streams"; a bound as its flag's value.
  std::string Amount(int64_t n) const;
  int64_t FlagValue(int64_t max) const;
  absl::Status TotalOver(int64_t held, int64_t n) const;

  const Options options_;
  mutable absl::Mutex mu_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  // Only peers holding bytes (an entry goes when it reaches 0).
  absl::flat_hash_map<std::string, int64_t> by_peer_ ABSL_GUARDED_BY(mu_);
};

// The budget of streams open here, shared by every streaming service
// (CallStream, Collectives/Exchange): --max_open_streams in all,
// --max_open_streams_per_peer for one peer.
std::shared_ptr<PeerBudget> OpenStreamsBudget(const Limits& limits);

}  // namespace ferry

#endif  // FERRY_RPC_PEER_BUDGET_H_
