// How a worker's collectives are configured. A plain struct, so the public
// API can carry it without pulling in the transport. Every worker of a job
// must have the same: ranks choose their schedules by it before they
// exchange anything, and ranks on different schedules wait for messages
// that never come (until the op's deadline).
#ifndef FERRY_COLLECTIVES_TRANSPORT_CONFIG_H_
#define FERRY_COLLECTIVES_TRANSPORT_CONFIG_H_

#include <cstdint>
#include <string>

namespace ferry {

// The mailbox's bounds and the longest client op are not here: they are
// the worker's Limits (max_mailbox_bytes, mailbox_ttl_ms,
// max_collective_timeout_ms), like every bound a peer meets.
struct CollectiveConfig {
  // Frame size of streamed messages: a 1 MiB tensor and the header of its
  // message fit one.
  int64_t chunk_bytes = (1 << 20) + (64 << 10);
  // Messages of one frame and at most this many payload bytes travel on
  // the standing stream to their receiver
  // (collectives/transport/standing_stream.h), larger ones on streams of their
  // own; 0: every message on its own. Up to a 1 MiB tensor's message: its own
  // stream cost an all_to_all of 1 MiB per rank on 4 ranks 7% more instructions
  // and 10-30% more time (BENCHMARKS.md); a larger message holds the small ones
  // behind it on the stream for longer than a stream of its own costs.
  int64_t standing_bytes = (1 << 20) + (64 << 10);
  // Per-rank payloads up to this size use direct exchanges (one round);
  // larger ones use rings (all_gather, reduce_scatter, all_reduce) or a
  // tree (broadcast). Chosen with `ferry_bench --direct_bytes` on 2 and 4
  // ranks: at 1 MiB direct was as fast or faster (all_gather 3.3 vs 4.7
  // ms, broadcast 1.2 vs 1.5 ms on 4 ranks); at 16 MiB the ring halved
  // all_reduce (39 vs 74 ms). BENCHMARKS.md has the figures.
  int64_t direct_bytes = 1 << 20;
  // A direct all_reduce of at least this many bytes per rank, on three
  // ranks or more, is split: each rank sends each other rank one n-th of
  // its input, reduces the n-th it owns and sends that to everyone — two
  // rounds moving 2(n-1)/n of the input per rank instead of one moving
  // n-1 times it. Below it, one round of whole inputs is quicker.
  int64_t split_bytes = 256 << 10;
  // Broadcasts among at least this many ranks join and travel a binomial
  // tree (collectives/algorithms/tree.h): O(log n) messages per rank; among
  // fewer, every rank joins at the source, which sends small values directly.
  int tree_world = 8;
  // All-to-alls among at least this many ranks first gather every rank's
  // header in ceil(log2 n) rounds (collectives/algorithms/gather_all.h), saying
  // whether its input is at most direct_bytes: if every rank's is, the
  // blocks travel Bruck's log2(n) rounds
  // (collectives/algorithms/bruck_exchange.h) instead of n - 1 messages per
  // rank; if not, the one-round direct exchange follows. Among fewer, only the
  // direct exchange. 64: below it the rounds cost more than they save where it
  // was measured (in one process on 2 cores, 8 ranks: 8 B 1.11x, 4 MiB 1.15x
  // the direct exchange's time; 16 ranks: 64 B 0.82x, 2 MiB 1.6x — a large
  // input's blocks then arrive before they are asked for, miss their landings
  // and are copied), while among 64 ranks and more the n² messages of
  // the direct exchange are what an op costs (BENCHMARKS.md, "Scale").
  int gather_world = 64;
  // A ring all_reduce of more than this many bytes per rank is cut into
  // pieces of about this size (kMaxRingPieces at most), each its own ring,
  // so one piece's transfer overlaps another's reduction. 0: one ring.
  int64_t ring_piece_bytes = 0;
  // The flight recorder (flight_recorder.h): how many recent ops it keeps
  // (0: none; the groups' watermarks are kept anyway), and where the
  // worker writes its dump when an op fails or times out (empty: nowhere;
  // `ferryctl up` gives its job directory's flight_recorder/).
  int64_t flight_recorder_entries = 2000;
  std::string dump_dir;
};

// Most pieces of one pipelined ring (bounds the steps a peer may send).
inline constexpr int kMaxRingPieces = 8;

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TRANSPORT_CONFIG_H_
