// ferryctl analyze over dumps made by real flight recorders (one per
// rank): the first op where ranks disagree, ops some ranks never reached,
// the slowest rank; text and JSON; dumps read from a directory.
#include "tools/ferryctl/analyze.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/recorder/flight_recorder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/value/json.h"
#include "tests/testing/manual_clock.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace ctl {
namespace {

using ::ferry::testing::ManualClock;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

// A job of `n` ranks, each with its own recorder and wall clock.
class Job {
 public:
  explicit Job(int n) : clocks_(n), walls_(n) {
    for (int r = 0; r < n; ++r) {
      recorders_.push_back(
          std::make_unique<FlightRecorder>(FlightRecorder::Options{
              .capacity = 100, .clock = &clocks_[r], .wall = &walls_[r]}));
    }
  }
  // Rank `r` begins `op` as the world's op `seq`; returns its record id.
  uint64_t Begin(int r, int64_t seq, const std::string& op,
                 std::vector<TensorSummary> inputs = {{"float32", {4}}}) {
    std::vector<int> ranks;
    for (size_t k = 0; k < recorders_.size(); ++k) ranks.push_back(k);
    return recorders_[r]->Record({.group = "world",
                                  .group_ranks = ranks,
                                  .group_rank = r,
                                  .key = absl::StrCat("world/", seq),
                                  .op = op,
                                  .sequence = seq,
                                  .inputs = std::move(inputs),
                                  .timeout = absl::Seconds(60)});
  }
  // Every rank runs `op` as `seq` and completes it.
  void Complete(int64_t seq, const std::string& op) {
    for (size_t r = 0; r < recorders_.size(); ++r) {
      recorders_[r]->Ended(Begin(r, seq, op), absl::OkStatus());
    }
  }
  FlightRecorder& recorder(int r) { return *recorders_[r]; }
  ManualClock& wall(int r) { return walls_[r]; }

  std::vector<RankDump> Dumps() {
    std::vector<RankDump> out;
    for (size_t r = 0; r < recorders_.size(); ++r) {
      Value dump =
          DumpValue(recorders_[r]->Snapshot(), recorders_[r]->Progress(),
                    {.worker = absl::StrCat("worker", r),
                     .rank = static_cast<int>(r),
                     .world_size = static_cast<int>(recorders_.size())});
      // Through JSON, as the files are.
      absl::StatusOr<RankDump> parsed =
          ParseDump(absl::StrCat("worker", r, ".json"), ToJson(dump));
      EXPECT_TRUE(parsed.ok()) << parsed.status();
      out.push_back(*std::move(parsed));
    }
    return out;
  }

