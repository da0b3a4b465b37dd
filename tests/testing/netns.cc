#include "tests/testing/netns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"

namespace ferry {
namespace testing {

namespace {

constexpr char kPrefix[] = "ferrytest-";
constexpr char kNetnsDir[] = "/run/netns";
// The /24s are 10.211.k.0/24 with k in [kFirstOctet, kFirstOctet + kOctets).
constexpr int kFirstOctet = 1;
constexpr int kOctets = 250;
constexpr char kLockDir[] = "/run/lock/ferry-testnet";
constexpr absl::Duration kIpTimeout = absl::Seconds(20);
constexpr absl::Duration kKillBound = absl::Seconds(10);

absl::Status ErrnoStatus(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", strerror(errno)));
}

// iproute2's `ip`, wherever the distribution put it; empty if absent.
const std::string& IpPath() {
  static const std::string* path = [] {
    for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
      if (access(p, X_OK) == 0) return new std::string(p);
    return new std::string();
  }();
  return *path;
}

// Runs `ip ARGS` (stdin: `batch` if non-empty, for `-batch -`).
absl::Status Ip(std::vector<std::string> args, std::string batch = "") {
  if (IpPath().empty()) {
    return absl::FailedPreconditionError("iproute2's ip is not installed");
  }
  args.insert(args.begin(), IpPath());
  ProcessOptions o;
  if (!batch.empty()) o.stdin_text = std::move(batch);
  absl::StatusOr<ProcessResult> r = RunProcess(args, o, kIpTimeout);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    return absl::InternalError(absl::StrCat(
        absl::StrJoin(args, " "), ": ",
        absl::StripAsciiWhitespace(r->err.empty() ? r->out : r->err)));
  }
  return absl::OkStatus();
}

std::string NetnsPath(const std::string& netns) {
  return absl::StrCat(kNetnsDir, "/", netns);
}

// The identity of a namespace file (a /run/netns mount or /proc/PID/ns/net).
bool NamespaceId(const std::string& path, std::pair<dev_t, ino_t>* id) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return false;
  *id = {st.st_dev, st.st_ino};
  return true;
}

// Processes (not this one) whose network namespace is one of `netns`.
std::vector<pid_t> ProcessesIn(const std::vector<std::string>& netns) {
  std::set<std::pair<dev_t, ino_t>> ids;
  for (const std::string& n : netns) {
    std::pair<dev_t, ino_t> id;
    if (NamespaceId(NetnsPath(n), &id)) ids.insert(id);
  }
  std::vector<pid_t> pids;
  DIR* proc = opendir("/proc");
  if (proc == nullptr || ids.empty()) {
    if (proc != nullptr) closedir(proc);
    return pids;
  }
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid == getpid()) continue;
    std::pair<dev_t, ino_t> id;
    if (NamespaceId(absl::StrCat("/proc/", pid, "/ns/net"), &id) &&
        ids.count(id) > 0) {
      pids.push_back(pid);
    }
  }
  closedir(proc);
  return pids;
}

// SIGKILLs everything in `netns`, waits (bounded) until it is gone, then
// deletes the namespaces. Reaping is left to the processes' parents.
void RemoveNamespaces(const std::vector<std::string>& netns) {
  std::vector<pid_t> pids = ProcessesIn(netns);
  for (pid_t pid : pids) kill(pid, SIGKILL);
  for (pid_t pid : pids) WaitForPidGone(pid, kKillBound);
  for (const std::string& n : netns) {
    // A host's deletion takes its veth (and so the bridge port) with it.
    if (access(NetnsPath(n).c_str(), F_OK) == 0)
      Ip({"netns", "del", n}).IgnoreError();
  }
}

// The pid in `ferrytest-<pid>-…`, or 0.
pid_t OwnerPid(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix)) return 0;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '-');
  int pid = 0;
  return !parts.empty() && absl::SimpleAtoi(parts[0], &pid) ? pid : 0;
}

