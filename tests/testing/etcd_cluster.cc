#include "tests/testing/etcd_cluster.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/etcd/rpc.grpc.pb.h"
#include "tests/testing/await.h"
#include "tests/testing/daemon_cluster.h"

namespace ferry {
namespace testing {
namespace {

constexpr char kSetpriv[] = "/usr/bin/setpriv";
// Tries at starting a cluster when a picked port was taken meanwhile.
constexpr int kStartTries = 3;
// Each health probe's deadline, and the pause between probes.
constexpr absl::Duration kProbeDeadline = absl::Seconds(1);
constexpr absl::Duration kProbePause = absl::Milliseconds(50);
// How long a stopped member may take to exit before SIGKILL.
constexpr absl::Duration kStopGrace = absl::Seconds(10);

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Tail(const std::string& text, size_t bytes) {
  return text.size() <= bytes ? text : text.substr(text.size() - bytes);
}

std::string TestTmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

}  // namespace

std::string EtcdCluster::Binary() {
  const char* env = std::getenv("FERRY_ETCD");
  return env != nullptr && *env != '\0' ? env : "/usr/bin/etcd";
}

bool EtcdCluster::Installed() { return access(Binary().c_str(), X_OK) == 0; }

std::string EtcdCluster::SkipReason() {
  return absl::StrCat("etcd is not installed (", Binary(),
                      "); `tools/dev setup` installs it (Debian's "
                      "etcd-server), or set FERRY_ETCD");
}

EtcdCluster::EtcdCluster(EtcdClusterOptions options, std::string dir)
    : options_(std::move(options)),
      dir_(std::move(dir)),
      token_(absl::StrCat("ferry-test-", getpid(), "-",
                          absl::ToUnixNanos(absl::Now()))) {}

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(
    EtcdClusterOptions options) {
  if (!Installed()) return absl::FailedPreconditionError(SkipReason());
  if (options.members < 1) {
    return absl::InvalidArgumentError("an etcd cluster needs a member");
  }
  static std::atomic<int> counter{0};
  std::string dir =
      absl::StrCat(TestTmpDir(), "/etcd-", getpid(), "-", counter++);
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster(options, dir));
  absl::Status started;
  for (int attempt = 0; attempt < kStartTries; ++attempt) {
    cluster->KillAll();
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    started = cluster->PickPorts();
    for (int i = 0; started.ok() && i < cluster->size(); ++i) {
      started = cluster->Launch(i);
    }
    if (started.ok()) started = cluster->WaitHealthy(options.start_timeout);
    if (started.ok() || !cluster->PortClash()) break;
  }
  if (!started.ok()) return started;
  return cluster;
}

EtcdCluster::~EtcdCluster() {
  KillAll();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

absl::Status EtcdCluster::PickPorts() {
  std::set<int> taken;
  auto pick = [&taken]() {
    for (int tries = 0; tries < 100; ++tries) {
      int port = UnusedPort();
      if (port != 0 && taken.insert(port).second) return port;
    }
    return 0;
  };
  members_.clear();
  members_.resize(options_.members);
  for (int i = 0; i < size(); ++i) {
    Member& m = members_[i];
    int client = pick();
    int peer = pick();
    if (client == 0 || peer == 0) {
      return absl::UnavailableError("no free port on 127.0.0.1 for etcd");
    }
    m.name = absl::StrCat("m", i);
    m.client = absl::StrCat("127.0.0.1:", client);
    m.peer = absl::StrCat("127.0.0.1:", peer);
    m.data_dir = absl::StrCat(dir_, "/", m.name, ".data");
    m.log_file = absl::StrCat(dir_, "/", m.name, ".log");
  }
  return absl::OkStatus();
}

std::vector<std::string> EtcdCluster::Flags(int i) const {
  const Member& m = members_[i];
  const std::string scheme = options_.tls ? "https://" : "http://";
  std::vector<std::string> cluster;
  for (const Member& other : members_) {
    cluster.push_back(absl::StrCat(other.name, "=http://", other.peer));
  }
  std::vector<std::string> flags = {
      "--name=" + m.name,
      "--data-dir=" + m.data_dir,
      "--listen-client-urls=" + scheme + m.client,
      "--advertise-client-urls=" + scheme + m.client,
      "--listen-peer-urls=http://" + m.peer,
      "--initial-advertise-peer-urls=http://" + m.peer,
      "--initial-cluster=" + absl::StrJoin(cluster, ","),
      "--initial-cluster-state=new",
      "--initial-cluster-token=" + token_,
      "--logger=zap",
      "--log-outputs=stderr",
      // Auth tests hash passwords; etcd's default cost takes ~100 ms each.
      "--bcrypt-cost=4",
  };
  if (options_.tls) {
    flags.push_back("--cert-file=" + Runfile("tests/testdata/tls/node.pem"));
    flags.push_back("--key-file=" + Runfile("tests/testdata/tls/node.key"));
    flags.push_back("--trusted-ca-file=" +
                    Runfile("tests/testdata/tls/ca.pem"));
    flags.push_back("--client-cert-auth");
  }
  flags.insert(flags.end(), options_.extra_flags.begin(),
               options_.extra_flags.end());
  return flags;
}

// etcd runs as: sh -c 'exec setpriv --pdeathsig KILL -- etcd FLAGS >>LOG 2>&1'
// so its output never fills a pipe nobody reads, its pid is the child's,
// and it dies with the test process.
absl::Status EtcdCluster::Launch(int i) {
  Member& m = members_[i];
  std::vector<std::string> argv = {
      "/bin/sh", "-c", "exec \"$0\" \"$@\" >>\"$FERRY_ETCD_LOG\" 2>&1"};
  if (access(kSetpriv, X_OK) == 0) {
    argv.insert(argv.end(), {kSetpriv, "--pdeathsig", "KILL", "--"});
  }
  argv.push_back(Binary());
  std::vector<std::string> flags = Flags(i);
  argv.insert(argv.end(), flags.begin(), flags.end());
  ProcessOptions options;
  options.env = {{"FERRY_ETCD_LOG", m.log_file}};
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> process =
      BackgroundProcess::Start(argv, options);
  if (!process.ok()) return process.status();
  m.process = *std::move(process);
  return absl::OkStatus();
}

absl::Status EtcdCluster::Kill(int i) {
  Member& m = members_[i];
  if (m.process == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd member ", m.name, " is not running"));
  }
  kill(m.process->pid(), SIGKILL);
  m.process->Wait(kStopGrace);
  m.process.reset();
  return absl::OkStatus();
}

absl::Status EtcdCluster::Stop(int i) {
  Member& m = members_[i];
  if (m.process == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd member ", m.name, " is not running"));
  }
  kill(m.process->pid(), SIGTERM);
  ProcessResult r = m.process->Wait(kStopGrace);
  m.process.reset();
  if (r.timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat("etcd member ", m.name, " ignored SIGTERM for ",
                     absl::FormatDuration(kStopGrace), "; killed"));
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::Restart(int i) {
  if (members_[i].process != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd member ", members_[i].name, " is running"));
  }
  absl::Status launched = Launch(i);
  if (!launched.ok()) return launched;
  return WaitHealthy(options_.start_timeout);
}

void EtcdCluster::KillAll() {
  for (int i = 0; i < size(); ++i) {
    if (members_[i].process != nullptr) Kill(i).IgnoreError();
  }
}

bool EtcdCluster::PortClash() const {
  for (int i = 0; i < size(); ++i) {
    if (absl::StrContains(Log(i), "address already in use")) return true;
  }
  return false;
}

std::shared_ptr<grpc::Channel> EtcdCluster::Channel(int i) const {
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (options_.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(tls_ca_file());
    ssl.pem_cert_chain = ReadFile(tls_cert_file());
    ssl.pem_private_key = ReadFile(tls_key_file());
    credentials = grpc::SslCredentials(ssl);
  }
  return grpc::CreateChannel(members_[i].client, credentials);
}

grpc::Status EtcdCluster::MemberStatus(
    int i, etcdserverpb::StatusResponse* status) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kProbeDeadline));
  return etcdserverpb::Maintenance::NewStub(Channel(i))
      ->Status(&context, etcdserverpb::StatusRequest(), status);
}

