#include "rpc/base/limits.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rpc/base/limit_errors.h"

namespace ferry {

std::vector<std::pair<std::string, int64_t>> Limits::AsFlags() const {
  return {
      {"max_message_mb", max_message_bytes / kMiB},
      {"max_items", max_items},
      {"max_string_mb", max_string_bytes / kMiB},
      {"max_args", max_args},
      {"max_tensor_rank", max_tensor_rank},
      {"max_tensor_dim", max_tensor_dim},
      {"max_alloc_mb", max_alloc_bytes / kMiB},
      {"max_inflight_per_peer", max_inflight_per_peer},
      {"max_queued_tasks", max_queued_tasks},
      {"max_mailbox_mb", max_mailbox_bytes / kMiB},
      {"mailbox_ttl_ms", mailbox_ttl_ms},
      {"max_collective_timeout_ms", max_collective_timeout_ms},
      {"max_held_calls", max_held_calls},
      {"max_clients", max_clients},
      {"max_clients_per_peer", max_clients_per_peer},
      {"max_barriers", max_barriers},
      {"max_concurrent_streams", max_concurrent_streams},
      {"grpc_memory_mb", grpc_memory_bytes / kMiB},
      {"max_stream_mb_per_peer", max_stream_bytes_per_peer / kMiB},
      {"stream_ttl_ms", stream_ttl_ms},
      {"max_open_streams", max_open_streams},
      {"max_prejoin_calls", max_prejoin_calls},
      {"prejoin_wait_ms", prejoin_wait_ms},
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
