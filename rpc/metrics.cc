#include "rpc/metrics.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "prometheus/client_metric.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"
#include "rpc/base/status_util.h"
#include "rpc/membership/directory.h"

namespace ferry {

namespace {

constexpr char kOther[] = "(other)";
constexpr size_t kCodes = 17;
constexpr char kSeparator = '\x1f';

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

MetricFamily Family(std::string name, std::string help, MetricType type) {
  return MetricFamily{std::move(name), std::move(help), type, {}};
}

ClientMetric Sample(std::vector<ClientMetric::Label> labels) {
  ClientMetric m;
  m.label = std::move(labels);
  return m;
}

ClientMetric::Histogram ToPrometheus(const Histogram::Snapshot& s) {
  ClientMetric::Histogram h;
  h.sample_count = s.count;
  h.sample_sum = s.sum_seconds;
  for (size_t i = 0; i < s.bounds.size(); ++i) {
    h.bucket.push_back({s.cumulative[i], s.bounds[i]});
  }
  h.bucket.push_back(
      {s.cumulative.back(), std::numeric_limits<double>::infinity()});
  return h;
}

int CodeIndex(absl::StatusCode code) {
  const int c = static_cast<int>(code);
  return c >= 0 && c < static_cast<int>(kCodes) ? c : 2;  // UNKNOWN.
}

}  // namespace

const std::vector<double>& LatencyBounds() {
  static const auto* bounds = new std::vector<double>{
      0,     0.00001, 0.00005, 0.0001, 0.0003, 0.0006, 0.0008, 0.001, 0.002,
      0.003, 0.004,   0.005,   0.006,  0.008,  0.01,   0.013,  0.016, 0.02,
      0.025, 0.03,    0.04,    0.05,   0.065,  0.08,   0.1,    0.13,  0.16,
      0.2,   0.25,    0.3,     0.4,    0.5,    0.65,   0.8,    1,     2,
      5,     10,      20,      50,     100};
  return *bounds;
}

// ---- Histogram ----

Histogram::Histogram(const std::vector<double>& bounds)
    : bounds_(bounds), counts_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::Observe(absl::Duration d) {
  // Nanoseconds once, for both (ToDoubleSeconds divides Durations: twice
  // the instructions, on every call's both ends).
  const int64_t nanos = absl::ToInt64Nanoseconds(d);
  const double seconds = static_cast<double>(nanos) / 1e9;
  // The first bound >= the value: Prometheus' buckets are "le".
  const size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) -
                   bounds_.begin();
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(nanos, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(total);
  }
  s.count = total;
  s.sum_seconds =
      static_cast<double>(sum_nanos_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

// ---- CallMetrics ----

CallMetrics::~CallMetrics() {
  for (auto& slot : by_code_) delete slot.load();
}

void CallMetrics::Finished(absl::StatusCode code, absl::Duration elapsed) {
  std::atomic<ByCode*>& slot = by_code_[CodeIndex(code)];
  ByCode* stats = slot.load(std::memory_order_acquire);
  if (stats == nullptr) {
    // The first finish with this code: made once; a racing maker's is
    // dropped.
    auto* made = new ByCode();
    if (slot.compare_exchange_strong(stats, made, std::memory_order_acq_rel)) {
      stats = made;
    } else {
      delete made;
    }
  }
  stats->finished.fetch_add(1, std::memory_order_relaxed);
  stats->duration.Observe(elapsed);
}

// ---- Metrics ----

Metrics::Metrics(Options options)
    : options_(std::move(options)),
      peers_(new PeerBytes[std::max(options_.world_size, 0) + 1]) {}

Metrics::~Metrics() = default;

void Metrics::SetSources(std::function<proto::WorkerStatus()> status,
                         std::function<std::string(int rank)> rank_name) {
  absl::MutexLock lock(&mu_);
  status_ = std::move(status);
  rank_name_ = std::move(rank_name);
}

namespace {

std::atomic<uint64_t> next_functions_id{1};

// The slots this thread found last: every call looks its function up
// twice (as client and server), and the map's reader lock and hash were
// most of what metrics cost a small call (callgrind). Keyed by the map's
// id, never reused, so an entry of a destroyed Metrics is never matched.
struct SlotCache {
  static constexpr int kEntries = 4;
  struct Entry {
    uint64_t functions_id = 0;
    std::string function;
    CallMetrics* slot = nullptr;
  };
  Entry entries[kEntries];
  int next = 0;

  CallMetrics* Find(uint64_t id, absl::string_view function) const {
    for (const Entry& e : entries) {
      if (e.functions_id == id && e.function == function) return e.slot;
    }
    return nullptr;
  }
  void Put(uint64_t id, absl::string_view function, CallMetrics* slot) {
    Entry& e = entries[next];
    next = (next + 1) % kEntries;
    e.functions_id = id;
    e.function.assign(function.data(), function.size());
    e.slot = slot;
  }
};

thread_local SlotCache slot_cache;

}  // namespace

Metrics::Functions::Functions()
    : id(next_functions_id.fetch_add(1, std::memory_order_relaxed)) {}

CallMetrics* Metrics::Slot(Functions& f, absl::string_view function) {
  if (CallMetrics* cached = slot_cache.Find(f.id, function)) return cached;
  CallMetrics* found = LockedSlot(f, function);
  slot_cache.Put(f.id, function, found);
  return found;
}

CallMetrics* Metrics::LockedSlot(Functions& f, absl::string_view function) {
  {
    absl::ReaderMutexLock lock(&f.mu);
    auto it = f.by_name.find(function);
    if (it != f.by_name.end()) return it->second.get();
  }
  absl::MutexLock lock(&f.mu);
  if (f.by_name.size() >= kMaxLabels && !f.by_name.contains(function)) {
    function = kOther;
  }
  std::unique_ptr<CallMetrics>& slot = f.by_name[function];
  if (slot == nullptr) slot = std::make_unique<CallMetrics>();
  return slot.get();
}

CallMetrics* Metrics::ClientStarted(absl::string_view function) {
  CallMetrics* m = Slot(client_, function);
  m->Started();
  return m;
}

CallMetrics* Metrics::ServerStarted(absl::string_view function) {
  CallMetrics* m = Slot(server_, function);
  m->Started();
  return m;
}

Metrics::PeerBytes* Metrics::Peer(uint64_t node) {
  const uint64_t clients = static_cast<uint64_t>(options_.world_size);
  return &peers_[IsWorkerNode(node) && node < clients ? node : clients];
}

void Metrics::Sent(uint64_t node, Traffic kind, int64_t bytes) {
  Peer(node)->sent[static_cast<int>(kind)].fetch_add(
      static_cast<uint64_t>(std::max<int64_t>(bytes, 0)),
      std::memory_order_relaxed);
}

void Metrics::Received(uint64_t node, Traffic kind, int64_t bytes) {
  Peer(node)->received[static_cast<int>(kind)].fetch_add(
      static_cast<uint64_t>(std::max<int64_t>(bytes, 0)),
      std::memory_order_relaxed);
}

void Metrics::CollectiveEnded(absl::string_view op, absl::string_view group,
                              absl::StatusCode code, absl::Duration elapsed) {
  std::string key = absl::StrCat(op, std::string(1, kSeparator), group);
  Collective* c;
  {
    absl::MutexLock lock(&mu_);
    if (collectives_.size() >= kMaxLabels && !collectives_.contains(key)) {
      key = absl::StrCat(kOther, std::string(1, kSeparator), kOther);
    }
    std::unique_ptr<Collective>& slot = collectives_[key];
    if (slot == nullptr) slot = std::make_unique<Collective>();
    c = slot.get();
  }
  c->by_code[CodeIndex(code)].fetch_add(1, std::memory_order_relaxed);
  c->duration.Observe(elapsed);
}

// ---- Exposition ----

void Metrics::CollectCalls(std::vector<MetricFamily>* out) const {
  for (const auto& [side, functions] : {std::make_pair("client", &client_),
                                        std::make_pair("server", &server_)}) {
    MetricFamily started =
        Family(absl::StrCat("ferry_rpc_", side, "_calls_started_total"),
               absl::StrCat("Calls started as the ", side, ", by function"),
               MetricType::Counter);
    MetricFamily finished =
        Family(absl::StrCat("ferry_rpc_", side, "_calls_finished_total"),
               absl::StrCat("Calls finished as the ", side,
                            ", by function and status code"),
               MetricType::Counter);
    MetricFamily duration =
        Family(absl::StrCat("ferry_rpc_", side, "_call_duration_seconds"),
               absl::StrCat("Latency of calls as the ", side,
                            ", by function and status code (gRFC A66 buckets)"),
               MetricType::Histogram);
    absl::ReaderMutexLock lock(&functions->mu);
    for (const auto& [name, m] : functions->by_name) {
      ClientMetric s =
          Sample({{"function", name}, {"worker", options_.worker}});
      s.counter.value = static_cast<double>(m->started());
      started.metric.push_back(s);
      for (size_t code = 0; code < kCodes; ++code) {
        const CallMetrics::ByCode* c = m->by_code(code);
        if (c == nullptr) continue;
        ClientMetric f = Sample(
            {{"code", StatusCodeName(static_cast<absl::StatusCode>(code))},
             {"function", name},
             {"worker", options_.worker}});
        f.counter.value = static_cast<double>(c->finished.load());
        finished.metric.push_back(f);
        f.histogram = ToPrometheus(c->duration.Read());
        duration.metric.push_back(std::move(f));
      }
    }
    out->push_back(std::move(started));
    out->push_back(std::move(finished));
    out->push_back(std::move(duration));
  }
}

void Metrics::CollectPeers(std::vector<MetricFamily>* out) const {
  std::function<std::string(int)> name;
  {
    absl::MutexLock lock(&mu_);
    name = rank_name_;
  }
  MetricFamily sent = Family("ferry_peer_sent_bytes_total",
                             "Bytes sent to each peer: call requests and "
                             "replies, and collective messages (call_shm: "
                             "a caller's requests in memory files)",
                             MetricType::Counter);
  MetricFamily received = Family("ferry_peer_received_bytes_total",
                                 "Bytes received from each peer: call "
                                 "requests and replies, and collective "
                                 "messages (call_shm: a caller's replies in "
                                 "memory files)",
                                 MetricType::Counter);
  for (int i = 0; i <= options_.world_size; ++i) {
    const std::string peer = i == options_.world_size
                                 ? "client"
                                 : (name ? name(i) : absl::StrCat("worker", i));
    static constexpr const char* kKinds[kTrafficKinds] = {"call", "collective",
                                                          "call_shm"};
    for (int kind = 0; kind < kTrafficKinds; ++kind) {
      const uint64_t s = peers_[i].sent[kind].load();
      const uint64_t r = peers_[i].received[kind].load();
      if (s == 0 && r == 0) continue;
      ClientMetric m = Sample({{"kind", kKinds[kind]},
                               {"peer", peer},
                               {"worker", options_.worker}});
      m.counter.value = static_cast<double>(s);
      sent.metric.push_back(m);
      m.counter.value = static_cast<double>(r);
      received.metric.push_back(std::move(m));
    }
  }
  out->push_back(std::move(sent));
  out->push_back(std::move(received));
}

void Metrics::CollectCollectives(std::vector<MetricFamily>* out) const {
  MetricFamily ops = Family("ferry_collectives_total",
                            "Collective ops ended here, by op, group and "
                            "status code",
                            MetricType::Counter);
  MetricFamily duration = Family("ferry_collective_duration_seconds",
                                 "Latency of collective ops here (from the "
                                 "call to the end), by op and group",
                                 MetricType::Histogram);
  absl::MutexLock lock(&mu_);
  for (const auto& [key, c] : collectives_) {
    std::pair<std::string, std::string> op_group =
        absl::StrSplit(key, absl::MaxSplits(kSeparator, 1));
    for (size_t code = 0; code < kCodes; ++code) {
      const uint64_t n = c->by_code[code].load();
      if (n == 0) continue;
      ClientMetric m =
          Sample({{"code", StatusCodeName(static_cast<absl::StatusCode>(code))},
                  {"group", op_group.second},
                  {"op", op_group.first},
                  {"worker", options_.worker}});
      m.counter.value = static_cast<double>(n);
      ops.metric.push_back(std::move(m));
    }
    ClientMetric h = Sample({{"group", op_group.second},
                             {"op", op_group.first},
                             {"worker", options_.worker}});
    h.histogram = ToPrometheus(c->duration.Read());
    duration.metric.push_back(std::move(h));
  }
  out->push_back(std::move(ops));
  out->push_back(std::move(duration));
}

void Metrics::CollectStatus(std::vector<MetricFamily>* out) const {
  std::function<proto::WorkerStatus()> source;
  {
    absl::MutexLock lock(&mu_);
    source = status_;
  }
  if (!source) return;
  // Read outside mu_: the status calls into every layer.
  const proto::WorkerStatus s = source();
  auto gauge = [&](const char* name, const char* help, double value,
                   std::vector<ClientMetric::Label> labels = {}) {
    labels.push_back({"worker", options_.worker});
    MetricFamily f = Family(name, help, MetricType::Gauge);
    ClientMetric m = Sample(std::move(labels));
    m.gauge.value = value;
    f.metric.push_back(std::move(m));
    out->push_back(std::move(f));
  };
  gauge("ferry_rrefs_owned", "RRefs this worker owns (holds the value of)",
        static_cast<double>(s.owned_rrefs()));
  gauge("ferry_rref_forks_held",
        "Copies (forks) of other workers' RRefs this worker holds",
        static_cast<double>(s.user_rrefs()));
  gauge("ferry_mailbox_bytes",
        "Collective messages received before their op ran here, in bytes",
        static_cast<double>(s.mailbox_bytes()));
  gauge("ferry_calls_inflight",
        "Calls executing here and calls this worker waits on",
        static_cast<double>(s.inflight()));
  gauge("ferry_collectives_inflight", "Collective ops running here",
        static_cast<double>(s.collectives_inflight()));
  MetricFamily peers =
      Family("ferry_peers", "Other workers of the job, alive or dead (or gone)",
             MetricType::Gauge);
  const int others = std::max(options_.world_size - 1, 0);
  const int dead = std::min(s.dead_peers_size(), others);
  for (const auto& [state, n] :
       {std::make_pair("alive", others - dead), std::make_pair("dead", dead)}) {
    ClientMetric m = Sample({{"state", state}, {"worker", options_.worker}});
    m.gauge.value = n;
    peers.metric.push_back(std::move(m));
  }
  out->push_back(std::move(peers));
}

std::vector<MetricFamily> Metrics::Collect() const {
  std::vector<MetricFamily> out;
  CollectCalls(&out);
  CollectPeers(&out);
  CollectCollectives(&out);
  MetricFamily heartbeat =
      Family("ferry_heartbeat_rtt_seconds",
             "Round trip of a health check to the master over the heartbeat "
             "connection (workers but the master, on the embedded master)",
             MetricType::Histogram);
  ClientMetric h = Sample({{"worker", options_.worker}});
  h.histogram = ToPrometheus(heartbeat_.Read());
  heartbeat.metric.push_back(std::move(h));
  out.push_back(std::move(heartbeat));
  CollectStatus(&out);
  return out;
}

std::string Metrics::Text() const {
  return prometheus::TextSerializer().Serialize(Collect());
}

std::string MergeExpositions(const std::vector<std::string>& texts) {
  struct Merged {
    std::string header;  // "# HELP …\n# TYPE …\n"
    std::string samples;
  };
  std::vector<std::string> order;
  std::map<std::string, Merged> families;
  for (const std::string& text : texts) {
    std::string current;
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (line.empty()) continue;
      if (absl::StartsWith(line, "# ")) {
        std::vector<absl::string_view> words =
            absl::StrSplit(line, absl::MaxSplits(' ', 3));
        if (words.size() < 3) continue;
        current = std::string(words[2]);
        auto [it, added] = families.try_emplace(current);
        if (added) order.push_back(current);
        // Each family's HELP and TYPE from the first text that has them.
        if (it->second.samples.empty() &&
            !absl::StrContains(it->second.header,
                               absl::StrCat("# ", words[1], " "))) {
          absl::StrAppend(&it->second.header, line, "\n");
        }
        continue;
      }
      if (current.empty()) continue;
      absl::StrAppend(&families[current].samples, line, "\n");
    }
  }
  std::string out;
  for (const std::string& name : order) {
    absl::StrAppend(&out, families[name].header, families[name].samples);
  }
  return out;
}

}  // namespace ferry
