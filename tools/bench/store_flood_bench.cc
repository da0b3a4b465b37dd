// store_flood_bench: what issue 49's R3 costs an honest writer of a job's
// store — Store/Wait calls each repeating one key 65,536 times — measured
// against a running master (any build: it speaks only the Store protocol).
//
//   store_flood_bench --master=127.0.0.1:29500 --token_file=TOKEN
//       [--waits=60] [--keys=65536] [--sets=200]
//
// Times --sets honest Sets (each its own key) alone; then sends --waits
// Waits of --keys keys — a key that is set, repeated, then one nobody
// sets — and times the Sets again while they are held; then cancels them
// and times the Sets once more.
// Prints p50/p99 of each (each measurement stops after 60 s). Not a test:
// figures swing with the machine.
#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/store.grpc.pb.h"

ABSL_FLAG(std::string, master, "127.0.0.1:29500", "the job's master");
ABSL_FLAG(std::string, token_file, "", "the job's token (none: no token)");
ABSL_FLAG(int64_t, waits, 60, "hostile Waits");
ABSL_FLAG(int64_t, keys, 65536, "copies of one key in each hostile Wait");
ABSL_FLAG(int64_t, sets, 200, "honest Sets per measurement");

namespace ferry {
namespace {

std::string Token() {
  const std::string path = absl::GetFlag(FLAGS_token_file);
  if (path.empty()) return "";
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

class Bench {
 public:
  Bench()
      : token_(Token()),
        stub_(proto::Store::NewStub(grpc::CreateChannel(
            absl::GetFlag(FLAGS_master), grpc::InsecureChannelCredentials()))) {
  }

  void Authorize(grpc::ClientContext* context, absl::Duration deadline) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    if (!token_.empty()) {
      context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
    }
  }

  // --sets Sets, or as many as 60 s allow: their times in µs.
  std::vector<double> Sets(const std::string& round) {
    std::vector<double> us;
    const absl::Time end = absl::Now() + absl::Seconds(60);
    for (int64_t i = 0; i < absl::GetFlag(FLAGS_sets) && absl::Now() < end;
         ++i) {
      grpc::ClientContext context;
      Authorize(&context, absl::Seconds(120));
      proto::StoreSetRequest r;
      r.set_key(absl::StrCat("bench/", round, "/", i));
      r.set_value("1");
      proto::StoreSetResponse response;
      const absl::Time start = absl::Now();
      grpc::Status s = stub_->Set(&context, r, &response);
      us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
      if (!s.ok()) {
        std::cerr << "Set: " << s.error_message() << "\n";
        break;
      }
    }
    return us;
  }

  // The hostile Waits, held until Cancel: a key that is set, repeated,
  // then one nobody sets — a store that checks whether a wait's keys are
  // all set, key by key, walks every copy before it finds the missing one.
  void Flood() {
    {
      grpc::ClientContext context;
      Authorize(&context, absl::Seconds(30));
      proto::StoreSetRequest set;
      set.set_key("bench/present");
      set.set_value("1");
      proto::StoreSetResponse response;
      grpc::Status s = stub_->Set(&context, set, &response);
      if (!s.ok()) std::cerr << "Set: " << s.error_message() << "\n";
    }
    proto::StoreWaitRequest r;
    for (int64_t k = 1; k < absl::GetFlag(FLAGS_keys); ++k) {
      r.add_keys("bench/present");
    }
    r.add_keys("bench/never/set/key");
    r.set_wait_ms(3600 * 1000);
    for (int64_t w = 0; w < absl::GetFlag(FLAGS_waits); ++w) {
      auto h = std::make_unique<Held>();
      Authorize(&h->context, absl::Hours(1));
      h->request = r;
      Held* p = h.get();
      stub_->async()->Wait(&p->context, &p->request, &p->response,
                           [p](grpc::Status s) {
                             p->status = s;
                             p->done.Notify();
                           });
      held_.push_back(std::move(h));
    }
  }
  void Cancel() {
    for (auto& h : held_) h->context.TryCancel();
    for (auto& h : held_) h->done.WaitForNotification();
    held_.clear();
  }

 private:
  struct Held {
    grpc::ClientContext context;
    proto::StoreWaitRequest request;
    proto::StoreWaitResponse response;
    grpc::Status status;
    absl::Notification done;
  };

  const std::string token_;
  std::unique_ptr<proto::Store::Stub> stub_;
  std::vector<std::unique_ptr<Held>> held_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1))];
}

void Print(const std::string& what, const std::vector<double>& us) {
  std::cout << absl::StrFormat("%-44s %6d sets  p50 %10.0f us  p99 %10.0f us\n",
                               what, us.size(), Percentile(us, 0.5),
                               Percentile(us, 0.99));
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  ferry::Bench bench;
  ferry::Print("alone", bench.Sets("alone"));
  bench.Flood();
  // The Waits sent (each some MB): give the master a moment to take them.
  absl::SleepFor(absl::Seconds(5));
  ferry::Print(absl::StrCat("with ", absl::GetFlag(FLAGS_waits), " Waits of ",
                            absl::GetFlag(FLAGS_keys), " keys held"),
               bench.Sets("held"));
  bench.Cancel();
  absl::SleepFor(absl::Seconds(1));
  ferry::Print("after the Waits were cancelled", bench.Sets("cancelled"));
  return 0;
}
