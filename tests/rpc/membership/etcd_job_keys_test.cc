// Reading the job's keys back: every number the store holds is bounded
// before it sizes or indexes anything; malformed records are ignored.
#include "rpc/membership/etcd_job_keys.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

EtcdKeyValue RankKv(const EtcdJobKeys& keys, int rank, int world_size) {
  proto::RankRecord record;
  record.mutable_worker()->set_rank(rank);
  record.mutable_worker()->set_name("worker" + std::to_string(rank));
  record.mutable_worker()->set_address("h:" + std::to_string(4000 + rank));
  record.set_world_size(world_size);
  EtcdKeyValue kv;
  kv.key = keys.rank(rank);
  record.SerializeToString(&kv.value);
  return kv;
}

TEST(EtcdJobKeysTest, ParsesEachKindAndRejectsTheRest) {
  EtcdJobKeys keys("j");
  EXPECT_EQ(keys.Parse("/ferry/j/ranks/3").kind,
            EtcdJobKeys::Parsed::Kind::kRank);
  EXPECT_EQ(keys.Parse("/ferry/j/ranks/3").rank, 3);
  EXPECT_EQ(keys.Parse("/ferry/j/history/3").kind,
            EtcdJobKeys::Parsed::Kind::kHistory);
  EXPECT_EQ(keys.Parse("/ferry/j/barriers/shutdown.enter/2").barrier,
            "shutdown.enter");
  EXPECT_EQ(keys.Parse(keys.client(kEtcdClientBase + 5)).node,
            kEtcdClientBase + 5);
  for (const char* bad :
       {"/ferry/j/ranks/03", "/ferry/j/ranks/-1", "/ferry/j/ranks/65536",
        "/ferry/j/ranks/x", "/ferry/jj/ranks/1", "/ferry/j/clients/5",
        "/ferry/j/barriers/2", "/ferry/j/client_seq"}) {
    EXPECT_EQ(keys.Parse(bad).kind, EtcdJobKeys::Parsed::Kind::kOther) << bad;
  }
}

TEST(EtcdJobKeysTest, SnapshotKeepsOnlyRecordsThatAgreeWithTheirKey) {
  EtcdJobKeys keys("j");
  EtcdRange range;
  range.kvs.push_back(RankKv(keys, 0, 2));
  EtcdKeyValue wrong_rank = RankKv(keys, 1, 2);
  wrong_rank.key = keys.rank(0) + "x";  // Not a rank key at all.
  range.kvs.push_back(wrong_rank);
  EtcdKeyValue out_of_range = RankKv(keys, 5, 2);  // rank >= world_size
  range.kvs.push_back(out_of_range);
  EtcdKeyValue garbage;
  garbage.key = keys.rank(1);
  garbage.value = "\xff\xff";
  range.kvs.push_back(garbage);
  JobSnapshot s = ReadSnapshot(keys, range);
  EXPECT_THAT(s.ranks, SizeIs(1));
  EXPECT_THAT(s.problems, SizeIs(2));
  EXPECT_THAT(MissingRanks(s, 2), ElementsAre(1));
  ASSERT_OK_AND_ASSIGN(int world_size, AgreedWorldSize(s));
  EXPECT_EQ(world_size, 2);
}

// A record without an address is a reservation: taken, not served.
TEST(EtcdJobKeysTest, ReservationsAreTakenButMissing) {
  EtcdJobKeys keys("j");
  EtcdRange range;
  EtcdKeyValue reserved = RankKv(keys, 1, 3);
  proto::RankRecord record;
  ASSERT_TRUE(record.ParseFromString(reserved.value));
  record.mutable_worker()->clear_address();
  record.SerializeToString(&reserved.value);
  range.kvs = {RankKv(keys, 0, 3), reserved};
  JobSnapshot s = ReadSnapshot(keys, range);
  EXPECT_THAT(FreeRanks(s, 3), ElementsAre(2));
  EXPECT_THAT(MissingRanks(s, 3), ElementsAre(1, 2));
  EXPECT_FALSE(Formed(s));
}

// Once a holder saw the job formed, a missing rank is a dead one: the
// directory names it after its latest holder (the history), or bare.
TEST(EtcdJobKeysTest, AFormedJobsDeadRanksComeFromTheHistory) {
  EtcdJobKeys keys("j");
  EtcdRange range;
  EtcdKeyValue live = RankKv(keys, 0, 3);
  proto::RankRecord record;
  ASSERT_TRUE(record.ParseFromString(live.value));
  record.set_formed(true);
  record.SerializeToString(&live.value);
  EtcdKeyValue last = RankKv(keys, 1, 3);
  last.key = keys.history(1);
  last.mod_revision = 17;
  range.kvs = {live, last};
  JobSnapshot s = ReadSnapshot(keys, range);
  EXPECT_TRUE(Formed(s));
  EXPECT_EQ(s.history_revisions.at(1), 17);
  Directory d = DirectoryOf(s, 3);
  EXPECT_EQ(d.at(1).address, "h:4001");
  EXPECT_EQ(d.at(2).name, "worker2");
  EXPECT_EQ(d.at(2).address, "");
  // A history claiming an absurd generation is no record.
  EtcdKeyValue absurd = RankKv(keys, 2, 3);
  ASSERT_TRUE(record.ParseFromString(absurd.value));
  record.mutable_worker()->set_generation(kMaxEtcdGeneration + 1);
  record.SerializeToString(&absurd.value);
  absurd.key = keys.history(2);
  range.kvs.push_back(absurd);
  JobSnapshot with_absurd = ReadSnapshot(keys, range);
  EXPECT_EQ(with_absurd.history.count(2), 0u);
  EXPECT_EQ(with_absurd.history_revisions.count(2), 1u);  // Still compared.
}

TEST(EtcdJobKeysTest, DisagreeingWorldSizesAreNamed) {
  EtcdJobKeys keys("j");
  EtcdRange range;
  range.kvs = {RankKv(keys, 0, 2), RankKv(keys, 1, 3)};
  EXPECT_THAT(AgreedWorldSize(ReadSnapshot(keys, range)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("rank 0 has world_size 2 but rank 1 has 3")));
  EXPECT_THAT(AgreedWorldSize(ReadSnapshot(keys, {})),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST(EtcdJobKeysTest, RankListIsBounded) {
  EXPECT_EQ(RankList({1, 2}), "1, 2");
  std::vector<int> many(40);
  for (int i = 0; i < 40; ++i) many[i] = i;
  EXPECT_THAT(RankList(many), HasSubstr("and 24 more"));
}

}  // namespace
}  // namespace ferry
