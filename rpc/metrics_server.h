// Serves a worker's metrics over HTTP for Prometheus to scrape:
// GET http://HOST:PORT/metrics answers rpc/metrics.h's text (plus the
// server's own exposer_* families). prometheus-cpp's pull exposer
// (civetweb) does the HTTP; nothing of it is on a call's path: a scrape
// reads the metrics' atomics.
//
// Plain HTTP with no authentication, so the agent serves it where it
// would serve plaintext gRPC (Security::CheckServe: loopback, or TLS or
// --insecure chosen). And no connection holds it for long (issue 49 R9:
// one idle socket delayed every scrape by civetweb's 30 s request
// timeout, with one thread): kThreads connections are served at once, a
// request must be read (and its answer written) within kRequestTimeout,
// and past kThreads + kQueue accepted connections the rest wait in the
// kernel's backlog of kBacklog, so what sockets hold here is capped.
#ifndef FERRY_RPC_METRICS_SERVER_H_
#define FERRY_RPC_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/metrics.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace ferry {

class MetricsServer {
 public:
  static constexpr int kThreads = 4;
  static constexpr absl::Duration kRequestTimeout = absl::Seconds(2);
  static constexpr int kQueue = 16;
  static constexpr int kBacklog = 16;

  // Listens on `listen` (HOST:PORT; port 0 picks one). UNAVAILABLE naming
  // the address (and --metrics_listen) if it cannot.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, std::shared_ptr<const Metrics> metrics);
  ~MetricsServer();

  // HOST:PORT it listens on (the port it picked).
  const std::string& address() const { return address_; }

 private:
  MetricsServer() = default;
  std::shared_ptr<prometheus::Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string address_;
};

}  // namespace ferry

#endif  // FERRY_RPC_METRICS_SERVER_H_
