// The flight recorder: a bounded ring of this process's recent collective
// and point-to-point ops — what each was (group, sequence number, op key,
// op, input and output sizes and dtypes, timeout), how far it got
// (scheduled, started, completed, failed) and when (monotonic and wall
// time of each state), and why it failed. It answers "what was every rank
// doing" after a hang or a mismatch, as PyTorch's flight recorder does
// (TORCH_NCCL_TRACE_BUFFER_SIZE), and its dumps use torch's field names
// where they mean the same (DumpValue), so a reader of one reads the other.
//
//   FlightRecorder recorder({.capacity = 2000, .clock = timers.clock()});
//   uint64_t id = recorder.Record({.group = "world", .key = "world/5",
//                                  .op = "all_reduce", .sequence = 5, …});
//   recorder.Started(id);                 // a peer's message arrived
//   recorder.Ended(id, status);           // completed, or failed with it
//   std::string json = ToJson(DumpValue(recorder.Snapshot(), {...}));
//
// States: scheduled when the op began on this rank; started once a
// message of it from a peer arrived here (at least one other member is in
// it); completed or failed when it ended here. An op that failed before
// any peer's message came stays without a start time — the sign of a peer
// that never joined.
//
// Point-to-point ops (send/recv) are recorded with the same calls, with
// `p2p` set, the peer's group rank in `peer` and their own numbering in
// `p2p_sequence` (collective sequence numbers stay the groups').
//
// Besides the ring, the recorder keeps each group's watermarks (the last
// op scheduled, started and completed, by sequence number), which outlive
// the ring's eviction: `ferryctl status` shows them. Both are bounded
// (capacity entries; kMaxGroups groups).
//
// Thread-safe; each call takes one short lock and never calls out. A
// capacity of 0 keeps no entries (Record returns 0, which every other call
// ignores) but still keeps the watermarks.
#ifndef FERRY_COLLECTIVES_RECORDER_FLIGHT_RECORDER_H_
#define FERRY_COLLECTIVES_RECORDER_FLIGHT_RECORDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

// Default ring size (ferryd --flight_recorder_entries, init(...) in Python).
inline constexpr int64_t kDefaultFlightRecorderEntries = 2000;

// One tensor's dtype and shape, as recorded.
struct TensorSummary {
  std::string dtype;  // "float32"
  std::vector<int64_t> shape;

  friend bool operator==(const TensorSummary& a, const TensorSummary& b) {
    return a.dtype == b.dtype && a.shape == b.shape;
  }
};

// The tensors of a collective's input or output, in order: at most
// kMaxSummarized of them (a nested value's first ones).
inline constexpr size_t kMaxSummarized = 16;
std::vector<TensorSummary> Summarize(const Tensor& t);
std::vector<TensorSummary> Summarize(const std::vector<Tensor>& tensors);
std::vector<TensorSummary> Summarize(const Value& v);
std::vector<TensorSummary> Summarize(const std::vector<Value>& values);
// Results of other kinds (Done, a KJT pair) record no tensors.
template <typename T>
std::vector<TensorSummary> Summarize(const T&) {
  return {};
}

// What is known of an op when it is scheduled.
struct OpRecordSpec {
  std::string group;             // "world", "g0,2#1"
  std::vector<int> group_ranks;  // Global ranks, in group order.
  int group_rank = 0;            // This rank's place in the group.
  std::string key;               // "world/5", "c0,1/t:<tag>"
  std::string op;                // "all_reduce", "send"
  // The group's SPMD sequence number (collective_seq_id); -1 for an op the
  // caller named by a tag.
  int64_t sequence = -1;
  bool p2p = false;
  int peer = -1;              // p2p: the other side's group rank.
  int64_t p2p_sequence = -1;  // p2p: the caller's own numbering.
  std::vector<TensorSummary> inputs;
  absl::Duration timeout = absl::ZeroDuration();
};

