// The peer protocol and process handling of ferry_bench --peers, with a
// shell script standing in for a peer (no torch needed), and where the
// peer programs and a Python are looked for.
#include "tools/bench/peer_process.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "tools/bench/peer_setup.h"
#include "tools/bench/row.h"

namespace ferry {
namespace bench {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

constexpr absl::Duration kBound = absl::Seconds(20);

const char kRow[] =
    "{\"suite\":\"collectives\",\"metric\":\"op_time_us\",\"system\":"
    "\"torch_gloo\",\"op\":\"all_reduce\",\"size_bytes\":8,\"world\":2,"
    "\"inflight\":1,\"value\":12.5}";

// A peer in sh: ready, then per request: "two" answers two rows, "skip"
// unsupported, "fail" an error, "bad" a malformed row, "mute" nothing,
// "quit" exits.
std::unique_ptr<PeerProcess> FakePeer() {
  std::string script = absl::StrCat(
      "echo ok; while read -r req; do case \"$req\" in "
      "two) echo '",
      kRow, "'; echo '", kRow, "'; echo ok ;; ",
      "skip) echo 'unsupported no such op here' ;; ",
      "fail) echo 'error ValueError: boom' ;; ",
      "bad) echo '{\"suite\":1}'; echo ok ;; ", "mute) ;; ",
      "quit) exit 0 ;; esac; done");
  absl::StatusOr<std::unique_ptr<PeerProcess>> peer =
      PeerProcess::Start({"/bin/sh", "-c", script}, kBound);
  EXPECT_TRUE(peer.ok()) << peer.status();
  return peer.ok() ? *std::move(peer) : nullptr;
}

TEST(ReplyReaderTest, RowsThenOk) {
  ReplyReader reply;
  EXPECT_FALSE(reply.Add(kRow));
  EXPECT_TRUE(reply.Add("ok"));
  EXPECT_TRUE(reply.Add("ignored"));
  ASSERT_OK_AND_ASSIGN(std::vector<Row> rows, reply.Result("peer.py"));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].system, "torch_gloo");
  EXPECT_DOUBLE_EQ(rows[0].value, 12.5);
}

TEST(ReplyReaderTest, StatusLinesBecomeCodesNamingThePeer) {
  ReplyReader unsupported;
  ASSERT_TRUE(unsupported.Add("unsupported Gloo has no reduce_scatter"));
  EXPECT_THAT(unsupported.Result("peer.py"),
              StatusIs(absl::StatusCode::kUnimplemented,
                       "peer.py: Gloo has no reduce_scatter"));
  ReplyReader error;
  ASSERT_TRUE(error.Add("error RuntimeError: x"));
  EXPECT_THAT(error.Result("peer.py"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("peer.py")));
  ReplyReader unfinished;
  EXPECT_FALSE(unfinished.Add(kRow));
  EXPECT_THAT(unfinished.Result("peer.py"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("no reply")));
  ReplyReader bad_row;
  EXPECT_FALSE(bad_row.Add("{\"suite\":\"rpc\"}"));
  EXPECT_TRUE(bad_row.Add("ok"));
  EXPECT_THAT(
      bad_row.Result("peer.py"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metric")));
}

TEST(PeerProcessTest, AnswersRequestsInTurn) {
  std::unique_ptr<PeerProcess> peer = FakePeer();
  ASSERT_NE(peer, nullptr);
  ASSERT_OK_AND_ASSIGN(std::vector<Row> rows, peer->Request("two", kBound));
  EXPECT_EQ(rows.size(), 2u);
  EXPECT_THAT(
      peer->Request("skip", kBound),
      StatusIs(absl::StatusCode::kUnimplemented, "sh: no such op here"));
  EXPECT_THAT(peer->Request("fail", kBound),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("boom")));
  EXPECT_THAT(peer->Request("bad", kBound),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // A failed reply leaves the stream in step: the next request works.
  ASSERT_OK_AND_ASSIGN(rows, peer->Request("two", kBound));
  EXPECT_EQ(rows.size(), 2u);
}

TEST(PeerProcessTest, SilentPeerMissesItsDeadlineAndIsThenUnusable) {
  std::unique_ptr<PeerProcess> peer = FakePeer();
  ASSERT_NE(peer, nullptr);
  EXPECT_THAT(peer->Request("mute", absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(peer->Request("two", kBound),
              StatusIs(absl::StatusCode::kUnavailable));
}

TEST(PeerProcessTest, ExitedPeerIsUnavailable) {
  std::unique_ptr<PeerProcess> peer = FakePeer();
  ASSERT_NE(peer, nullptr);
  EXPECT_THAT(peer->Request("quit", kBound),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("exited")));
}

TEST(PeerProcessTest, StartFailsForAPeerThatIsNotReady) {
  EXPECT_THAT(PeerProcess::Start({"/bin/sh", "-c", "echo nope"}, kBound),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("nope")));
  // One that cannot run here (a library missing) says why instead of "ok".
  EXPECT_THAT(
      PeerProcess::Start({"/bin/sh", "-c", "echo 'unsupported no Ray here'"},
                         kBound),
      StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("no Ray here")));
  EXPECT_THAT(PeerProcess::Start({"/nonexistent/peer"}, kBound),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("exited")));
  // Never ready: killed at its bound (with its process group).
  EXPECT_THAT(PeerProcess::Start({"/bin/sh", "-c", "read -r x"},
                                 absl::Milliseconds(50)),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

std::string PeersDir() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/ferry/tools/bench/peers");
}

TEST(FindPeersTest, NamesWhatIsMissing) {
  EXPECT_THAT(
      FindPeers({.dir = "/nonexistent"}),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("torch_rpc_bench.py")));
  EXPECT_THAT(FindPeers({.python = "/nonexistent/python3", .dir = PeersDir()}),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("/nonexistent/python3")));
}

TEST(PeerSetupTest, CommandRunsTheScriptInTheDirectory) {
  PeerSetup setup{.python = "/usr/bin/python3", .dir = "/d"};
  EXPECT_THAT(
      setup.Command("torch_gloo_bench.py", {"--serve", "--world=4"}),
      ::testing::ElementsAre("/usr/bin/python3", "/d/torch_gloo_bench.py",
                             "--serve", "--world=4"));
}

}  // namespace
}  // namespace bench
}  // namespace ferry
