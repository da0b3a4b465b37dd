// A worker's metrics, in Prometheus' data model: calls started and
// finished (by function and status code) with their latency, bytes to and
// from each peer, collectives by op and group with their latency, and —
// read from the worker's status when scraped — RRefs owned and held,
// mailbox bytes, peers alive and dead; the heartbeat's round trip.
//
//   Metrics metrics({.worker = "worker1", .world_size = 4});
//   CallMetrics* m = metrics.ServerStarted("add");      // one lookup
//   …
//   metrics.ServerFinished(m, absl::StatusCode::kOk, elapsed);
//   std::string text = metrics.Text();                  // /metrics
//
// Cheap on the hot path: every count is a relaxed atomic add; a histogram
// observation is a binary search over fixed bounds and two atomic adds;
// the one lookup per call (the function's slot) takes a reader lock on a
// map that only grows, and Finished reuses the slot Started returned. No
// lock is held while anything else runs.
//
// Bounded label cardinality: functions (at most kMaxLabels distinct; then
// "(other)"), status codes (17), peers (the world's workers, and
// "client"), ops and groups (kMaxLabels pairs; then "(other)"). Nothing is
// labelled per call, per RRef or per op instance. Every sample also carries
// worker="<name>", so several workers' expositions merge (`ferryctl status
// --format=prometheus`).
//
// Latency histograms use gRPC's OpenTelemetry bucket bounds (gRFC A66):
// LatencyBounds().
#ifndef FERRY_RPC_METRICS_H_
#define FERRY_RPC_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/worker.pb.h"

namespace prometheus {
struct MetricFamily;
}  // namespace prometheus

namespace ferry {

// gRFC A66's latency bucket bounds, in seconds (0 s to 100 s).
const std::vector<double>& LatencyBounds();

// A fixed-bounds histogram that never locks.
class Histogram {
 public:
  explicit Histogram(const std::vector<double>& bounds = LatencyBounds());
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(absl::Duration d);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // Per bound, then +Inf.
    double sum_seconds = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double>& bounds_;
  // One per bound, then one for +Inf (not cumulative).
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<int64_t> sum_nanos_{0};
};

// The calls of one function on one side.
class CallMetrics {
 public:
  CallMetrics() = default;
  ~CallMetrics();
  CallMetrics(const CallMetrics&) = delete;
  CallMetrics& operator=(const CallMetrics&) = delete;

  struct ByCode {
    std::atomic<uint64_t> finished{0};
    Histogram duration;
  };
  void Started() { started_.fetch_add(1, std::memory_order_relaxed); }
  void Finished(absl::StatusCode code, absl::Duration elapsed);

  uint64_t started() const { return started_.load(std::memory_order_relaxed); }
  // Null for a code never seen.
  const ByCode* by_code(int code) const {
    return by_code_[code].load(std::memory_order_acquire);
  }

 private:
  std::atomic<uint64_t> started_{0};
  // Made on a code's first finish (most functions see one or two codes).
  std::array<std::atomic<ByCode*>, 17> by_code_{};
};

class Metrics {
 public:
  struct Options {
    std::string worker;  // The worker="…" label of every sample.
    int world_size = 1;
  };
  static constexpr size_t kMaxLabels = 256;

  explicit Metrics(Options options);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Where scrape-time gauges come from (the worker's status) and how a
  // rank is named (its directory); set before the first scrape.
  void SetSources(std::function<proto::WorkerStatus()> status,
                  std::function<std::string(int rank)> rank_name);

  // ---- Calls (the returned slot lives as long as this object) ----
  CallMetrics* ClientStarted(absl::string_view function);
  CallMetrics* ServerStarted(absl::string_view function);
  static void Finished(CallMetrics* m, absl::StatusCode code,
                       absl::Duration elapsed) {
    if (m != nullptr) m->Finished(code, elapsed);
  }

  // ---- Bytes, by peer node (a rank, or a client: rpc/membership) ----
  // kCallShm: the bytes of a caller's requests and replies that went in
  // memory files (rpc/shm_message.h) instead of the socket, counted by
  // the caller only (its peer counts them as kCall).
  enum class Traffic { kCall, kCollective, kCallShm };
  static constexpr int kTrafficKinds = 3;
  void Sent(uint64_t node, Traffic kind, int64_t bytes);
  void Received(uint64_t node, Traffic kind, int64_t bytes);

  // ---- Collectives ----
  void CollectiveEnded(absl::string_view op, absl::string_view group,
                       absl::StatusCode code, absl::Duration elapsed);

  // ---- Heartbeats ----
  void HeartbeatRoundTrip(absl::Duration rtt) { heartbeat_.Observe(rtt); }

  // ---- Exposition ----
  std::vector<prometheus::MetricFamily> Collect() const;
  // Prometheus' text format (version 0.0.4) of Collect().
  std::string Text() const;
  const std::string& worker() const { return options_.worker; }

 private:
  struct Functions {
    Functions();
    // Never reused, unlike an address: the key of Slot's per-thread cache.
    const uint64_t id;
    mutable absl::Mutex mu;
    absl::flat_hash_map<std::string, std::unique_ptr<CallMetrics>> by_name
        ABSL_GUARDED_BY(mu);
  };
  struct PeerBytes {
    std::atomic<uint64_t> sent[kTrafficKinds] = {};
    std::atomic<uint64_t> received[kTrafficKinds] = {};
  };
  struct Collective {
    std::array<std::atomic<uint64_t>, 17> by_code{};
    Histogram duration;
  };

  // The function's slot (kOther past kMaxLabels names): from this
  // thread's cache, else from the map under its lock.
  static CallMetrics* Slot(Functions& f, absl::string_view function);
  static CallMetrics* LockedSlot(Functions& f, absl::string_view function);
  PeerBytes* Peer(uint64_t node);
  void CollectCalls(std::vector<prometheus::MetricFamily>* out) const;
  void CollectPeers(std::vector<prometheus::MetricFamily>* out) const;
  void CollectCollectives(std::vector<prometheus::MetricFamily>* out) const;
  void CollectStatus(std::vector<prometheus::MetricFamily>* out) const;

  const Options options_;
  Functions client_, server_;
  // Index = rank; the last entry: every client.
  std::unique_ptr<PeerBytes[]> peers_;
  Histogram heartbeat_;

  mutable absl::Mutex mu_;
  // "op\x1fgroup" → its counts.
  absl::flat_hash_map<std::string, std::unique_ptr<Collective>> collectives_
      ABSL_GUARDED_BY(mu_);
  std::function<proto::WorkerStatus()> status_ ABSL_GUARDED_BY(mu_);
  std::function<std::string(int)> rank_name_ ABSL_GUARDED_BY(mu_);
};

// Merges the text expositions of several workers (each with its own
// worker="…" label) into one, each family's HELP and TYPE once, then every
// worker's samples, in the order the families first appear.
std::string MergeExpositions(const std::vector<std::string>& texts);

}  // namespace ferry

#endif  // FERRY_RPC_METRICS_H_
