// Real etcd for tests: 1 or more members on 127.0.0.1, on ports picked
// free (bound to port 0, released, handed to etcd; a start that loses a
// port to someone else is retried on new ones), data under $TEST_TMPDIR.
// Members can be killed, stopped and restarted (same ports, same data).
// Every member is gone when the cluster object is: SIGKILL and reap in the
// destructor, and each member also gets SIGKILL if the test process dies
// (setpriv --pdeathsig), so a crashed or timed-out test leaves nothing.
//
//   if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
//   ASSERT_OK_AND_ASSIGN(auto etcd, EtcdCluster::Start({.members = 3}));
//   client options.endpoints = etcd->endpoint_list();
//   ASSERT_OK(etcd->Kill(1));
//   ASSERT_OK(etcd->Restart(1));
//
// Not thread-safe: drive it from the test's main thread (the thread that
// starts a member is the one whose death kills it).
#ifndef FERRY_TESTS_TESTING_ETCD_CLUSTER_H_
#define FERRY_TESTS_TESTING_ETCD_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/status.h"
#include "proto/etcd/rpc.pb.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace testing {

struct EtcdClusterOptions {
  int members = 1;
  // Serve clients over TLS with tests/testdata/tls's node certificate and
  // require client certificates signed by its CA (see tls_*_file()).
  bool tls = false;
  // More etcd flags for every member.
  std::vector<std::string> extra_flags;
  // How long Start and Restart wait for the cluster to serve.
  absl::Duration start_timeout = absl::Seconds(30);
};

class EtcdCluster {
 public:
  // The etcd binary: $FERRY_ETCD if set, else /usr/bin/etcd.
  static std::string Binary();
  static bool Installed();
  // For GTEST_SKIP when not Installed().
  static std::string SkipReason();

  // Starts the members and waits until every one answers with a leader
  // and a linearizable read works. FAILED_PRECONDITION with the members'
  // logs if they do not within start_timeout.
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(
      EtcdClusterOptions options = {});

  // SIGKILL and reap every member; remove the data.
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // "127.0.0.1:P1,127.0.0.1:P2": the client addresses.
  std::string endpoints() const;
  std::vector<std::string> endpoint_list() const;
  const std::string& endpoint(int i) const { return members_[i].client; }
  // The member serving `endpoint`, or -1.
  int IndexOf(const std::string& endpoint) const;
  bool running(int i) const { return members_[i].process != nullptr; }

  // SIGKILL member i and reap it.
  absl::Status Kill(int i);
  // SIGTERM member i; SIGKILL if it has not exited within 10 s.
  absl::Status Stop(int i);
  // Starts a stopped member again on its ports and data, and waits until
  // the cluster serves through it.
  absl::Status Restart(int i);

  // Until every running member answers with a leader and a linearizable
  // read through one of them works; FAILED_PRECONDITION with logs after
  // `timeout`.
  absl::Status WaitHealthy(absl::Duration timeout) const;

  // The running member the others follow (by asking each its status).
  // UNAVAILABLE if none is known to lead.
  absl::StatusOr<int> LeaderIndex() const;

  // The member's log (etcd's stdout and stderr).
  std::string Log(int i) const;
  // Client credentials for a TLS cluster.
  std::string tls_ca_file() const;
  std::string tls_cert_file() const;
  std::string tls_key_file() const;

 private:
  struct Member {
    std::string name;
    std::string client;  // 127.0.0.1:PORT
    std::string peer;    // 127.0.0.1:PORT
    std::string data_dir;
    std::string log_file;
    std::unique_ptr<BackgroundProcess> process;  // Null when not running.
  };

  EtcdCluster(EtcdClusterOptions options, std::string dir);
  absl::Status PickPorts();
  absl::Status Launch(int i);
  std::vector<std::string> Flags(int i) const;
  std::shared_ptr<grpc::Channel> Channel(int i) const;
  grpc::Status MemberStatus(int i, etcdserverpb::StatusResponse* status) const;
  absl::Status MemberHealthy(int i, bool read) const;
  void KillAll();
  bool PortClash() const;
  std::string Logs() const;

  const EtcdClusterOptions options_;
  const std::string dir_;
  const std::string token_;  // --initial-cluster-token
  std::vector<Member> members_;
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_ETCD_CLUSTER_H_
