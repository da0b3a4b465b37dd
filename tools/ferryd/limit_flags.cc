#include "tools/ferryd/limit_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

namespace {

constexpr ferry::Limits kDefaults{};
constexpr int64_t kMiB = ferry::Limits::kMiB;

}  // namespace

ABSL_FLAG(int64_t, max_message_mb, kDefaults.max_message_bytes / kMiB,
          "largest gRPC message received or sent, in MiB");
ABSL_FLAG(int64_t, max_items, kDefaults.max_items,
          "most values (any kind, any depth) in one message or call");
ABSL_FLAG(int64_t, max_string_mb, kDefaults.max_string_bytes / kMiB,
          "longest string or bytes value, in MiB");
ABSL_FLAG(int64_t, max_args, kDefaults.max_args, "most arguments of one call");
ABSL_FLAG(int64_t, max_tensor_rank, kDefaults.max_tensor_rank,
          "most dimensions of a tensor");
ABSL_FLAG(int64_t, max_tensor_dim, kDefaults.max_tensor_dim,
          "largest tensor dimension (also when another dimension is 0)");
ABSL_FLAG(int64_t, max_alloc_mb, kDefaults.max_alloc_bytes / kMiB,
          "MiB one call may make the worker allocate (builtins included)");
ABSL_FLAG(int64_t, max_inflight_per_peer, kDefaults.max_inflight_per_peer,
          "calls one peer may have here: executing, queued, or answered "
          "with a reply not yet written to its connection");
ABSL_FLAG(int64_t, max_queued_tasks, kDefaults.max_queued_tasks,
          "tasks that may wait for an executor thread");
ABSL_FLAG(int64_t, max_mailbox_mb, kDefaults.max_mailbox_bytes / kMiB,
          "MiB held for collective messages nobody asked for yet (and the "
          "largest such message)");
ABSL_FLAG(int64_t, mailbox_ttl_ms, kDefaults.mailbox_ttl_ms,
          "how long a message for a collective nobody runs here is kept");
ABSL_FLAG(int64_t, max_collective_timeout_ms,
          kDefaults.max_collective_timeout_ms,
          "longest timeout a client may give a collective");
ABSL_FLAG(int64_t, max_held_calls, kDefaults.max_held_calls,
          "rank 0: joins and barrier waits held at once (heartbeat polls "
          "are not counted)");
ABSL_FLAG(int64_t, max_clients, kDefaults.max_clients,
          "rank 0: clients registered at once");
ABSL_FLAG(int64_t, max_clients_per_peer, kDefaults.max_clients_per_peer,
          "rank 0: live clients registered over one connection");
ABSL_FLAG(int64_t, max_barriers, kDefaults.max_barriers,
          "rank 0: barrier names alive at once");
ABSL_FLAG(int64_t, max_concurrent_streams, kDefaults.max_concurrent_streams,
          "concurrent gRPC streams per connection");
ABSL_FLAG(int64_t, grpc_memory_mb, kDefaults.grpc_memory_bytes / kMiB,
          "MiB gRPC may use for its buffers (a resource quota)");
ABSL_FLAG(int64_t, max_stream_mb_per_peer,
          kDefaults.max_stream_bytes_per_peer / kMiB,
          "MiB of streamed requests one peer may have arriving or held here "
          "(all peers together: --grpc_memory_mb)");
ABSL_FLAG(int64_t, stream_ttl_ms, kDefaults.stream_ttl_ms,
          "how long a streamed request may take to arrive whole");
ABSL_FLAG(int64_t, max_reply_mb_per_peer,
          kDefaults.max_reply_bytes_per_peer / kMiB,
          "MiB of replies not yet written to one peer's connection held here "
          "(all peers together: --grpc_memory_mb)");
ABSL_FLAG(int64_t, reply_ttl_ms, kDefaults.reply_ttl_ms,
          "how long a reply may take to leave before its call is cancelled");
ABSL_FLAG(int64_t, max_open_streams, kDefaults.max_open_streams,
          "call and collective streams open at once, all connections "
          "together");
ABSL_FLAG(int64_t, max_open_streams_per_peer,
          kDefaults.max_open_streams_per_peer,
          "call and collective streams one peer may have open here at once");
ABSL_FLAG(int64_t, max_rref_mb_per_peer,
          kDefaults.max_rref_bytes_per_peer / kMiB,
          "MiB of values one peer's remote() calls may make this worker keep "
          "as rrefs (all peers together: --max_rref_mb)");
ABSL_FLAG(int64_t, max_rref_mb, kDefaults.max_rref_bytes / kMiB,
          "MiB of values all peers' remote() calls may make this worker keep "
          "as rrefs");
