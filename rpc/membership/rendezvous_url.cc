#include "rpc/membership/rendezvous_url.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "rpc/membership/etcd/etcd_options.h"

namespace ferry {

namespace {

constexpr absl::string_view kEtcdScheme = "etcd://";
// Job names become one component of every key: short, and free of '/'
// so one job's prefix never contains another's.
constexpr size_t kMaxJobName = 128;

}  // namespace

bool IsValidJobName(absl::string_view job) {
  if (job.empty() || job.size() > kMaxJobName) return false;
  if (job == "." || job == "..") return false;
  for (char c : job) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

absl::StatusOr<EtcdRendezvous> ParseRendezvousUrl(absl::string_view url) {
  if (!absl::StartsWith(url, kEtcdScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous \"", url,
                     "\": expected etcd://HOST:PORT[,HOST:PORT...]/JOB"));
  }
  absl::string_view rest = url.substr(kEtcdScheme.size());
  const size_t slash = rest.find('/');
  if (slash == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous \"", url, "\": no /JOB after the endpoints"));
  }
  EtcdRendezvous out;
  out.job = std::string(rest.substr(slash + 1));
  if (!IsValidJobName(out.job)) {
    return absl::InvalidArgumentError(
        absl::StrCat("rendezvous \"", url, "\": job name \"", out.job,
                     "\" must be 1 to ", kMaxJobName, " of [A-Za-z0-9_.-]"));
  }
  absl::StatusOr<std::vector<std::string>> endpoints =
      ParseEtcdEndpoints(rest.substr(0, slash));
  if (!endpoints.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rendezvous \"", url, "\": ", endpoints.status().message()));
  }
  out.endpoints = *std::move(endpoints);
  return out;
}

}  // namespace ferry
