// The flight recorder alone: the ring's bound and eviction, the states and
// their times, the groups' watermarks, and the dump's fields (torch's names).
#include "collectives/recorder/flight_recorder.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ManualClock;

OpRecordSpec AllReduce(int64_t seq, std::string group = "world") {
  return {.group = group,
          .group_ranks = {0, 1, 2},
          .group_rank = 1,
          .key = absl::StrCat(group, "/", seq),
          .op = "all_reduce",
          .sequence = seq,
          .inputs = {{"float32", {2, 2}}},
          .timeout = absl::Seconds(60)};
}

class FlightRecorderTest : public ::testing::Test {
 protected:
  FlightRecorder Make(int64_t capacity) {
    return FlightRecorder(
        {.capacity = capacity, .clock = &clock_, .wall = &wall_});
  }
  ManualClock clock_{absl::FromUnixSeconds(1000)};
  ManualClock wall_{absl::FromUnixSeconds(1'700'000'000)};
};

TEST_F(FlightRecorderTest, KeepsTheLastCapacityEntriesInOrder) {
  FlightRecorder r = Make(3);
  for (int64_t seq = 0; seq < 5; ++seq) r.Record(AllReduce(seq));
  std::vector<OpRecord> kept = r.Snapshot();
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[0].id, 3u);
  EXPECT_EQ(kept[0].spec.sequence, 2);
  EXPECT_EQ(kept[2].id, 5u);
  EXPECT_EQ(kept[2].spec.key, "world/4");
  EXPECT_EQ(r.recorded(), 5u);
}

TEST_F(FlightRecorderTest, UpdatesOfEvictedEntriesAreIgnored) {
  FlightRecorder r = Make(2);
  const uint64_t first = r.Record(AllReduce(0));
  r.Record(AllReduce(1));
  r.Record(AllReduce(2));  // Evicts the first.
  r.Started(first);
  r.Ended(first, absl::InternalError("late"));
  for (const OpRecord& e : r.Snapshot()) {
    EXPECT_NE(e.id, first);
    EXPECT_EQ(e.state, OpState::kScheduled);
  }
}

TEST_F(FlightRecorderTest, StatesAndTheirTimes) {
  FlightRecorder r = Make(10);
  const uint64_t id = r.Record(AllReduce(7));
  clock_.Advance(absl::Milliseconds(5));
  wall_.Advance(absl::Milliseconds(5));
  r.Started(id);
  clock_.Advance(absl::Milliseconds(10));
  r.Started(id);  // Once only.
  r.SetOutputs(id, {{"float32", {2, 2}}});
  r.Ended(id, absl::OkStatus());
  r.Ended(id, absl::InternalError("after the end"));  // Ignored.
  const OpRecord e = r.Snapshot().at(0);
  EXPECT_EQ(e.state, OpState::kCompleted);
  EXPECT_TRUE(e.has_started);
  EXPECT_EQ(e.started - e.scheduled, absl::Milliseconds(5));
  EXPECT_EQ(e.ended - e.scheduled, absl::Milliseconds(15));
  EXPECT_EQ(e.wall_started,
            absl::FromUnixSeconds(1'700'000'000) + absl::Milliseconds(5));
  EXPECT_TRUE(e.error.empty());
  EXPECT_THAT(e.outputs, ElementsAre(TensorSummary{"float32", {2, 2}}));
}

TEST_F(FlightRecorderTest, AFailureKeepsItsStatusAndNoStart) {
  FlightRecorder r = Make(10);
  const uint64_t id = r.Record(AllReduce(0));
  r.Ended(id, absl::DeadlineExceededError("rank 2 (worker2) did not join"));
  const OpRecord e = r.Snapshot().at(0);
  EXPECT_EQ(e.state, OpState::kFailed);
  EXPECT_FALSE(e.has_started);
  EXPECT_EQ(e.error, "DEADLINE_EXCEEDED: rank 2 (worker2) did not join");
}

TEST_F(FlightRecorderTest, WatermarksPerGroupOutliveTheRing) {
  FlightRecorder r = Make(0);  // No entries at all.
  EXPECT_EQ(r.Record(AllReduce(0)), 0u);
  EXPECT_TRUE(r.Snapshot().empty());
  r.Record(AllReduce(1, "g0,1#0"));
  std::vector<GroupProgress> groups = r.Progress();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].group, "g0,1#0");
  EXPECT_EQ(groups[1].group, "world");
  EXPECT_EQ(groups[1].last_scheduled, 0);
  EXPECT_EQ(groups[1].last_completed, -1);

  FlightRecorder kept = Make(4);
  const uint64_t a = kept.Record(AllReduce(0));
  const uint64_t b = kept.Record(AllReduce(1));
  kept.Started(b);
  kept.Ended(a, absl::OkStatus());
  GroupProgress world = kept.Progress().at(0);
  EXPECT_EQ(world.last_scheduled, 1);
  EXPECT_EQ(world.last_started, 1);
  EXPECT_EQ(world.last_completed, 0);
  EXPECT_EQ(world.last_completed_op, "all_reduce");
  kept.Ended(b, absl::UnavailableError("worker2 died"));
  world = kept.Progress().at(0);
  EXPECT_EQ(world.last_completed, 1);
  EXPECT_TRUE(world.last_failed);
}

TEST_F(FlightRecorderTest, TaggedAndPointToPointOpsDoNotMoveWatermarks) {
  FlightRecorder r = Make(4);
  OpRecordSpec tagged = AllReduce(-1);
  tagged.key = "c0,1,2/t:x";
  r.Record(tagged);
  OpRecordSpec send{.group = "world",
                    .key = "world/p2p/0/1/3",
                    .op = "send",
                    .p2p = true,
                    .peer = 2,
                    .p2p_sequence = 3};
  r.Record(send);
  EXPECT_TRUE(r.Progress().empty());
  EXPECT_EQ(r.Snapshot().size(), 2u);
}

TEST_F(FlightRecorderTest, TheDumpUsesTorchsFieldNames) {
  FlightRecorder r = Make(4);
  const uint64_t id = r.Record(AllReduce(3));
  r.Started(id);
  r.Ended(id, absl::InvalidArgumentError("mismatch"));
  OpRecordSpec send{.group = "world",
                    .group_ranks = {0, 1, 2},
                    .key = "world/p2p/1",
                    .op = "send",
                    .p2p = true,
                    .peer = 2,
                    .p2p_sequence = 0};
  r.Record(send);
  Value dump = DumpValue(r.Snapshot(), r.Progress(),
                         {.worker = "worker1",
                          .rank = 1,
                          .world_size = 3,
                          .pid = 42,
                          .reason = "on demand",
                          .capacity = r.capacity(),
                          .recorded = r.recorded()});
  // Round trip through JSON, as ferryctl analyze reads it.
  absl::StatusOr<Value> parsed = ParseJson(ToJson(dump));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Find("version")->as_string(), "2.4");
  EXPECT_EQ(parsed->Find("worker")->as_string(), "worker1");
  const Value* config = parsed->Find("pg_config")->Find("world");
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(ToJson(*config->Find("ranks")), "[0,1,2]");
  EXPECT_EQ(parsed->Find("pg_status")
                ->Find("world")
                ->Find("last_completed_collective")
                ->as_int(),
            3);
  const Value::List& entries = parsed->Find("entries")->as_list();
  ASSERT_EQ(entries.size(), 2u);
  const Value& e = entries[0];
  EXPECT_EQ(e.Find("record_id")->as_int(), 1);
  EXPECT_EQ(e.Find("collective_seq_id")->as_int(), 3);
  EXPECT_EQ(e.Find("p2p_seq_id")->as_int(), -1);
  EXPECT_EQ(e.Find("profiling_name")->as_string(), "ferry:all_reduce");
  EXPECT_EQ(e.Find("op")->as_string(), "all_reduce");
  EXPECT_EQ(e.Find("op_key")->as_string(), "world/3");
  EXPECT_EQ(ToJson(*e.Find("process_group")), R"(["world","world"])");
  EXPECT_EQ(ToJson(*e.Find("input_sizes")), "[[2,2]]");
  EXPECT_EQ(ToJson(*e.Find("input_dtypes")), R"(["float32"])");
  EXPECT_EQ(e.Find("state")->as_string(), "failed");
  EXPECT_EQ(e.Find("timeout_ms")->as_int(), 60000);
  EXPECT_TRUE(e.Find("retired")->as_bool());
  EXPECT_THAT(e.Find("error")->as_string(), HasSubstr("mismatch"));
  for (const char* key :
       {"time_created_ns", "time_discovered_started_ns",
        "time_discovered_completed_ns", "duration_ms", "mono_created_ns",
        "mono_started_ns", "mono_completed_ns"}) {
    EXPECT_NE(e.Find(key), nullptr) << key;
  }
  const Value& p2p = entries[1];
  EXPECT_TRUE(p2p.Find("is_p2p")->as_bool());
  EXPECT_EQ(p2p.Find("p2p_seq_id")->as_int(), 0);
  EXPECT_EQ(p2p.Find("collective_seq_id")->as_int(), -1);
  EXPECT_EQ(p2p.Find("peer")->as_int(), 2);
  EXPECT_EQ(p2p.Find("state")->as_string(), "scheduled");
  EXPECT_EQ(p2p.Find("time_discovered_started_ns"), nullptr);
}

TEST(SummarizeTest, NestedValuesAreBounded) {
  Tensor t = Tensor::FromVector<int64_t>({1, 2, 3});
  Value::List many;
  for (int i = 0; i < 40; ++i) many.push_back(Value(t));
  Value nested(Value::Map{{"a", Value(many)}, {"b", 1}});
  std::vector<TensorSummary> s = Summarize(nested);
  EXPECT_EQ(s.size(), kMaxSummarized);
  EXPECT_EQ(s[0], (TensorSummary{"int64", {3}}));
  EXPECT_TRUE(Summarize(Value("no tensors")).empty());
}

}  // namespace
}  // namespace ferry
