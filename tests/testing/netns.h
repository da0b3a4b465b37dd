// A network of test "hosts" on this machine, for fault tests of real
// processes: each host is a network namespace of its own (with its own
// loopback, host name and one address), joined by a veth pair to a bridge
// that lives in yet another namespace. Nothing outside the network's own
// namespaces is touched: the root namespace gets no link, no route and no
// traffic. Needs root and iproute2's `ip`.
//
//   if (absl::Status s = TestNetwork::Available(); !s.ok()) GTEST_SKIP() << s;
//   ASSERT_OK_AND_ASSIGN(auto net, TestNetwork::Create({"a", "b"}));
//   ASSERT_OK_AND_ASSIGN(auto server, net->Start("a", {server_path, ...}));
//   ASSERT_OK(net->Partition("a"));   // a's link down: no packets, no resets
//   ASSERT_OK(net->Heal("a"));
//
// Names: every namespace is `ferrytest-<pid>-<n>-<host>` (the bridge's
// host is "bridge"), so concurrent tests never share one, and a namespace
// whose pid is dead is stale: Create() first removes stale namespaces and
// kills what runs in them, so a test killed with SIGKILL leaves nothing
// behind past the next start. A network is destroyed by its destructor, or
// at exit if it was never destroyed. Processes started in a host die with
// the thread that started them (PR_SET_PDEATHSIG).
//
// Addresses: each network takes its own /24 (10.211.<k>.0/24, k locked for
// the network's life by a file lock), hosts .2, .3, … in the order given.
// Neighbours are entered statically, so a partitioned link drops packets
// silently for its whole duration (no ARP failures, no errors on either
// side): only timeouts can tell.
#ifndef FERRY_TESTS_TESTING_NETNS_H_
#define FERRY_TESTS_TESTING_NETNS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace testing {

struct NetHost {
  std::string name;     // As given to Create; also its host name (uname).
  std::string netns;    // The namespace: ferrytest-<pid>-<n>-<name>.
  std::string address;  // Its IPv4 address on the network.
};

class TestNetwork {
 public:
  // OK if networks can be made here (root, `ip` found, a namespace can be
  // created); otherwise FAILED_PRECONDITION saying what is missing, for
  // GTEST_SKIP. Probed once per process.
  static absl::Status Available();

  // One host per name (names: 1-12 characters of [a-z0-9]). Removes stale
  // namespaces first. On error nothing of it is left.
  static absl::StatusOr<std::unique_ptr<TestNetwork>> Create(
      const std::vector<std::string>& hosts);

  // Destroy().
  ~TestNetwork();
  TestNetwork(const TestNetwork&) = delete;
  TestNetwork& operator=(const TestNetwork&) = delete;

  const std::vector<NetHost>& hosts() const { return hosts_; }
  // The host named `name`; aborts the process on an unknown name (a bug in
  // the test).
  const NetHost& host(const std::string& name) const;
  const std::string& subnet() const { return subnet_; }  // "10.211.k.0/24"

  // Starts `argv` in `host` (its network and UTS namespaces) with
  // `options` (their netns, hostname and die_with_parent are set here).
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> Start(
      const std::string& host, const std::vector<std::string>& argv,
      ProcessOptions options = {}) const;
  // The same, waited for up to `timeout`.
  absl::StatusOr<ProcessResult> Run(const std::string& host,
                                    const std::vector<std::string>& argv,
                                    absl::Duration timeout,
                                    ProcessOptions options = {}) const;

  // Takes `host`'s link down at the bridge: from now on no packet reaches
  // it or leaves it, and nobody gets a reset or an error for it. Heal
  // brings the link back. Both are idempotent.
  absl::Status Partition(const std::string& host);
  absl::Status Heal(const std::string& host);
  // Heals every host (for a test's TearDown).
  absl::Status HealAll();

  // Moves the calling thread into `host`'s network namespace; threads it
  // starts from then on are there too. A test process that is itself a
  // client on the network calls this before anything starts threads that
  // open sockets (gRPC), from the thread that will start them.
  absl::Status Enter(const std::string& host) const;

  // A socket (AF_INET, `type`) created in `host`'s namespace; the calling
  // thread stays where it was. The caller closes it.
  absl::StatusOr<int> Socket(const std::string& host, int type) const;

  // The pids of processes whose network namespace is one of this network's
  // (this process excepted).
  std::vector<pid_t> Processes() const;

  // Kills (SIGKILL) every process in the network's namespaces (this process
  // excepted) and deletes the namespaces. Idempotent.
  void Destroy();

  // Every namespace name of this network, the bridge's included.
  std::vector<std::string> Namespaces() const;

 private:
  TestNetwork() = default;
  absl::Status Build();
  absl::Status AddHost(size_t index);
  absl::Status SetLink(const std::string& host, bool up);
  size_t IndexOf(const std::string& host) const;

  int id_ = 0;          // The <n> in the names.
  int octet_ = 0;       // The k in 10.211.k.0/24.
  int lock_fd_ = -1;    // Holds k while the network lives.
  std::string prefix_;  // "ferrytest-<pid>-<n>-"
  std::string bridge_netns_;
  std::string subnet_;
  std::vector<NetHost> hosts_;
  bool destroyed_ = false;
};

// Removes every `ferrytest-<pid>-…` namespace whose pid is not alive, after
// killing what runs in it. Returns how many it removed.
int RemoveStaleNetworks();

// The namespaces named `ferrytest-…` that exist now.
std::vector<std::string> ListTestNamespaces();

// Faults on processes: SIGSTOP, SIGCONT, SIGKILL. INTERNAL naming the pid
// if the signal cannot be sent.
absl::Status PauseProcess(pid_t pid);
absl::Status ResumeProcess(pid_t pid);
absl::Status KillProcess(pid_t pid);

// Whether `pid` is stopped (state T in /proc/PID/stat).
bool ProcessStopped(pid_t pid);

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_NETNS_H_
