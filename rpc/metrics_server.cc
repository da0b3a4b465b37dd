#include "rpc/metrics_server.h"

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"
#include "rpc/auth/net_util.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

class Adapter final : public prometheus::Collectable {
 public:
  explicit Adapter(std::shared_ptr<const Metrics> metrics)
      : metrics_(std::move(metrics)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return metrics_->Collect();
  }

 private:
  const std::shared_ptr<const Metrics> metrics_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, std::shared_ptr<const Metrics> metrics) {
  FERRY_ASSIGN_OR_RETURN(HostPort bind, ParseHostPort(listen));
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->collectable_ = std::make_shared<Adapter>(std::move(metrics));
  try {
    // civetweb takes "HOST:PORT" for IPv4 and "[HOST]:PORT" for IPv6,
    // which JoinHostPort writes.
    server->exposer_ =
        std::make_unique<prometheus::Exposer>(std::vector<std::string>{
            "listening_ports", JoinHostPort(bind.host, bind.port),
            "num_threads", absl::StrCat(kThreads),
            // Reading a request and writing its answer, each.
            "request_timeout_ms",
            absl::StrCat(absl::ToInt64Milliseconds(kRequestTimeout)),
            "connection_queue", absl::StrCat(kQueue), "listen_backlog",
            absl::StrCat(kBacklog), "enable_keep_alive", "no"});
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve metrics on ", listen, " (--metrics_listen): ", e.what()));
  }
  server->exposer_->RegisterCollectable(server->collectable_);
  std::vector<int> ports = server->exposer_->GetListeningPorts();
  server->address_ =
      JoinHostPort(bind.host, ports.empty() ? bind.port : ports[0]);
  return server;
}

MetricsServer::~MetricsServer() = default;

}  // namespace ferry