// Networks not yet destroyed, destroyed at exit (a test that failed an
// ASSERT in a helper may never reach the destructor of its network).
class LiveNetworks {
 public:
  static LiveNetworks& Get() {
    static LiveNetworks* live = [] {
      auto* l = new LiveNetworks();
      std::atexit([] { LiveNetworks::Get().DestroyAll(); });
      return l;
    }();
    return *live;
  }
  void Add(TestNetwork* n) {
    absl::MutexLock lock(&mu_);
    live_.insert(n);
  }
  void Remove(TestNetwork* n) {
    absl::MutexLock lock(&mu_);
    live_.erase(n);
  }
  void DestroyAll() {
    std::set<TestNetwork*> live;
    {
      absl::MutexLock lock(&mu_);
      live.swap(live_);
    }
    for (TestNetwork* n : live) n->Destroy();
  }

 private:
  absl::Mutex mu_;
  std::set<TestNetwork*> live_ ABSL_GUARDED_BY(mu_);
};

// Takes the first free third octet, starting from one derived from our pid
// so concurrent tests rarely even try the same one. flock: released by the
// kernel when we die, so a killed test holds nothing.
absl::Status LockOctet(int start, int* octet, int* fd) {
  mkdir("/run/lock", 0755);
  mkdir(kLockDir, 0755);
  for (int i = 0; i < kOctets; ++i) {
    int k = kFirstOctet + (start + i) % kOctets;
    int f = open(absl::StrCat(kLockDir, "/", k).c_str(),
                 O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0) return ErrnoStatus(absl::StrCat("open ", kLockDir));
    if (flock(f, LOCK_EX | LOCK_NB) == 0) {
      *octet = k;
      *fd = f;
      return absl::OkStatus();
    }
    close(f);
  }
  return absl::ResourceExhaustedError(
      "every test subnet 10.211.*.0/24 is in use");
}

bool ValidHostName(const std::string& name) {
  return !name.empty() && name.size() <= 12 && name != "bridge" &&
         std::all_of(name.begin(), name.end(), [](char c) {
           return absl::ascii_islower(c) || absl::ascii_isdigit(c);
         });
}

// Runs the calling thread in `netns` until destroyed, then back where it
// was.
class ScopedNetns {
 public:
  explicit ScopedNetns(const std::string& netns) {
    home_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int target = open(NetnsPath(netns).c_str(), O_RDONLY | O_CLOEXEC);
    if (home_ < 0 || target < 0) {
      status_ = ErrnoStatus(absl::StrCat("open namespace ", netns));
    } else if (setns(target, CLONE_NEWNET) != 0) {
      status_ = ErrnoStatus(absl::StrCat("setns ", netns));
    }
    if (target >= 0) close(target);
  }
  ~ScopedNetns() {
    if (status_.ok() && setns(home_, CLONE_NEWNET) != 0) std::abort();
    if (home_ >= 0) close(home_);
  }
  const absl::Status& status() const { return status_; }

 private:
  int home_ = -1;
  absl::Status status_;
};

}  // namespace

absl::Status TestNetwork::Available() {
  static const absl::Status* status = [] {
    if (geteuid() != 0) {
      return new absl::Status(absl::FailedPreconditionError(
          "test networks need root (network namespaces, veth, bridge)"));
    }
    if (IpPath().empty()) {
      return new absl::Status(absl::FailedPreconditionError(
          "test networks need iproute2's ip (tools/dev setup installs it)"));
    }
    const std::string probe = absl::StrCat(kPrefix, getpid(), "-probe");
    absl::Status s = Ip({"netns", "add", probe});
    if (s.ok()) s = Ip({"-n", probe, "link", "add", "b0", "type", "bridge"});
    Ip({"netns", "del", probe}).IgnoreError();
    if (!s.ok()) {
      return new absl::Status(absl::FailedPreconditionError(absl::StrCat(
          "network namespaces are unavailable here: ", s.message())));
    }
    return new absl::Status();
  }();
  return *status;
}

