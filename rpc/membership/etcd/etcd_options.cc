#include "rpc/membership/etcd/etcd_options.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ferry {
namespace {

// Checks one "HOST:PORT"; returns it trimmed.
absl::StatusOr<std::string> CheckEndpoint(absl::string_view entry) {
  entry = absl::StripAsciiWhitespace(entry);
  size_t colon = entry.rfind(':');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint '", entry, "': ", why));
  };
  if (colon == absl::string_view::npos) return bad("expected HOST:PORT");
  absl::string_view host = entry.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(entry.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return bad("port must be 1..65535");
  }
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) {
    return bad("unclosed '[' around the IPv6 host");
  }
  if (host.empty()) return bad("empty host");
  if (host.find_first_of("/[]") != absl::string_view::npos ||
      (host.find(':') != absl::string_view::npos && entry[0] != '[')) {
    return bad("bad host (IPv6 hosts go in brackets; no scheme)");
  }
  return std::string(entry);
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseEtcdEndpoints(
    absl::string_view list) {
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError("no etcd endpoints given");
  }
  std::vector<std::string> endpoints;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    absl::StatusOr<std::string> endpoint = CheckEndpoint(entry);
    if (!endpoint.ok()) return endpoint.status();
    endpoints.push_back(*std::move(endpoint));
  }
  return endpoints;
}

bool IsLoopbackEndpoint(absl::string_view endpoint) {
  absl::string_view host = endpoint.substr(0, endpoint.rfind(':'));
  return absl::StartsWith(host, "127.") || host == "[::1]" ||
         host == "localhost";
}

namespace {

absl::Status CheckDurations(const EtcdOptions& options) {
  struct Named {
    const char* name;
    absl::Duration value;
  };
  for (const Named& d :
       {Named{"connect_timeout", options.connect_timeout},
        Named{"call_timeout", options.call_timeout},
        Named{"retry_backoff", options.retry_backoff},
        Named{"max_retry_backoff", options.max_retry_backoff}}) {
    if (d.value <= absl::ZeroDuration() ||
        d.value == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "etcd option ", d.name, " must be positive and finite, not ",
          absl::FormatDuration(d.value)));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTls(const EtcdOptions& options) {
  if (options.tls_ca_file.empty() &&
      (!options.tls_cert_file.empty() || !options.tls_key_file.empty())) {
    return absl::InvalidArgumentError(
        "etcd TLS certificate and key need a CA file too");
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "etcd TLS certificate and key go together: give both or neither");
  }
  return absl::OkStatus();
}

// Like ferry's own token, etcd's password never crosses a network in the
// clear.
absl::Status CheckPassword(const EtcdOptions& options,
                           const std::vector<std::string>& endpoints) {
  if (options.user.empty() || !options.tls_ca_file.empty()) {
    return absl::OkStatus();
  }
  for (const std::string& endpoint : endpoints) {
    if (!IsLoopbackEndpoint(endpoint)) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd user '", options.user,
                       "': the password would cross the network "
                       "unencrypted to ",
                       endpoint, "; use TLS (a CA file)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateEtcdOptions(const EtcdOptions& options) {
  if (options.endpoints.empty()) {
    return absl::InvalidArgumentError("no etcd endpoints given");
  }
  absl::StatusOr<std::vector<std::string>> endpoints =
      ParseEtcdEndpoints(absl::StrJoin(options.endpoints, ","));
  if (!endpoints.ok()) return endpoints.status();
  absl::Status ok = CheckDurations(options);
  if (ok.ok()) ok = CheckTls(options);
  if (ok.ok()) ok = CheckPassword(options, *endpoints);
  return ok;
}

}  // namespace ferry