 private:
  std::vector<ManualClock> clocks_, walls_;
  std::vector<std::unique_ptr<FlightRecorder>> recorders_;
};

const Value& World(const Value& analysis) {
  return analysis.Find("groups")->as_list().at(0);
}

TEST(AnalyzeTest, NamesTheFirstOpWhereRanksDisagree) {
  Job job(3);
  job.Complete(0, "barrier");
  for (int r = 0; r < 3; ++r) {
    const uint64_t id = job.Begin(r, 1, r == 2 ? "all_gather" : "all_reduce");
    job.recorder(r).Ended(id, absl::InvalidArgumentError("mismatch"));
  }
  job.Complete(2, "all_reduce");  // Later ops do not matter.
  Value a = Analyze(job.Dumps());
  const Value& m = *World(a).Find("mismatch");
  ASSERT_FALSE(m.is_null()) << ToJson(a);
  EXPECT_EQ(m.Find("seq")->as_int(), 1);
  EXPECT_EQ(m.Find("key")->as_string(), "world/1");
  EXPECT_EQ(m.Find("field")->as_string(), "op");
  EXPECT_EQ(
      ToJson(*m.Find("sides")),
      R"([{"ranks":[0,1],"value":"all_reduce","workers":["worker0","worker1"]},)"
      R"({"ranks":[2],"value":"all_gather","workers":["worker2"]}])");
  std::string text = AnalysisText(a);
  EXPECT_THAT(text, HasSubstr("first mismatch: op 1 (world/1): op differs"));
  EXPECT_THAT(text, HasSubstr("rank 2 (worker2) ran all_gather"));
  EXPECT_THAT(text, HasSubstr("ranks 0 (worker0), 1 (worker1) ran all_reduce"));
}

TEST(AnalyzeTest, SizesAndDTypesCountWhereTheOpNeedsThemEqual) {
  Job job(2);
  job.recorder(0).Ended(job.Begin(0, 0, "all_gather", {{"float32", {3}}}),
                        absl::OkStatus());
  job.recorder(1).Ended(job.Begin(1, 0, "all_gather", {{"float32", {5}}}),
                        absl::OkStatus());
  EXPECT_TRUE(World(Analyze(job.Dumps())).Find("mismatch")->is_null());
  job.Begin(0, 1, "all_reduce", {{"float32", {3}}});
  job.Begin(1, 1, "all_reduce", {{"float32", {5}}});
  Value m = *World(Analyze(job.Dumps())).Find("mismatch");
  ASSERT_FALSE(m.is_null());
  EXPECT_EQ(m.Find("seq")->as_int(), 1);
  EXPECT_EQ(m.Find("field")->as_string(), "input sizes");
  job.Begin(0, 2, "all_gather", {{"int64", {3}}});
  job.Begin(1, 2, "all_gather", {{"float32", {3}}});
  EXPECT_EQ(World(Analyze(job.Dumps())).Find("mismatch")->Find("seq")->as_int(),
            1);
}

TEST(AnalyzeTest, NamesRanksThatNeverReachedAnOpOthersWaitIn) {
  Job job(3);
  for (int64_t seq = 0; seq < 5; ++seq) job.Complete(seq, "all_reduce");
  job.Begin(0, 5, "all_reduce");
  job.recorder(1).Started(job.Begin(1, 5, "all_reduce"));
  Value a = Analyze(job.Dumps());
  const Value::List& n = World(a).Find("not_reached")->as_list();
  ASSERT_EQ(n.size(), 1u) << ToJson(a);
  EXPECT_EQ(n[0].Find("seq")->as_int(), 5);
  EXPECT_EQ(ToJson(*n[0].Find("never_reached")),
            R"([{"last_seq":4,"rank":2,"worker":"worker2"}])");
  EXPECT_EQ(n[0].Find("waiting")->as_list().size(), 2u);
  EXPECT_TRUE(World(a).Find("mismatch")->is_null());
  EXPECT_THAT(AnalysisText(a),
              HasSubstr("not reached: op 5 all_reduce (world/5): rank 2 "
                        "(worker2, last_seq 4) never began it; ranks 0 "
                        "(worker0, state scheduled), 1 (worker1, state "
                        "started) in it"));
}

TEST(AnalyzeTest, TheSlowestRankArrivesLast) {
  Job job(3);
  for (int64_t seq = 0; seq < 3; ++seq) {
    std::vector<uint64_t> ids;
    for (int r = 0; r < 3; ++r) {
      // Rank 1 comes 20 ms after the others, every time.
      if (r == 1) job.wall(1).Advance(absl::Milliseconds(20));
      ids.push_back(job.Begin(r, seq, "all_reduce"));
    }
    for (int r = 0; r < 3; ++r) {
      job.recorder(r).Ended(ids[r], absl::OkStatus());
      job.wall(r).Set(job.wall(1).Now() + absl::Milliseconds(1));
    }
  }
  Value a = Analyze(job.Dumps());
  const Value& top = World(a).Find("last_to_arrive")->as_list().at(0);
  EXPECT_EQ(top.Find("worker")->as_string(), "worker1");
  EXPECT_EQ(top.Find("ops")->as_int(), 3);
  EXPECT_THAT(AnalysisText(a),
              HasSubstr("slowest: rank 1 (worker1) arrived last in 3 of 3 "
                        "ops"));
  EXPECT_THAT(AnalysisText(a), HasSubstr("every rank ran the same ops"));
}

TEST(AnalyzeTest, ReadsADirectoryOfDumps) {
  Job job(2);
  job.Complete(0, "barrier");
  const std::string dir = ::testing::TempDir();
  for (const RankDump& d : job.Dumps()) {
    std::ofstream(absl::StrCat(dir, "/", d.file)) << ToJson(d.dump);
  }
  std::ofstream(absl::StrCat(dir, "/notes.txt")) << "not a dump";
  ASSERT_OK_AND_ASSIGN(std::vector<RankDump> read, ReadDumps(dir));
  EXPECT_EQ(read.size(), 2u);
  EXPECT_THAT(ReadDumps(dir + "/none"), StatusIs(absl::StatusCode::kNotFound));
  std::ofstream(absl::StrCat(dir, "/bad.json")) << "{\"entries\": 3}";
  EXPECT_THAT(ReadDumps(dir), StatusIs(absl::StatusCode::kInvalidArgument,
                                       HasSubstr("bad.json")));
}

}  // namespace
}  // namespace ctl
}  // namespace ferry
