// N workers in one process, on 127.0.0.1 with picked ports: the in-process
// multi-worker setup for protocol tests.
//
//   ASSERT_OK_AND_ASSIGN(auto cluster, LocalCluster::Start(3));
//   EXPECT_OK(cluster->agent(0).RpcSync("worker2", "echo", {1}));
#ifndef FERRY_TESTS_TESTING_LOCAL_CLUSTER_H_
#define FERRY_TESTS_TESTING_LOCAL_CLUSTER_H_

#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "rpc/agent.h"

namespace ferry {
namespace testing {

class LocalCluster {
 public:
  struct Options {
    // Adjusts each worker's options (rank already set).
    std::function<void(AgentOptions&)> configure;
    // Runs on each agent before Start (register functions, …).
    std::function<void(RpcAgent&)> setup;
  };

  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(
      int n, Options options = {}) {
    auto cluster = std::unique_ptr<LocalCluster>(new LocalCluster());
    for (int rank = 0; rank < n; ++rank) {
      AgentOptions o;
      o.rank = rank;
      o.world_size = n;
      o.listen = "127.0.0.1:0";
      o.startup_timeout = absl::Seconds(30);
      o.heartbeat_timeout = absl::Seconds(2);
      o.membership.master_timeout = absl::Seconds(3);
      if (options.configure) options.configure(o);
      cluster->agents_.push_back(std::make_unique<RpcAgent>(o));
      if (options.setup) options.setup(*cluster->agents_.back());
    }
    absl::StatusOr<std::string> master = cluster->agents_[0]->Listen();
    if (!master.ok()) return master.status();
    cluster->master_ = *master;
    // The others learn the master's picked port only now.
    for (int rank = 1; rank < n; ++rank) {
      AgentOptions o;
      o.rank = rank;
      o.world_size = n;
      o.master = *master;
      o.listen = "127.0.0.1:0";
      o.startup_timeout = absl::Seconds(30);
      o.heartbeat_timeout = absl::Seconds(2);
      o.membership.master_timeout = absl::Seconds(3);
      if (options.configure) options.configure(o);
      o.master = *master;
      cluster->agents_[rank] = std::make_unique<RpcAgent>(o);
      if (options.setup) options.setup(*cluster->agents_[rank]);
    }
    std::vector<absl::Status> results(n);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < n; ++rank) {
      threads.emplace_back(
          [&, rank] { results[rank] = cluster->agents_[rank]->Start(); });
    }
    for (auto& t : threads) t.join();
    for (const absl::Status& s : results) {
      if (!s.ok()) return s;
    }
    return cluster;
  }

  RpcAgent& agent(int rank) { return *agents_[rank]; }
  int size() const { return static_cast<int>(agents_.size()); }
  const std::string& master() const { return master_; }

  // Graceful shutdown of all workers at once (as `ferryctl down`).
  absl::Status ShutdownAll() {
    std::vector<absl::Status> results(agents_.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < agents_.size(); ++i) {
      threads.emplace_back([&, i] { results[i] = agents_[i]->Shutdown(); });
    }
    for (auto& t : threads) t.join();
    for (const absl::Status& s : results) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  LocalCluster() = default;
  std::vector<std::unique_ptr<RpcAgent>> agents_;
  std::string master_;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_LOCAL_CLUSTER_H_