ABSL_FLAG(int64_t, max_prejoin_calls, kDefaults.max_prejoin_calls,
          "calls that may wait at once for this worker to join the job");
ABSL_FLAG(int64_t, prejoin_wait_ms, kDefaults.prejoin_wait_ms,
          "how long a call may wait for this worker to join the job");

namespace ferry {

namespace {

// The flag's value if within [1, max]; INVALID_ARGUMENT naming it if not.
absl::StatusOr<int64_t> Positive(const absl::Flag<int64_t>& flag,
                                 absl::string_view name, int64_t max) {
  const int64_t v = absl::GetFlag(flag);
  if (v < 1 || v > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", v, ": must be between 1 and ", max));
  }
  return v;
}

#define FERRY_LIMIT_FLAG_(field, name, max, scale)                    \
  do {                                                                \
    absl::StatusOr<int64_t> v = Positive(FLAGS_##name, #name, (max)); \
    if (!v.ok()) return v.status();                                   \
    limits.field = static_cast<decltype(limits.field)>(*v * (scale)); \
  } while (false)

}  // namespace

absl::StatusOr<Limits> LimitsFromFlags() {
  constexpr int64_t kAny = INT64_MAX;
  constexpr int64_t kMaxMiB = int64_t{1} << 40;  // So bytes fit int64.
  Limits limits;
  FERRY_LIMIT_FLAG_(max_message_bytes, max_message_mb, 2047, kMiB);
  FERRY_LIMIT_FLAG_(max_items, max_items, kAny, 1);
  FERRY_LIMIT_FLAG_(max_string_bytes, max_string_mb, kMaxMiB, kMiB);
  FERRY_LIMIT_FLAG_(max_args, max_args, kAny, 1);
  FERRY_LIMIT_FLAG_(max_tensor_rank, max_tensor_rank, 1 << 20, 1);
  FERRY_LIMIT_FLAG_(max_tensor_dim, max_tensor_dim, kAny, 1);
  FERRY_LIMIT_FLAG_(max_alloc_bytes, max_alloc_mb, kMaxMiB, kMiB);
  FERRY_LIMIT_FLAG_(max_inflight_per_peer, max_inflight_per_peer, kAny, 1);
  FERRY_LIMIT_FLAG_(max_queued_tasks, max_queued_tasks, kAny, 1);
  FERRY_LIMIT_FLAG_(max_mailbox_bytes, max_mailbox_mb, kMaxMiB, kMiB);
  FERRY_LIMIT_FLAG_(mailbox_ttl_ms, mailbox_ttl_ms, kAny, 1);
  FERRY_LIMIT_FLAG_(max_collective_timeout_ms, max_collective_timeout_ms, kAny,
                    1);
  FERRY_LIMIT_FLAG_(max_held_calls, max_held_calls, kAny, 1);
  FERRY_LIMIT_FLAG_(max_clients, max_clients, kAny, 1);
  FERRY_LIMIT_FLAG_(max_clients_per_peer, max_clients_per_peer, kAny, 1);
  FERRY_LIMIT_FLAG_(max_barriers, max_barriers, kAny, 1);
  FERRY_LIMIT_FLAG_(max_concurrent_streams, max_concurrent_streams, INT32_MAX,
                    1);
  FERRY_LIMIT_FLAG_(grpc_memory_bytes, grpc_memory_mb, kMaxMiB, kMiB);
  FERRY_LIMIT_FLAG_(max_stream_bytes_per_peer, max_stream_mb_per_peer, kMaxMiB,
                    kMiB);
  FERRY_LIMIT_FLAG_(stream_ttl_ms, stream_ttl_ms, kAny, 1);
  FERRY_LIMIT_FLAG_(max_reply_bytes_per_peer, max_reply_mb_per_peer, kMaxMiB,
                    kMiB);
  FERRY_LIMIT_FLAG_(reply_ttl_ms, reply_ttl_ms, kAny, 1);
  FERRY_LIMIT_FLAG_(max_open_streams, max_open_streams, kAny, 1);
  FERRY_LIMIT_FLAG_(max_open_streams_per_peer, max_open_streams_per_peer, kAny,
                    1);
  FERRY_LIMIT_FLAG_(max_rref_bytes_per_peer, max_rref_mb_per_peer, kMaxMiB,
                    kMiB);
  FERRY_LIMIT_FLAG_(max_rref_bytes, max_rref_mb, kMaxMiB, kMiB);
  FERRY_LIMIT_FLAG_(max_prejoin_calls, max_prejoin_calls, kAny, 1);
  FERRY_LIMIT_FLAG_(prejoin_wait_ms, prejoin_wait_ms, kAny, 1);
  return limits;
}

}  // namespace ferry
