#include "collectives/recorder/flight_recorder.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"
#include "rpc/value/dtype.h"

namespace ferry {

namespace {

// The system's wall clock, for the dump's wall times (never for deadlines).
class WallClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

TensorSummary SummaryOf(const Tensor& t) {
  return {std::string(DTypeName(t.dtype())),
          std::vector<int64_t>(t.shape().begin(), t.shape().end())};
}

// Depth-first, so a nested value's tensors come in its own order; stops
// at kMaxSummarized (and never goes deeper than a value may nest).
void Collect(const Value& v, std::vector<TensorSummary>* out) {
  if (out->size() >= kMaxSummarized) return;
  if (v.is_tensor()) {
    out->push_back(SummaryOf(v.as_tensor()));
  } else if (v.is_list()) {
    for (const Value& item : v.as_list()) Collect(item, out);
  } else if (v.is_map()) {
    for (const auto& [key, item] : v.as_map()) Collect(item, out);
  }
}

int64_t Nanos(absl::Time t) { return absl::ToUnixNanos(t); }

Value Sizes(const std::vector<TensorSummary>& tensors) {
  Value::List out;
  for (const TensorSummary& t : tensors) {
    out.push_back(Value(Value::List(t.shape.begin(), t.shape.end())));
  }
  return Value(std::move(out));
}

Value DTypes(const std::vector<TensorSummary>& tensors) {
  Value::List out;
  for (const TensorSummary& t : tensors) out.push_back(Value(t.dtype));
  return Value(std::move(out));
}

Value Ranks(const std::vector<int>& ranks) {
  return Value(Value::List(ranks.begin(), ranks.end()));
}

// One entry, torch's names first.
Value EntryValue(const OpRecord& r, int64_t pg_id) {
  const OpRecordSpec& s = r.spec;
  Value::Map e{
      {"record_id", static_cast<int64_t>(r.id)},
      {"pg_id", pg_id},
      {"process_group", Value(Value::List{s.group, s.group})},
      {"collective_seq_id", s.p2p ? int64_t{-1} : s.sequence},
      {"p2p_seq_id", s.p2p ? s.p2p_sequence : int64_t{-1}},
      {"op_id", static_cast<int64_t>(r.id)},
      {"profiling_name", "ferry:" + s.op},
      {"is_p2p", s.p2p},
      {"input_sizes", Sizes(s.inputs)},
      {"input_dtypes", DTypes(s.inputs)},
      {"output_sizes", Sizes(r.outputs)},
      {"output_dtypes", DTypes(r.outputs)},
      {"state", OpStateName(r.state)},
      {"time_created_ns", Nanos(r.wall_scheduled)},
      {"timeout_ms", absl::ToInt64Milliseconds(s.timeout)},
      {"retired",
       r.state == OpState::kCompleted || r.state == OpState::kFailed},
      {"frames", Value(Value::List{})},
      // ferry's own.
      {"op", s.op},
      {"op_key", s.key},
      {"group_rank", s.group_rank},
      {"mono_created_ns", Nanos(r.scheduled)},
  };
  if (s.p2p) e.emplace("peer", s.peer);
  if (r.has_started) {
    e.emplace("time_discovered_started_ns", Nanos(r.wall_started));
    e.emplace("mono_started_ns", Nanos(r.started));
  }
  if (r.state == OpState::kCompleted || r.state == OpState::kFailed) {
    e.emplace("time_discovered_completed_ns", Nanos(r.wall_ended));
    e.emplace("mono_completed_ns", Nanos(r.ended));
    e.emplace("duration_ms", absl::ToDoubleMilliseconds(r.ended - r.scheduled));
  }
  if (!r.error.empty()) e.emplace("error", r.error);
  return Value(std::move(e));
}

Value StatusValue(const GroupProgress& g) {
  return Value(Value::Map{
      {"last_enqueued_collective", g.last_scheduled},
      {"last_started_collective", g.last_started},
      {"last_completed_collective", g.last_completed},
      {"last_enqueued_work", g.last_scheduled_op},
      {"last_started_work", g.last_started_op},
      {"last_completed_work", g.last_completed_op},
      {"last_completed_failed", g.last_failed},
  });
}

}  // namespace

std::vector<TensorSummary> Summarize(const Tensor& t) { return {SummaryOf(t)}; }

std::vector<TensorSummary> Summarize(const std::vector<Tensor>& tensors) {
  std::vector<TensorSummary> out;
  for (const Tensor& t : tensors) {
    if (out.size() >= kMaxSummarized) break;
    out.push_back(SummaryOf(t));
  }
  return out;
}

std::vector<TensorSummary> Summarize(const Value& v) {
  std::vector<TensorSummary> out;
  Collect(v, &out);
  return out;
}

std::vector<TensorSummary> Summarize(const std::vector<Value>& values) {
  std::vector<TensorSummary> out;
  for (const Value& v : values) Collect(v, &out);
  return out;
}

const char* OpStateName(OpState state) {
  switch (state) {
    case OpState::kScheduled:
      return "scheduled";
    case OpState::kStarted:
      return "started";
    case OpState::kCompleted:
      return "completed";
    case OpState::kFailed:
      return "failed";
  }
  return "unknown";
}

FlightRecorder::FlightRecorder(Options options)
    : capacity_(std::max<int64_t>(options.capacity, 0)),
      clock_(options.clock),
      wall_(options.wall) {}

absl::Time FlightRecorder::Wall() const {
  static const WallClock* system = new WallClock();
  return (wall_ != nullptr ? wall_ : system)->Now();
}

GroupProgress* FlightRecorder::ProgressOf(const OpRecordSpec& spec) {
  // Tagged and point-to-point ops have no place in the group's sequence.
  if (spec.sequence < 0 || spec.p2p) return nullptr;
  auto it = groups_.find(spec.group);
  if (it != groups_.end()) return &it->second;
  if (groups_.size() >= kMaxGroups) return nullptr;
  GroupProgress& g = groups_[spec.group];
  g.group = spec.group;
  g.group_ranks = spec.group_ranks;
  return &g;
}

uint64_t FlightRecorder::Record(OpRecordSpec spec) {
  const absl::Time now = clock_->Now(), wall = Wall();
  absl::MutexLock lock(&mu_);
  if (GroupProgress* g = ProgressOf(spec);
      g != nullptr && spec.sequence > g->last_scheduled) {
    g->last_scheduled = spec.sequence;
    g->last_scheduled_op = spec.op;
  }
  if (capacity_ == 0) return 0;
  const uint64_t id = next_id_++;
  const size_t slot = (id - 1) % capacity_;
  // Grown as used, so a large ring costs nothing until it fills.
  if (slot >= ring_.size()) {
    ring_.resize(std::min<size_t>(
        capacity_, std::max<size_t>(slot + 1, 2 * ring_.size())));
  }
  OpRecord& r = ring_[slot];
  r = OpRecord();
  r.id = id;
  r.spec = std::move(spec);
  r.scheduled = now;
  r.wall_scheduled = wall;
  return id;
}

OpRecord* FlightRecorder::Find(uint64_t id) {
  if (id == 0 || capacity_ == 0) return nullptr;
  const size_t slot = (id - 1) % capacity_;
  if (slot >= ring_.size() || ring_[slot].id != id) return nullptr;
  return &ring_[slot];
}

void FlightRecorder::Started(uint64_t id) {
  if (id == 0) return;
  const absl::Time now = clock_->Now(), wall = Wall();
  absl::MutexLock lock(&mu_);
  OpRecord* r = Find(id);
  if (r == nullptr || r->has_started) return;
  r->has_started = true;
  r->started = now;
  r->wall_started = wall;
  if (r->state == OpState::kScheduled) r->state = OpState::kStarted;
  if (GroupProgress* g = ProgressOf(r->spec);
      g != nullptr && r->spec.sequence > g->last_started) {
    g->last_started = r->spec.sequence;
    g->last_started_op = r->spec.op;
  }
}

void FlightRecorder::SetOutputs(uint64_t id,
                                std::vector<TensorSummary> outputs) {
  if (id == 0) return;
  absl::MutexLock lock(&mu_);
  if (OpRecord* r = Find(id)) r->outputs = std::move(outputs);
}

void FlightRecorder::Ended(uint64_t id, const absl::Status& status) {
  if (id == 0) return;
  const absl::Time now = clock_->Now(), wall = Wall();
  absl::MutexLock lock(&mu_);
  OpRecord* r = Find(id);
  if (r == nullptr) return;
  if (r->state == OpState::kCompleted || r->state == OpState::kFailed) return;
  r->state = status.ok() ? OpState::kCompleted : OpState::kFailed;
  r->ended = now;
  r->wall_ended = wall;
  if (!status.ok()) {
    r->error =
        absl::StrCat(StatusCodeName(status.code()), ": ", status.message());
  }
  if (GroupProgress* g = ProgressOf(r->spec);
      g != nullptr && r->spec.sequence > g->last_completed) {
    g->last_completed = r->spec.sequence;
    g->last_completed_op = r->spec.op;
    g->last_failed = !status.ok();
  }
}

std::vector<OpRecord> FlightRecorder::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<OpRecord> out;
  if (capacity_ == 0 || next_id_ == 1) return out;
  const uint64_t last = next_id_ - 1;
  const uint64_t first =
      last > static_cast<uint64_t>(capacity_) ? last - capacity_ + 1 : 1;
  out.reserve(last - first + 1);
  for (uint64_t id = first; id <= last; ++id) {
    const size_t slot = (id - 1) % capacity_;
    if (slot < ring_.size() && ring_[slot].id == id) out.push_back(ring_[slot]);
  }
  return out;
}

