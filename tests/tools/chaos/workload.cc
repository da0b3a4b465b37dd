#include "tests/tools/chaos/workload.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "collectives/client/client_collective.h"
#include "rpc/value/tensor.h"
#include "rref/rref.h"

namespace ferry {
namespace chaos {

namespace {

// What the client-side collective adds to its op's timeout before it gives
// up on the workers' reports (collectives/client/client_collective.cc: twice
// its 5 s report margin).
constexpr absl::Duration kCollectiveReportMargin = absl::Seconds(10);

class WorkloadClient {
 public:
  WorkloadClient(ClientImpl& client, const WorkloadOptions& o, Tally& tally)
      : client_(client), o_(o), tally_(tally), rng_(o.seed) {}

  void RunOne() {
    switch (Pick(10)) {
      case 0:
      case 1:
      case 2:
      case 3:
      case 4:
        return Call();
      case 5:
      case 6:
      case 7:
        return RRefCycle();
      default:
        return Collective();
    }
  }

 private:
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string AnyWorker() {
    return absl::StrCat("worker", Pick(client_.rpc().directory().world_size()));
  }

  // Counts the outcome of `kind`; a result still missing after the
  // deadline plus the margin is a hang.
  void Record(const std::string& kind, const Future<Value>& f,
              absl::Duration deadline) {
    absl::StatusOr<Value> r = f.Wait(deadline + o_.margin);
    if (!f.IsReady()) {
      tally_.Add("violations", "hang");
      tally_.Example("hang",
                     absl::StrCat(kind, ": no result within ",
                                  absl::FormatDuration(deadline + o_.margin)));
      return;
    }
    Check(kind, r.status());
  }

  void Check(const std::string& kind, const absl::Status& s) {
    tally_.Op(kind, s);
    if (!s.ok() && !NamesAWorker(s.message())) {
      tally_.Add("violations", "error_naming_no_worker");
      tally_.Example("error_naming_no_worker",
                     absl::StrCat(kind, ": ", s.ToString()));
    }
  }

  void Call() {
    std::string fn;
    std::vector<Value> args;
    switch (Pick(3)) {
      case 0:
        fn = "echo";
        args = {Value(int64_t{42})};
        break;
      case 1:
        fn = "add";
        args = {Value(Tensor::FromVector<float>({1, 2, 3})), Value(int64_t{1})};
        break;
      default:
        fn = "sleep_ms";
        args = {Value(int64_t{Pick(300)})};
    }
    Record("call",
           client_.rpc().RpcAsync(AnyWorker(), fn, std::move(args),
                                  {.timeout = o_.op_timeout}),
           o_.op_timeout);
  }

  // remote, fetch, release (the RRef's destruction).
  void RRefCycle() {
    absl::StatusOr<RRef> r = client_.rrefs().Remote(
        AnyWorker(), "arange", {Value(int64_t{4})}, o_.op_timeout);
    if (!r.ok()) return Check("rref", r.status());
    Record("rref", r->ToHereAsync(o_.op_timeout), o_.op_timeout);
  }

  void Collective() {
    const int world = client_.rpc().directory().world_size();
    Value::List ranks;
    for (int i = 0; i < world; ++i) {
      ranks.push_back(Value(Tensor::FromVector<float>({1, 2})));
    }
    Value request(Value::Map{
        {"ranks", Value(std::move(ranks))},
        {"op", Value(std::string("sum"))},
        {"timeout_ms", Value(absl::ToInt64Milliseconds(o_.op_timeout))}});
    const absl::Time start = absl::Now();
    absl::StatusOr<Value> r =
        RunCollectiveFromClient(client_.rpc(), "all_reduce", request);
    const absl::Duration bound =
        o_.op_timeout + kCollectiveReportMargin + o_.margin;
    if (absl::Now() - start > bound) {
      tally_.Add("violations", "hang");
      tally_.Example("hang",
                     absl::StrCat("collective: ended after ",
                                  absl::FormatDuration(absl::Now() - start)));
    }
    Check("collective", r.status());
  }

  ClientImpl& client_;
  const WorkloadOptions o_;
  Tally& tally_;
  std::mt19937_64 rng_;
};

}  // namespace

bool NamesAWorker(absl::string_view message) {
  for (size_t at = message.find("worker"); at != absl::string_view::npos;
       at = message.find("worker", at + 1)) {
    if (at + 6 < message.size() && absl::ascii_isdigit(message[at + 6])) {
      return true;
    }
  }
  return false;
}

void RunClient(ClientImpl& client, const WorkloadOptions& options,
               const std::atomic<bool>& stop, Tally& tally) {
  WorkloadClient c(client, options, tally);
  while (!stop.load()) c.RunOne();
}

}  // namespace chaos
}  // namespace ferry
