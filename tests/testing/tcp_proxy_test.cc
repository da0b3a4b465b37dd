#include "tests/testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ferry {
namespace testing {
namespace {

// A one-connection echo server on a picked port.
class Echo {
 public:
  Echo() {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(listener_, 4);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
    thread_ = std::thread([this] {
      int c = accept(listener_, nullptr, nullptr);
      char buffer[256];
      ssize_t n;
      while ((n = read(c, buffer, sizeof(buffer))) > 0) write(c, buffer, n);
      close(c);
    });
  }
  ~Echo() {
    shutdown(listener_, SHUT_RDWR);
    thread_.join();
    close(listener_);
  }
  const std::string& address() const { return address_; }

 private:
  int listener_;
  std::string address_;
  std::thread thread_;
};

int Dial(const std::string& address) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

// What `fd` receives within `ms` (empty if nothing).
std::string Receive(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return "";
  char buffer[256];
  ssize_t n = read(fd, buffer, sizeof(buffer));
  return n > 0 ? std::string(buffer, n) : "";
}

TEST(TcpProxyTest, ForwardsUntilCut) {
  Echo echo;
  auto proxy = TcpProxy::Start(echo.address());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  int fd = Dial((*proxy)->address());
  ASSERT_EQ(write(fd, "hi", 2), 2);
  EXPECT_EQ(Receive(fd, 20000), "hi");
  (*proxy)->Cut();
  ASSERT_EQ(write(fd, "lost", 4), 4);
  // Dropped as a partition drops it: no answer, the connection still open.
  EXPECT_EQ(Receive(fd, 200), "");
  int late = Dial((*proxy)->address());
  ASSERT_EQ(write(late, "x", 1), 1);
  EXPECT_EQ(Receive(late, 200), "");
  EXPECT_EQ((*proxy)->accepted(), 2);
  close(fd);
  close(late);
}

}  // namespace
}  // namespace testing
}  // namespace ferry