std::vector<GroupProgress> FlightRecorder::Progress() const {
  absl::MutexLock lock(&mu_);
  std::vector<GroupProgress> out;
  for (const auto& [name, g] : groups_) out.push_back(g);
  std::sort(out.begin(), out.end(),
            [](const GroupProgress& a, const GroupProgress& b) {
              return a.group < b.group;
            });
  return out;
}

uint64_t FlightRecorder::recorded() const {
  absl::MutexLock lock(&mu_);
  return next_id_ - 1;
}

Value DumpValue(const std::vector<OpRecord>& records,
                const std::vector<GroupProgress>& groups,
                const DumpInfo& info) {
  Value::Map pg_config, pg_status;
  absl::flat_hash_map<std::string, int64_t> pg_ids;
  auto pg_id = [&](const std::string& group, const std::vector<int>& ranks) {
    auto [it, added] = pg_ids.emplace(group, pg_ids.size());
    if (added) {
      pg_config.emplace(group, Value(Value::Map{{"name", group},
                                                {"desc", group},
                                                {"ranks", Ranks(ranks)}}));
    }
    return it->second;
  };
  for (const GroupProgress& g : groups) {
    pg_id(g.group, g.group_ranks);
    pg_status.emplace(g.group, StatusValue(g));
  }
  Value::List entries;
  for (const OpRecord& r : records) {
    entries.push_back(EntryValue(r, pg_id(r.spec.group, r.spec.group_ranks)));
  }
  return Value(Value::Map{
      {"version", kDumpVersion},
      {"ferry_dump", int64_t{1}},
      {"worker", info.worker},
      {"rank", info.rank},
      {"world_size", info.world_size},
      {"pid", info.pid},
      {"reason", info.reason},
      {"time_dumped_ns", Nanos(info.wall_now)},
      {"capacity", info.capacity},
      {"recorded", static_cast<int64_t>(info.recorded)},
      {"pg_config", Value(std::move(pg_config))},
      {"pg_status", Value(std::move(pg_status))},
      {"entries", Value(std::move(entries))},
  });
}

}  // namespace ferry
