// Fuzz target: ferryctl scripts (tools/ferryctl/script.h): parsing, then
// running the value statements (value, show, print, expect, echo) for
// real; job statements reach a job that refuses them and never sleeps.
// Property: no crash, however values nest through `$NAME` substitution.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "rpc/base/limits.h"
#include "tools/ferryctl/script.h"

namespace ferry {
namespace ctl {
namespace {

class RefusingJob final : public ScriptJob {
 public:
  absl::StatusOr<Value> Call(const std::string&, const std::string&,
                             std::vector<Value>) override {
    return Refused();
  }
  absl::StatusOr<Value> Remote(const std::string&, const std::string&,
                               std::vector<Value>) override {
    return Refused();
  }
  absl::StatusOr<Value> Fetch(const Value&) override { return Refused(); }
  absl::StatusOr<Value> RRefs(const std::string&) override { return Refused(); }
  absl::StatusOr<Value> JobStatus() override { return Refused(); }
  absl::StatusOr<Value> Functions(const std::string&) override {
    return Refused();
  }
  absl::StatusOr<Value> Collective(const std::string&, Value) override {
    return Refused();
  }
  void Sleep(absl::Duration) override {}

 private:
  static absl::Status Refused() {
    return absl::UnavailableError("no job while fuzzing");
  }
};

}  // namespace
}  // namespace ctl
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Fewer items than a worker allows, so values built by repeated
  // substitution stay small enough to fuzz quickly.
  static const ferry::Limits* const limits = [] {
    auto* l = new ferry::Limits();
    l->max_items = 4096;
    return l;
  }();
  absl::StatusOr<ferry::ctl::Script> script =
      ferry::ctl::Script::Parse("fuzz.ferry", text, *limits);
  if (!script.ok()) return 0;
  ferry::ctl::RefusingJob job;
  std::ostringstream out;
  script->Run(job, out).IgnoreError();
  return 0;
}