absl::StatusOr<int> EtcdCluster::LeaderIndex() const {
  std::vector<uint64_t> ids(size(), 0);
  uint64_t leader = 0;
  for (int i = 0; i < size(); ++i) {
    etcdserverpb::StatusResponse status;
    if (!running(i) || !MemberStatus(i, &status).ok()) continue;
    ids[i] = status.header().member_id();
    if (status.leader() != 0) leader = status.leader();
  }
  for (int i = 0; i < size(); ++i) {
    if (leader != 0 && ids[i] == leader) return i;
  }
  return absl::UnavailableError("no running etcd member leads");
}

absl::Status EtcdCluster::MemberHealthy(int i, bool read) const {
  std::shared_ptr<grpc::Channel> channel = Channel(i);
  etcdserverpb::StatusResponse status;
  grpc::Status s = MemberStatus(i, &status);
  if (!s.ok() || status.leader() == 0) {
    return absl::UnavailableError(absl::StrCat(
        "etcd member ", members_[i].name, " at ", members_[i].client, ": ",
        s.ok() ? "no leader" : s.error_message()));
  }
  if (!read) return absl::OkStatus();
  grpc::ClientContext read_context;
  read_context.set_deadline(absl::ToChronoTime(absl::Now() + kProbeDeadline));
  etcdserverpb::RangeRequest range;
  range.set_key("health");
  etcdserverpb::RangeResponse ignored;
  s = etcdserverpb::KV::NewStub(channel)->Range(&read_context, range, &ignored);
  // With auth on, an anonymous read is refused, but only after the member
  // checked its leader: that is healthy enough.
  if (!s.ok() && s.error_code() != grpc::StatusCode::INVALID_ARGUMENT &&
      s.error_code() != grpc::StatusCode::PERMISSION_DENIED) {
    return absl::UnavailableError(absl::StrCat("etcd member ", members_[i].name,
                                               " at ", members_[i].client,
                                               ": read: ", s.error_message()));
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::WaitHealthy(absl::Duration timeout) const {
  absl::Status last;
  std::string exited;  // A member that exited: no point waiting on.
  AwaitTrue(
      [&] {
        last = absl::OkStatus();
        bool read = false;
        for (int i = 0; i < size() && last.ok(); ++i) {
          if (members_[i].process == nullptr) continue;
          if (members_[i].process->Exited()) {
            exited = members_[i].name;
            return true;
          }
          last = MemberHealthy(i, /*read=*/!read);
          read = true;
        }
        return last.ok();
      },
      timeout, kProbePause);
  if (!exited.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd member ", exited, " exited\n", Logs()));
  }
  if (last.ok()) return last;
  return absl::FailedPreconditionError(
      absl::StrCat("etcd not healthy within ", absl::FormatDuration(timeout),
                   ": ", last.message(), "\n", Logs()));
}

std::string EtcdCluster::endpoints() const {
  return absl::StrJoin(endpoint_list(), ",");
}

std::vector<std::string> EtcdCluster::endpoint_list() const {
  std::vector<std::string> list;
  for (const Member& m : members_) list.push_back(m.client);
  return list;
}

int EtcdCluster::IndexOf(const std::string& endpoint) const {
  for (int i = 0; i < size(); ++i) {
    if (members_[i].client == endpoint) return i;
  }
  return -1;
}

std::string EtcdCluster::Log(int i) const {
  return ReadFile(members_[i].log_file);
}

std::string EtcdCluster::Logs() const {
  std::string all;
  for (int i = 0; i < size(); ++i) {
    absl::StrAppend(&all, "--- etcd ", members_[i].name, " (",
                    members_[i].client, ") log tail ---\n", Tail(Log(i), 3000),
                    "\n");
  }
  return all;
}

std::string EtcdCluster::tls_ca_file() const {
  return Runfile("tests/testdata/tls/ca.pem");
}

std::string EtcdCluster::tls_cert_file() const {
  return Runfile("tests/testdata/tls/node.pem");
}

std::string EtcdCluster::tls_key_file() const {
  return Runfile("tests/testdata/tls/node.key");
}

}  // namespace testing
}  // namespace ferry
