// The test network itself: hosts reach each other across the bridge and
// nothing else, a partition is silence (no reset, no error), healing
// restores the same connection, process faults land, and nothing is left
// behind.
#include "tests/testing/netns.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/await.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr absl::Duration kBound = absl::Seconds(30);
// How long a partitioned link is watched for a packet or an error that must
// not come. Not a wait for something to happen: the check is that nothing
// does.
constexpr int kQuietMs = 700;

std::string Ip() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (access(p, X_OK) == 0) return p;
  return "ip";
}

sockaddr_in Address(const std::string& ip, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

// poll() on one fd; the revents, 0 on timeout.
short PollOne(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  return poll(&p, 1, timeout_ms) == 1 ? p.revents : 0;
}

int SocketError(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  return err;
}

class NetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status s = TestNetwork::Available(); !s.ok()) GTEST_SKIP() << s;
    ASSERT_OK_AND_ASSIGN(net_, TestNetwork::Create({"a", "b"}));
  }
  void TearDown() override {
    for (int fd : fds_) close(fd);
  }

  int Track(int fd) {
    fds_.push_back(fd);
    return fd;
  }

  // A listening TCP socket on `host`'s address; its port in `*port`.
  int Listen(const std::string& host, int* port) {
    absl::StatusOr<int> fd = net_->Socket(host, SOCK_STREAM);
    EXPECT_OK(fd.status());
    if (!fd.ok()) return -1;
    Track(*fd);
    sockaddr_in a = Address(net_->host(host).address, 0);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(*fd, 4), 0);
    getsockname(*fd, reinterpret_cast<sockaddr*>(&a), &len);
    *port = ntohs(a.sin_port);
    return *fd;
  }

  // A non-blocking TCP connect from `from` to `to`:port (in progress).
  int ConnectFrom(const std::string& from, const std::string& to, int port) {
    absl::StatusOr<int> fd = net_->Socket(from, SOCK_STREAM | SOCK_NONBLOCK);
    EXPECT_OK(fd.status());
    if (!fd.ok()) return -1;
    Track(*fd);
    sockaddr_in a = Address(net_->host(to).address, port);
    connect(*fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    return *fd;
  }

  // A connected pair: `*client` on `from`, `*server` on `to`.
  void Connected(const std::string& from, const std::string& to, int* client,
                 int* server) {
    int port = 0;
    int listener = Listen(to, &port);
    *client = ConnectFrom(from, to, port);
    ASSERT_EQ(PollOne(listener, POLLIN, absl::ToInt64Milliseconds(kBound)),
              POLLIN);
    *server = Track(accept(listener, nullptr, nullptr));
    ASSERT_GE(*server, 0);
    ASSERT_TRUE(PollOne(*client, POLLOUT, 1000) & POLLOUT);
    ASSERT_EQ(SocketError(*client), 0);
  }

  std::unique_ptr<TestNetwork> net_;
  std::vector<int> fds_;
};

TEST_F(NetnsTest, HostsTalkOverTcpAcrossTheBridge) {
  int client, server;
  ASSERT_NO_FATAL_FAILURE(Connected("a", "b", &client, &server));
  ASSERT_EQ(write(client, "ping", 4), 4);
  ASSERT_EQ(PollOne(server, POLLIN, absl::ToInt64Milliseconds(kBound)), POLLIN);
  char buf[8] = {};
  EXPECT_EQ(read(server, buf, sizeof(buf)), 4);
  EXPECT_EQ(std::string(buf, 4), "ping");
  EXPECT_NE(net_->host("a").address, net_->host("b").address);
  EXPECT_THAT(net_->subnet(), HasSubstr("10.211."));
}

TEST_F(NetnsTest, ProcessesRunInTheirHost) {
  ASSERT_OK_AND_ASSIGN(
      ProcessResult addr,
      net_->Run("a", {Ip(), "-o", "-4", "addr", "show"}, kBound));
  ASSERT_EQ(addr.exit_code, 0) << addr.Describe();
  EXPECT_THAT(addr.out, HasSubstr(net_->host("a").address + "/24"));
  EXPECT_THAT(addr.out, Not(HasSubstr(net_->host("b").address)));
  EXPECT_THAT(addr.out, HasSubstr("127.0.0.1"));  // Its loopback is up.
  ASSERT_OK_AND_ASSIGN(
      ProcessResult name,
      net_->Run("b", {"/bin/cat", "/proc/sys/kernel/hostname"}, kBound));
  EXPECT_EQ(name.out, "b\n");
}

TEST_F(NetnsTest, TheRootNamespaceGetsNoLink) {
  ASSERT_OK_AND_ASSIGN(ProcessResult before,
                       RunProcess({Ip(), "-o", "link", "show"}, {}, kBound));
  ASSERT_OK_AND_ASSIGN(auto other, TestNetwork::Create({"c", "d", "e"}));
  ASSERT_OK_AND_ASSIGN(ProcessResult after,
                       RunProcess({Ip(), "-o", "link", "show"}, {}, kBound));
  EXPECT_EQ(before.out, after.out);
  EXPECT_NE(other->subnet(), net_->subnet());
}

