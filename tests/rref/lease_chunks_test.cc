// Lease renewals split into bounded chunks: every fork listed exactly once,
// every chunk far below gRPC's message limit, numbered for the owner.
#include "rref/lease_chunks.h"

#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

std::vector<LeaseFork> Forks(uint64_t node, int n) {
  std::vector<LeaseFork> out;
  out.reserve(n);
  // Large ids: the widest varints.
  for (int i = 0; i < n; ++i) {
    out.push_back({{node, ~uint64_t{0} - 2 * i}, {node, ~uint64_t{0} - i}});
  }
  return out;
}

TEST(LeaseChunksTest, EmptyListingIsOneChunk) {
  std::vector<proto::LeaseRequest> chunks = ChunkLease(7, 3, 9, {}, {});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].holder(), 7u);
  EXPECT_EQ(chunks[0].round(), 3u);
  EXPECT_EQ(chunks[0].epoch(), 9u);
  EXPECT_EQ(chunks[0].chunk(), 0u);
  EXPECT_EQ(chunks[0].chunks(), 1u);
}

TEST(LeaseChunksTest, EveryForkOnceInNumberedChunks) {
  std::vector<LeaseFork> held = Forks(1, 10);
  std::vector<LeaseFork> sent = Forks(2, 5);
  std::vector<proto::LeaseRequest> chunks = ChunkLease(7, 1, 0, held, sent, 4);
  ASSERT_EQ(chunks.size(), 4u);  // 15 handles, 4 a chunk.
  std::set<std::pair<uint64_t, uint64_t>> forks, in_transit;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].chunk(), i);
    EXPECT_EQ(chunks[i].chunks(), 4u);
    EXPECT_LE(chunks[i].forks_size() + chunks[i].in_transit_size(), 4);
    for (const auto& h : chunks[i].forks())
      forks.insert({h.fork_creator(), h.fork_local()});
    for (const auto& h : chunks[i].in_transit())
      in_transit.insert({h.fork_creator(), h.fork_local()});
  }
  EXPECT_EQ(forks.size(), 10u);
  EXPECT_EQ(in_transit.size(), 5u);
}

// A million forks on one owner (the per-holder limit): today's single
// message would be ~45 MB; every chunk stays under 1 MB.
TEST(LeaseChunksTest, AMillionForksStayUnderTheMessageLimit) {
  std::vector<proto::LeaseRequest> chunks =
      ChunkLease(7, 1, 0, Forks(1, 1 << 20), {});
  EXPECT_EQ(chunks.size(), static_cast<size_t>((1 << 20) / kLeaseChunkHandles));
  int64_t total = 0;
  for (const proto::LeaseRequest& c : chunks) {
    EXPECT_LT(c.ByteSizeLong(), 1u << 20);
    total += c.forks_size();
  }
  EXPECT_EQ(total, 1 << 20);
}

TEST(LeaseChunksTest, ChunkSizeBelowOneCountsAsOne) {
  EXPECT_EQ(ChunkLease(7, 1, 0, Forks(1, 3), {}, 0).size(), 3u);
}

}  // namespace
}  // namespace ferry
