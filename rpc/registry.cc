#include "rpc/registry.h"

#include <algorithm>
#include <exception>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

namespace {

bool IsValidName(absl::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  auto word = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!word(name[0])) return false;
  for (char c : name) {
    if (!word(c) && !(c >= '0' && c <= '9') && c != '.') return false;
  }
  return true;
}

}  // namespace

Future<Value> InvokeFunction(const RegisteredFunction& fn,
                             const CallContext& ctx, std::vector<Value> args) {
  try {
    return fn.fn(ctx, std::move(args));
  } catch (const std::bad_alloc&) {
    // The worker could not hold what the call asked for: refuse it (the
    // caller may retry smaller or later), do not crash.
    return Future<Value>::Ready(absl::ResourceExhaustedError(
        "out of memory: the worker cannot allocate what this call needs"));
  } catch (const std::exception& e) {
    return Future<Value>::Ready(
        absl::InternalError(absl::StrCat("uncaught exception: ", e.what())));
  } catch (...) {
    return Future<Value>::Ready(
        absl::InternalError("uncaught exception of unknown type"));
  }
}

absl::Status Registry::RegisterAsync(std::string name, AsyncFunction fn,
                                     std::string signature,
                                     FunctionOptions options) {
  if (!IsValidName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid function name '", name,
        "' (expected [A-Za-z_][A-Za-z0-9_.]*, at most 128 bytes)"));
  }
  auto spec = std::make_shared<RegisteredFunction>();
  spec->name = name;
  spec->signature = std::move(signature);
  spec->doc = std::move(options.doc);
  spec->run_inline = options.run_inline;
  spec->keywords = options.keywords;
  spec->fn = std::move(fn);
  absl::MutexLock lock(&mu_);
  if (!functions_.emplace(name, std::move(spec)).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("function '", name, "' is already registered"));
  }
  return absl::OkStatus();
}

std::shared_ptr<const RegisteredFunction> Registry::Find(
    absl::string_view name) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const RegisteredFunction>> Registry::List() const {
  std::vector<std::shared_ptr<const RegisteredFunction>> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, fn] : functions_) out.push_back(fn);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->name < b->name; });
  return out;
}

int Registry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(functions_.size());
}

}  // namespace ferry

namespace ferry {
namespace adapter_internal {

absl::Status KindMismatch(const std::string& where, absl::string_view expected,
                          const Value& got) {
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": expected ", expected, ", got ", got.kind_name()));
}

}  // namespace adapter_internal
}  // namespace ferry