TEST_F(NetnsTest, PartitionIsSilenceAndHealRestoresTheConnection) {
  int client, server;
  ASSERT_NO_FATAL_FAILURE(Connected("a", "b", &client, &server));
  int port = 0;
  Listen("b", &port);
  ASSERT_OK(net_->Partition("b"));
  ASSERT_EQ(write(client, "x", 1), 1);
  int pending = ConnectFrom("a", "b", port);
  // Nothing arrives, and neither end hears of it: no reset, no error.
  EXPECT_EQ(PollOne(server, POLLIN, kQuietMs), 0);
  EXPECT_EQ(PollOne(client, POLLIN, 0), 0);
  EXPECT_EQ(SocketError(client), 0);
  EXPECT_EQ(PollOne(pending, POLLOUT, 0), 0);  // Still connecting.
  EXPECT_EQ(SocketError(pending), 0);
  ASSERT_OK(net_->Heal("b"));
  // TCP's retransmissions deliver what was sent during the partition.
  ASSERT_EQ(PollOne(server, POLLIN, absl::ToInt64Milliseconds(kBound)), POLLIN);
  char c = 0;
  EXPECT_EQ(read(server, &c, 1), 1);
  EXPECT_EQ(c, 'x');
  EXPECT_TRUE(PollOne(pending, POLLOUT, absl::ToInt64Milliseconds(kBound)) &
              POLLOUT);
  EXPECT_EQ(SocketError(pending), 0);
}

TEST_F(NetnsTest, PauseResumeAndKillAProcess) {
  ASSERT_OK_AND_ASSIGN(auto sleeper, net_->Start("a", {"/bin/sleep", "600"}));
  const pid_t pid = sleeper->pid();
  ASSERT_OK(PauseProcess(pid));
  EXPECT_TRUE(AwaitTrue([&] { return ProcessStopped(pid); }, kBound));
  ASSERT_OK(ResumeProcess(pid));
  EXPECT_TRUE(AwaitTrue([&] { return !ProcessStopped(pid); }, kBound));
  ASSERT_OK(KillProcess(pid));
  ProcessResult r = sleeper->Wait(kBound);
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_THAT(KillProcess(-1), StatusIs(absl::StatusCode::kInternal));
}

TEST_F(NetnsTest, DestroyKillsEverythingAndLeavesNoNamespace) {
  // A daemon that is not our child: only the namespace scan finds it.
  ASSERT_OK_AND_ASSIGN(
      ProcessResult spawn,
      net_->Run("b",
                {"/bin/sh", "-c", "setsid /bin/sleep 600 >/dev/null & echo $!"},
                kBound));
  pid_t daemon = std::atoi(spawn.out.c_str());
  ASSERT_GT(daemon, 0) << spawn.Describe();
  EXPECT_THAT(net_->Processes(), ::testing::Contains(daemon));
  const std::vector<std::string> names = net_->Namespaces();
  net_->Destroy();
  EXPECT_TRUE(WaitForPidGone(daemon, kBound));
  for (const std::string& n : ListTestNamespaces()) {
    EXPECT_THAT(names, Not(::testing::Contains(n)));
  }
  EXPECT_THAT(net_->Processes(), IsEmpty());
}

// A test killed with SIGKILL leaves its namespaces (and what ran in them);
// the next network's creation removes them, since their pid is dead.
TEST_F(NetnsTest, StaleNamespacesOfDeadTestsAreRemoved) {
  ASSERT_OK_AND_ASSIGN(ProcessResult dead,
                       RunProcess({"/bin/sh", "-c", "echo $$"}, {}, kBound));
  const std::string stale =
      absl::StrCat("ferrytest-", std::atoi(dead.out.c_str()), "-0-x");
  ASSERT_OK_AND_ASSIGN(ProcessResult add,
                       RunProcess({Ip(), "netns", "add", stale}, {}, kBound));
  ASSERT_EQ(add.exit_code, 0) << add.Describe();
  ProcessOptions in_stale;
  in_stale.netns = "/run/netns/" + stale;
  ASSERT_OK_AND_ASSIGN(
      auto left, BackgroundProcess::Start({"/bin/sleep", "600"}, in_stale));
  EXPECT_GE(RemoveStaleNetworks(), 1);
  EXPECT_THAT(ListTestNamespaces(), Not(::testing::Contains(stale)));
  ProcessResult r = left->Wait(kBound);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_FALSE(r.timed_out);
  // Our own live network is not stale.
  EXPECT_THAT(ListTestNamespaces(), ::testing::Contains(net_->host("a").netns));
}

}  // namespace
}  // namespace testing
}  // namespace ferry
