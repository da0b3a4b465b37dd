#include "tests/tools/chaos/tally.h"

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace chaos {

namespace {

constexpr size_t kExamples = 5;

// JSON string literal of `s` (quotes, backslashes and control characters
// escaped).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, " ");
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

}  // namespace

void Tally::Add(const std::string& section, const std::string& key, int64_t n) {
  absl::MutexLock lock(&mu_);
  counts_[section][key] += n;
}

void Tally::Example(const std::string& violation, const std::string& text) {
  absl::MutexLock lock(&mu_);
  std::vector<std::string>& e = examples_[violation];
  if (e.size() < kExamples) e.push_back(text);
}

void Tally::Op(const std::string& kind, const absl::Status& status) {
  Add("ops", absl::StrCat(kind, " ",
                          status.ok() ? "OK" : StatusCodeName(status.code())));
}

int64_t Tally::Get(const std::string& section, const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto s = counts_.find(section);
  if (s == counts_.end()) return 0;
  auto k = s->second.find(key);
  return k == s->second.end() ? 0 : k->second;
}

int64_t Tally::Violations() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  auto s = counts_.find("violations");
  if (s != counts_.end()) {
    for (const auto& [k, n] : s->second) total += n;
  }
  return total;
}

std::string Tally::Text(absl::Duration ran) const {
  absl::MutexLock lock(&mu_);
  std::string out =
      absl::StrCat("chaos soak: ran ", absl::FormatDuration(ran), "\n");
  for (const auto& [section, keys] : counts_) {
    absl::StrAppend(&out, section, ":\n");
    for (const auto& [key, n] : keys)
      absl::StrAppend(&out, "  ", key, ": ", n, "\n");
  }
  for (const auto& [violation, texts] : examples_) {
    absl::StrAppend(&out, "examples of ", violation, ":\n");
    for (const std::string& t : texts) absl::StrAppend(&out, "  ", t, "\n");
  }
  return out;
}

std::string Tally::Json(absl::Duration ran) const {
  absl::MutexLock lock(&mu_);
  std::string out = absl::StrCat("{\"seconds\":", absl::ToInt64Seconds(ran));
  for (const auto& [section, keys] : counts_) {
    absl::StrAppend(&out, ",", Quote(section), ":{");
    const char* sep = "";
    for (const auto& [key, n] : keys) {
      absl::StrAppend(&out, sep, Quote(key), ":", n);
      sep = ",";
    }
    out += "}";
  }
  out += ",\"examples\":{";
  const char* sep = "";
  for (const auto& [violation, texts] : examples_) {
    absl::StrAppend(&out, sep, Quote(violation), ":[");
    const char* inner = "";
    for (const std::string& t : texts) {
      absl::StrAppend(&out, inner, Quote(t));
      inner = ",";
    }
    out += "]";
    sep = ",";
  }
  return out + "}}";
}

}  // namespace chaos
}  // namespace ferry
