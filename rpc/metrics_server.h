// Serves a worker's metrics over HTTP for Prometheus to scrape:
// GET http://HOST:PORT/metrics answers rpc/metrics.h's text (plus the
// server's own exposer_* families). prometheus-cpp's pull exposer
// (civetweb, two threads) does the HTTP; nothing of it is on a call's
// path: a scrape reads the metrics' atomics.
#ifndef FERRY_RPC_METRICS_SERVER_H_
#define FERRY_RPC_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "rpc/metrics.h"

namespace prometheus {
class Exposer;
class Collectable;
}  // namespace prometheus

namespace ferry {

class MetricsServer {
 public:
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
