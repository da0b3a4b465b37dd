// A TCP proxy for tests: listens on a picked 127.0.0.1 port and forwards
// each connection to one upstream host:port, so a test can cut one process
// off from a service (a network partition) while the others still reach
// it directly.
//
//   ASSERT_OK_AND_ASSIGN(auto proxy, TcpProxy::Start(etcd->endpoint(0)));
//   … start the process with proxy->address() as its endpoint …
//   proxy->Cut();   // nothing crosses any more, in either direction
//
// Cut() drops traffic the way a partition does: connections stay open but
// nothing is forwarded (the process sees its calls time out, not fail),
// and new connections are accepted and left unanswered. One thread; every
// socket is closed when the proxy goes.
#ifndef FERRY_TESTS_TESTING_TCP_PROXY_H_
#define FERRY_TESTS_TESTING_TCP_PROXY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {
namespace testing {

class TcpProxy {
 public:
  // `upstream`: "HOST:PORT" (IPv4). UNAVAILABLE if no port can be opened.
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(
      const std::string& upstream);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // "127.0.0.1:PORT": where clients connect.
  const std::string& address() const { return address_; }
  // From now on nothing is forwarded (see above). Thread-safe.
  void Cut();
  // Connections accepted so far.
  int64_t accepted() const { return accepted_.load(); }

 private:
  struct Pair {
    int client = -1;
    int upstream = -1;
  };

  TcpProxy(int listener, int wake, std::string address, std::string upstream);
  void Loop();
  void Accept();
  // Forwards what `from` has to `to`; false once either end closed.
  static bool Forward(int from, int to);
  void Wake();

  const int listener_;
  const int wake_;  // An eventfd: Cut() and the destructor wake the loop.
  const std::string address_;
  const std::string upstream_;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> accepted_{0};
  // The loop's own (no lock).
  std::vector<Pair> pairs_;
  std::vector<int> held_;  // Accepted after Cut(): open, never answered.
  std::thread thread_;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_TCP_PROXY_H_