enum class OpState { kScheduled, kStarted, kCompleted, kFailed };
// "scheduled", "started", "completed", "failed".
const char* OpStateName(OpState state);

struct OpRecord {
  uint64_t id = 0;  // From 1, in the order ops were recorded.
  OpRecordSpec spec;
  OpState state = OpState::kScheduled;
  std::vector<TensorSummary> outputs;
  // On the recorder's clock (monotonic) and on the wall clock.
  absl::Time scheduled, started, ended;
  absl::Time wall_scheduled, wall_started, wall_ended;
  bool has_started = false;
  std::string error;  // "DEADLINE_EXCEEDED: …" once failed.
};

// A group's watermarks.
struct GroupProgress {
  std::string group;
  std::vector<int> group_ranks;
  // -1: none yet. Tagged ops (no sequence number) do not move them.
  int64_t last_scheduled = -1;
  int64_t last_started = -1;
  int64_t last_completed = -1;  // Completed or failed: over here.
  std::string last_scheduled_op, last_started_op, last_completed_op;
  bool last_failed = false;  // Whether last_completed failed.
};

class FlightRecorder {
 public:
  struct Options {
    int64_t capacity = kDefaultFlightRecorderEntries;
    const Clock* clock = Clock::Real();  // Monotonic: the worker's timers'.
    const Clock* wall = nullptr;         // Null: the system's wall clock.
  };
  // Groups whose watermarks are kept; ops of further groups are recorded
  // in the ring only.
  static constexpr size_t kMaxGroups = 1024;

  explicit FlightRecorder(Options options);

  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  // Records an op scheduled now; returns its id (0 if the ring is off).
  uint64_t Record(OpRecordSpec spec) ABSL_LOCKS_EXCLUDED(mu_);
  // The op's first message from a peer arrived (once; later calls no-ops).
  void Started(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  void SetOutputs(uint64_t id, std::vector<TensorSummary> outputs)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The op ended here: completed (OK) or failed with `status`.
  void Ended(uint64_t id, const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);

  // The entries still in the ring, oldest first.
  std::vector<OpRecord> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);
  // Every tracked group's watermarks, by group name.
  std::vector<GroupProgress> Progress() const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t capacity() const { return capacity_; }
  // Ops recorded since the start (the ring holds the last capacity()).
  uint64_t recorded() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The live entry `id`, or null if it was evicted (or the ring is off).
  OpRecord* Find(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  GroupProgress* ProgressOf(const OpRecordSpec& spec)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Wall() const;

  const int64_t capacity_;
  const Clock* const clock_;
  const Clock* const wall_;

  mutable absl::Mutex mu_;
  std::vector<OpRecord> ring_ ABSL_GUARDED_BY(mu_);  // Slot id % capacity.
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<std::string, GroupProgress> groups_ ABSL_GUARDED_BY(mu_);
};

// Who dumped, and why, for the dump's header.
struct DumpInfo {
  std::string worker;  // "worker2"
  int rank = 0;
  int world_size = 1;
  int64_t pid = 0;
  std::string reason;  // "on demand", or the failure that caused it.
  absl::Time wall_now = absl::UnixEpoch();
  int64_t capacity = 0;
  uint64_t recorded = 0;
};

// The dump: {"version", "pg_config", "pg_status", "entries", …} with
// torch's flight recorder names (version 2.4's) for what means the same,
// and ferry's own beside them (docs/DESIGN.md "Observing a job"; README has an
// example). Times are nanoseconds (wall: since the Unix epoch; "mono_*":
// the worker's monotonic clock, comparable within one process only).
Value DumpValue(const std::vector<OpRecord>& records,
                const std::vector<GroupProgress>& groups, const DumpInfo& info);

// The name torch gives a dump's format version, which DumpValue follows.
inline constexpr char kDumpVersion[] = "2.4";

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_RECORDER_FLIGHT_RECORDER_H_