absl::StatusOr<std::unique_ptr<TestNetwork>> TestNetwork::Create(
    const std::vector<std::string>& hosts) {
  if (absl::Status s = Available(); !s.ok()) return s;
  std::set<std::string> seen;
  for (const std::string& h : hosts) {
    if (!ValidHostName(h) || !seen.insert(h).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host name '", h, "' must be unique, 1-12 of [a-z0-9], not bridge"));
    }
  }
  if (hosts.empty() || hosts.size() > 200) {
    return absl::InvalidArgumentError("a network has 1-200 hosts");
  }
  RemoveStaleNetworks();
  static std::atomic<int> next_id{0};
  std::unique_ptr<TestNetwork> net(new TestNetwork());
  net->id_ = next_id++;
  net->prefix_ = absl::StrCat(kPrefix, getpid(), "-", net->id_, "-");
  net->bridge_netns_ = net->prefix_ + "bridge";
  for (const std::string& h : hosts)
    net->hosts_.push_back({h, net->prefix_ + h, ""});
  absl::Status locked =
      LockOctet(getpid() * 7 + net->id_ * 13, &net->octet_, &net->lock_fd_);
  if (!locked.ok()) return locked;
  net->subnet_ = absl::StrCat("10.211.", net->octet_, ".0/24");
  LiveNetworks::Get().Add(net.get());
  if (absl::Status s = net->Build(); !s.ok()) return s;  // ~ cleans up.
  return net;
}

absl::Status TestNetwork::Build() {
  if (absl::Status s = Ip({"netns", "add", bridge_netns_}); !s.ok()) return s;
  if (absl::Status s = Ip({"-n", bridge_netns_, "-batch", "-"},
                          "link add br0 type bridge\nlink set br0 up\n");
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < hosts_.size(); ++i) {
    hosts_[i].address = absl::StrCat("10.211.", octet_, ".", i + 2);
  }
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (absl::Status s = AddHost(i); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// A host: its namespace, a veth pair (eth0 there, p<i> on the bridge), its
// address, loopback up, and every other host as a permanent neighbour (so
// a partition is silence, never an ARP failure).
absl::Status TestNetwork::AddHost(size_t i) {
  const NetHost& h = hosts_[i];
  auto mac = [&](size_t j) {
    return absl::StrFormat("02:fe:0a:d3:%02x:%02x", octet_, j + 2);
  };
  if (absl::Status s = Ip({"netns", "add", h.netns}); !s.ok()) return s;
  std::string bridge = absl::StrCat(
      "link add p", i, " type veth peer name eth0 address ", mac(i), " netns ",
      h.netns, "\nlink set p", i, " master br0\nlink set p", i, " up\n");
  if (absl::Status s = Ip({"-n", bridge_netns_, "-batch", "-"}, bridge);
      !s.ok()) {
    return s;
  }
  std::string host = absl::StrCat("link set lo up\naddr add ", h.address,
                                  "/24 dev eth0\nlink set eth0 up\n");
  for (size_t j = 0; j < hosts_.size(); ++j) {
    if (j == i) continue;
    absl::StrAppend(&host, "neigh replace ", hosts_[j].address, " lladdr ",
                    mac(j), " dev eth0 nud permanent\n");
  }
  return Ip({"-n", h.netns, "-batch", "-"}, host);
}

TestNetwork::~TestNetwork() { Destroy(); }

void TestNetwork::Destroy() {
  if (destroyed_) return;
  destroyed_ = true;
  LiveNetworks::Get().Remove(this);
  RemoveNamespaces(Namespaces());
  if (lock_fd_ >= 0) close(lock_fd_);
  lock_fd_ = -1;
}

std::vector<std::string> TestNetwork::Namespaces() const {
  std::vector<std::string> names;
  for (const NetHost& h : hosts_) names.push_back(h.netns);
  names.push_back(bridge_netns_);
  return names;
}

std::vector<pid_t> TestNetwork::Processes() const {
  return ProcessesIn(Namespaces());
}

size_t TestNetwork::IndexOf(const std::string& host) const {
  for (size_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i].name == host) return i;
  }
  std::fprintf(stderr, "TestNetwork: no host named '%s'\n", host.c_str());
  std::abort();
}

