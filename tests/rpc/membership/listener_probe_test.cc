// What a worker's host answers about the address it served at: accepted
// while something listens, refused once nothing does, and nothing believed
// of a name or of a host that does not answer. Real sockets on 127.0.0.1;
// the probe's looks run on real timers (nothing here asserts on time).
#include "rpc/membership/listener_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rpc/base/timers.h"

namespace ferry {
namespace {

// A TCP socket bound to 127.0.0.1 on a port the kernel picked.
class BoundSocket {
 public:
  BoundSocket() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t size = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &size);
    port_ = ntohs(a.sin_port);
  }
  ~BoundSocket() { Close(); }
  void Listen() { ASSERT_EQ(listen(fd_, 4), 0); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class ListenerProbeTest : public ::testing::Test {
 protected:
  Listener Ask(const std::string& address) {
    std::promise<Listener> answer;
    probe_.Probe(address, [&answer](Listener l) { answer.set_value(l); });
    std::future<Listener> f = answer.get_future();
    // Bounded by the probe's patience; this only keeps a broken probe from
    // hanging the test.
    EXPECT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
    return f.get();
  }

  ThreadTimers timers_;
  TcpListenerProbe probe_{&timers_, absl::Seconds(1)};
};

TEST_F(ListenerProbeTest, AListeningProcessIsThere) {
  BoundSocket s;
  s.Listen();
  EXPECT_EQ(Ask(s.address()), Listener::kListening);
}

TEST_F(ListenerProbeTest, AnAddressNobodyListensAtAnyMoreIsRefused) {
  BoundSocket s;
  s.Listen();
  const std::string address = s.address();
  s.Close();  // As a killed process's sockets are closed.
  EXPECT_EQ(Ask(address), Listener::kRefused);
}

TEST_F(ListenerProbeTest, NamesAndMalformedAddressesSayNothing) {
  EXPECT_EQ(Ask("worker1:4000"), Listener::kUnknown);  // Would need DNS.
  EXPECT_EQ(Ask(""), Listener::kUnknown);
  EXPECT_EQ(Ask("127.0.0.1"), Listener::kUnknown);
  EXPECT_EQ(Ask("127.0.0.1:0"), Listener::kUnknown);
  EXPECT_EQ(Ask("127.0.0.1:70000"), Listener::kUnknown);
}

TEST_F(ListenerProbeTest, IPv6LoopbackIsAskedToo) {
  // Nothing listens at port 1 of ::1 (or IPv6 is off): never "listening".
  EXPECT_NE(Ask("[::1]:1"), Listener::kListening);
}

}  // namespace
}  // namespace ferry
