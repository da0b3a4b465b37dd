// lease_flood_bench: what a flood of lease rounds costs an honest user of
// an owner table (rref/owner_table.h), measured on the table itself.
//
//   lease_flood_bench [--rrefs=100000] [--cycles=2000] [--gap_us=500]
//
// The table holds --rrefs values, each with one fork of holder A. An
// honest user C runs remote()'s cycle on it (create, value, fetch,
// release) --cycles times, --gap_us apart, alone and then while another thread
// floods complete lease rounds from holder B, who holds nothing here (the
// 20-byte RenewLease of issue 25, F6); each measurement stops after 10 s.
// Prints the cycle's p50/p99 and a flood round's time. Not a test: figures
// swing with the machine.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <iostream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rpc/base/clock.h"
#include "rref/owner_table.h"

ABSL_FLAG(int64_t, rrefs, 100000, "values (forks of holder A) in the table");
ABSL_FLAG(int64_t, cycles, 2000, "honest remote() cycles per measurement");
ABSL_FLAG(int64_t, gap_us, 500,
          "pause between honest cycles (calls arrive apart, as over RPC)");

namespace ferry {
namespace {

constexpr uint64_t kOwner = 1, kA = 2, kB = 3, kC = 4;

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

// One remote() as the owner sees it: created with C's fork, its value
// arrives, C fetches it, C releases it.
void Cycle(OwnerTable& table, uint64_t i) {
  const GlobalId rref{kC, 2 * i + 1}, fork{kC, 2 * i + 2};
  (void)table.Create(rref, fork, kC);
  (void)table.Resolve(rref, Value(static_cast<int64_t>(i)));
  table.Fetch(rref, fork, absl::InfiniteFuture(), [](absl::StatusOr<Value>) {});
  table.DeleteFork(rref, fork, false);
}

// `n` cycles, or as many as 10 s allow.
std::vector<double> Cycles(OwnerTable& table, int64_t n, uint64_t* next) {
  const absl::Duration gap = absl::Microseconds(absl::GetFlag(FLAGS_gap_us));
  std::vector<double> us;
  us.reserve(n);
  const absl::Time end = absl::Now() + absl::Seconds(10);
  for (int64_t i = 0; i < n && absl::Now() < end; ++i) {
    const absl::Time start = absl::Now();
    Cycle(table, (*next)++);
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
    absl::SleepFor(gap);
  }
  return us;
}

void Report(const char* what, const std::vector<double>& us) {
  std::cout << absl::StrFormat("%-34s p50 %9.1f us   p99 %9.1f us   (%d)\n",
                               what, Percentile(us, 0.5), Percentile(us, 0.99),
                               us.size());
}

int Run() {
  const int64_t rrefs = absl::GetFlag(FLAGS_rrefs);
  const int64_t cycles = absl::GetFlag(FLAGS_cycles);
  OwnerTable table(kOwner, Clock::Real(), OwnerOptions{});
  for (int64_t i = 0; i < rrefs; ++i) {
    const GlobalId rref{kA, 2 * static_cast<uint64_t>(i) + 1};
    const GlobalId fork{kA, 2 * static_cast<uint64_t>(i) + 2};
    (void)table.Create(rref, fork, kA);
    (void)table.Resolve(rref, Value(i));
  }
  std::cout << "owner table: " << table.stats().owned << " rrefs of holder A\n";
  uint64_t next = 0;
  Report("remote() cycle, no flood", Cycles(table, cycles, &next));

  // B's rounds: empty, each complete (one chunk), numbered up.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> rounds{0};
  std::vector<double> round_us;
  std::thread flood([&] {
    uint64_t round = 1;
    while (!stop.load()) {
      LeaseListing l;
      l.round = round++;
      const absl::Time start = absl::Now();
      (void)table.RenewLease(kB, l);
      if (round_us.size() < 100000) {
        round_us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      }
      rounds.fetch_add(1);
    }
  });
  while (rounds.load() < 3) std::this_thread::yield();
  const absl::Time start = absl::Now();
  const int64_t before = rounds.load();
  Report("remote() cycle, flood of rounds", Cycles(table, cycles, &next));
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const int64_t flooded = rounds.load() - before;
  stop.store(true);
  flood.join();
  Report("one flood round (B holds nothing)", round_us);
  std::cout << absl::StrFormat("flood rounds/s during the cycles   %9.0f\n",
                               flooded / seconds);
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return ferry::Run();
}
