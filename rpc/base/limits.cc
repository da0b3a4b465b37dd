#include "rpc/base/limits.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rpc/base/limit_errors.h"

namespace ferry {

std::vector<std::pair<std::string, int64_t>> LimitFlags(const Limits& l) {
  return {
      {"max_message_mb", l.max_message_bytes / Limits::kMiB},
      {"max_items", l.max_items},
      {"max_string_mb", l.max_string_bytes / Limits::kMiB},
      {"max_args", l.max_args},
      {"max_tensor_rank", l.max_tensor_rank},
      {"max_tensor_dim", l.max_tensor_dim},
      {"max_alloc_mb", l.max_alloc_bytes / Limits::kMiB},
      {"max_inflight_per_peer", l.max_inflight_per_peer},
      {"max_queued_tasks", l.max_queued_tasks},
      {"max_mailbox_mb", l.max_mailbox_bytes / Limits::kMiB},
      {"mailbox_ttl_ms", l.mailbox_ttl_ms},
      {"max_collective_timeout_ms", l.max_collective_timeout_ms},
      {"max_held_calls", l.max_held_calls},
      {"max_clients", l.max_clients},
      {"max_clients_per_peer", l.max_clients_per_peer},
      {"max_barriers", l.max_barriers},
      {"max_concurrent_streams", l.max_concurrent_streams},
      {"grpc_memory_mb", l.grpc_memory_bytes / Limits::kMiB},
      {"max_stream_mb_per_peer", l.max_stream_bytes_per_peer / Limits::kMiB},
      {"stream_ttl_ms", l.stream_ttl_ms},
      {"max_reply_mb_per_peer", l.max_reply_bytes_per_peer / Limits::kMiB},
      {"reply_ttl_ms", l.reply_ttl_ms},
      {"max_open_streams", l.max_open_streams},
      {"max_open_streams_per_peer", l.max_open_streams_per_peer},
      {"max_rref_mb_per_peer", l.max_rref_bytes_per_peer / Limits::kMiB},
      {"max_rref_mb", l.max_rref_bytes / Limits::kMiB},
      {"max_prejoin_calls", l.max_prejoin_calls},
      {"prejoin_wait_ms", l.prejoin_wait_ms},
  };
}

const Limits& DefaultLimits() {
  static const Limits* const limits = new Limits();
  return *limits;
}

std::string LimitNote(absl::string_view limit, absl::string_view flag,
                      int64_t flag_value) {
  return absl::StrCat("over the limit of ", limit, " (--", flag, "=",
                      flag_value, ")");
}

absl::Status OverLimit(absl::string_view what, absl::string_view limit,
                       absl::string_view flag, int64_t flag_value) {
  return absl::ResourceExhaustedError(
      absl::StrCat(what, ", ", LimitNote(limit, flag, flag_value)));
}

std::string HumanBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B",   "KiB", "MiB", "GiB",
                                           "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while ((v >= 1024 || v <= -1024) && unit < 6) {
    v /= 1024;
    ++unit;
  }
  if (unit == 0) return absl::StrCat(bytes, " B");
  return absl::StrFormat("%.4g %s", v, kUnits[unit]);
}

}  // namespace ferry