const NetHost& TestNetwork::host(const std::string& name) const {
  return hosts_[IndexOf(name)];
}

absl::StatusOr<std::unique_ptr<BackgroundProcess>> TestNetwork::Start(
    const std::string& host, const std::vector<std::string>& argv,
    ProcessOptions options) const {
  const NetHost& h = hosts_[IndexOf(host)];
  options.netns = NetnsPath(h.netns);
  options.hostname = h.name;
  options.die_with_parent = true;
  return BackgroundProcess::Start(argv, options);
}

absl::StatusOr<ProcessResult> TestNetwork::Run(
    const std::string& host, const std::vector<std::string>& argv,
    absl::Duration timeout, ProcessOptions options) const {
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> p =
      Start(host, argv, std::move(options));
  if (!p.ok()) return p.status();
  return (*p)->Wait(timeout);
}

absl::Status TestNetwork::SetLink(const std::string& host, bool up) {
  return Ip({"-n", bridge_netns_, "link", "set",
             absl::StrCat("p", IndexOf(host)), up ? "up" : "down"});
}

absl::Status TestNetwork::Partition(const std::string& host) {
  return SetLink(host, false);
}

absl::Status TestNetwork::Heal(const std::string& host) {
  return SetLink(host, true);
}

absl::Status TestNetwork::HealAll() {
  absl::Status first;
  for (const NetHost& h : hosts_) first.Update(Heal(h.name));
  return first;
}

absl::Status TestNetwork::Enter(const std::string& host) const {
  const NetHost& h = hosts_[IndexOf(host)];
  int fd = open(NetnsPath(h.netns).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(absl::StrCat("open namespace ", h.netns));
  int rc = setns(fd, CLONE_NEWNET);
  close(fd);
  if (rc != 0) return ErrnoStatus(absl::StrCat("setns ", h.netns));
  return absl::OkStatus();
}

absl::StatusOr<int> TestNetwork::Socket(const std::string& host,
                                        int type) const {
  ScopedNetns in(hosts_[IndexOf(host)].netns);
  if (!in.status().ok()) return in.status();
  int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus("socket");
  return fd;
}

std::vector<std::string> ListTestNamespaces() {
  std::vector<std::string> names;
  DIR* dir = opendir(kNetnsDir);
  if (dir == nullptr) return names;
  while (dirent* e = readdir(dir)) {
    if (absl::StartsWith(e->d_name, kPrefix)) names.push_back(e->d_name);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

int RemoveStaleNetworks() {
  std::vector<std::string> stale;
  for (const std::string& n : ListTestNamespaces()) {
    pid_t owner = OwnerPid(n);
    if (owner > 0 && owner != getpid() && !PidAlive(owner)) stale.push_back(n);
  }
  RemoveNamespaces(stale);
  return static_cast<int>(stale.size());
}

namespace {

absl::Status Signal(pid_t pid, int sig) {
  if (pid <= 0 || kill(pid, sig) != 0) {
    return absl::InternalError(absl::StrCat("cannot send ", strsignal(sig),
                                            " to pid ", pid, ": ",
                                            strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PauseProcess(pid_t pid) { return Signal(pid, SIGSTOP); }
absl::Status ResumeProcess(pid_t pid) { return Signal(pid, SIGCONT); }
absl::Status KillProcess(pid_t pid) { return Signal(pid, SIGKILL); }

bool ProcessStopped(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream s;
  s << in.rdbuf();
  const std::string stat = s.str();
  size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() &&
         (stat[paren + 2] == 'T' || stat[paren + 2] == 't');
}

}  // namespace testing
}  // namespace ferry
