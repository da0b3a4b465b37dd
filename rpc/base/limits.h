// Limits: what one peer may make a worker hold or do. Every bound a
// decoder, builtin, service or mailbox enforces comes from here, so one
// struct says what a worker accepts (ferryd has a flag per field; `ferryctl
// status` shows them). Defaults are chosen so honest work never meets them
// (a 1 GiB tensor still travels) while one peer can make a worker hold at
// most a small bounded multiple of what it sent.
//
// An input over a limit is answered RESOURCE_EXHAUSTED (too much of
// something the worker would hold) or INVALID_ARGUMENT (a shape or nesting
// no honest input has), and the message names the flag that sets it:
//
//   RESOURCE_EXHAUSTED: worker1: zeros: 64 GiB would be allocated, over the
//   limit of 2 GiB (--max_alloc_mb=2048)
#ifndef FERRY_RPC_BASE_LIMITS_H_
#define FERRY_RPC_BASE_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

struct Limits {
  static constexpr int64_t kMiB = int64_t{1} << 20;

  // ---- Messages and values (decoders) ----
  // Largest gRPC message received or sent (--max_message_mb).
  int64_t max_message_bytes = 1100 * kMiB;
  // Values (of any kind, at any depth) in one message or call
  // (--max_items): bounds what parsing a message may build.
  int64_t max_items = int64_t{1} << 20;
  // Longest string or bytes value (--max_string_mb).
  int64_t max_string_bytes = 1024 * kMiB;
  // Arguments of one call (--max_args).
  int64_t max_args = 4096;
  // Tensor rank (--max_tensor_rank) and any one dimension, also when
  // another dimension is 0 (--max_tensor_dim).
  int max_tensor_rank = 32;
  int64_t max_tensor_dim = int64_t{1} << 40;

  // ---- Work ----
  // Bytes one call may make the worker allocate for its result and
  // temporaries, builtins included (--max_alloc_mb).
  int64_t max_alloc_bytes = 2048 * kMiB;
  // Calls one peer may have here (--max_inflight_per_peer): executing,
  // queued, or answered with a reply not yet written to its connection.
  int64_t max_inflight_per_peer = 1024;
  // Tasks waiting for an executor thread (--max_queued_tasks).
  int64_t max_queued_tasks = 65536;

  // ---- Collectives ----
  // Bytes held for collective messages nobody asked for yet, and so the
  // largest single message (--max_mailbox_mb).
  int64_t max_mailbox_bytes = 1024 * kMiB;
  // How long a message for an op nobody runs here is kept
  // (--mailbox_ttl_ms).
  int64_t mailbox_ttl_ms = 60000;
  // Longest timeout a client may ask a collective to wait
  // (--max_collective_timeout_ms).
  int64_t max_collective_timeout_ms = 3600 * 1000;

  // ---- Membership (the master) ----
  // Rendezvous calls the master holds at once (--max_held_calls), clients
  // registered (--max_clients), barrier names alive (--max_barriers).
  int64_t max_held_calls = 4096;
  int64_t max_clients = 4096;
  int64_t max_barriers = 1024;
  // Live clients registered over one connection (--max_clients_per_peer):
  // one token holder cannot take every client slot from one connection.
  int64_t max_clients_per_peer = 16;

  // ---- gRPC server ----
  // Concurrent streams per connection (--max_concurrent_streams) and the
  // memory gRPC may use for buffers (--grpc_memory_mb).
  int64_t max_concurrent_streams = 1024;
  int64_t grpc_memory_bytes = 2048 * kMiB;

  // ---- What a peer may hold open ----
  // Bytes of streamed requests (rpc/call_stream_service.h) one peer may
  // have arriving, or held by the values decoded from them, here at once
  // (--max_stream_mb_per_peer); all peers together share --grpc_memory_mb.
  int64_t max_stream_bytes_per_peer = 1100 * kMiB;
  // How long a streamed request may take to arrive whole, counted from
  // its stream's start (--stream_ttl_ms).
  int64_t stream_ttl_ms = 60000;
  // Bytes of replies answered but not yet written to their caller's
  // connection one peer may have here (--max_reply_mb_per_peer); all
  // peers together share --grpc_memory_mb.
  int64_t max_reply_bytes_per_peer = 1100 * kMiB;
  // How long a reply may take to leave, from its answer: past it the call
  // is cancelled and its bytes given back (--reply_ttl_ms). A caller that
  // stops reading holds nothing for longer.
  int64_t reply_ttl_ms = 60000;
  // Streams (CallStream, Collectives/Exchange) open here at once, across
  // all connections (--max_open_streams), and of those one peer's (the
  // node its credential proves, or its connection), so that a few peers
  // holding streams open (a streamed sleep_ms holds one as long as it
  // asks) cannot take every stream (--max_open_streams_per_peer).
  int64_t max_open_streams = 4096;
  int64_t max_open_streams_per_peer = 1024;
  // Bytes of the values one peer's remote() calls make this worker keep
  // as RRefs (--max_rref_mb_per_peer), and all peers' together
  // (--max_rref_mb): charged to the RRef's creator when its value is
  // stored, given back when the value is freed (its last copy deleted,
  // its holders' leases expired or their nodes gone).
  int64_t max_rref_bytes_per_peer = 1024 * kMiB;
  int64_t max_rref_bytes = 4096 * kMiB;
  // Calls that may wait at once for this worker to join the job (parked
  // until it formed, or waiting for the job's credentials)
  // (--max_prejoin_calls), and how long each may wait (--prejoin_wait_ms).
  int64_t max_prejoin_calls = 256;
  int64_t prejoin_wait_ms = 5000;
};

// A process-wide `Limits{}` (the defaults), for decoders and functions
// whose caller passes no limits of its own.
const Limits& DefaultLimits();

}  // namespace ferry

#endif  // FERRY_RPC_BASE_LIMITS_H_
