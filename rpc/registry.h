// The function registry: the allowlist of what callers may run on a worker.
//
// Functions are registered by name, either as asynchronous functions over
// Values or as plain typed C++ functions through adapters:
//
//   registry.Register("scale", [](const Tensor& t, double k) -> Tensor {…},
//                     {.params = {"t", "k"}, .doc = "t * k"});
//   registry.RegisterAsync("fetch_twice", [&](const CallContext& ctx,
//                                             std::vector<Value> args) {
//     return agent.RpcAsync(…);   // holds no thread while waiting
//   }, "fetch_twice(x: value) -> value");
//
// Typed adapters check arity and argument kinds and answer INVALID_ARGUMENT
// naming the argument ("args[1]: expected tensor, got string").
#ifndef FERRY_RPC_REGISTRY_H_
#define FERRY_RPC_REGISTRY_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rpc/base/future.h"
#include "rpc/function.h"
#include "rpc/value/value.h"

namespace ferry {

struct RegisteredFunction {
  std::string name;
  std::string signature;  // "add(a: value, b: value) -> value"
  std::string doc;
  bool run_inline = false;
  bool keywords = false;  // FunctionOptions::keywords.
  AsyncFunction fn;
};

// Runs `fn`, turning a C++ exception escaping it into INTERNAL (and
// std::bad_alloc into RESOURCE_EXHAUSTED), so a buggy or greedy function
// cannot take the worker down.
Future<Value> InvokeFunction(const RegisteredFunction& fn,
                             const CallContext& ctx, std::vector<Value> args);

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // ALREADY_EXISTS if the name is taken; INVALID_ARGUMENT for a name that
  // is empty, longer than 128 bytes, or not [A-Za-z_][A-Za-z0-9_.]*.
  absl::Status RegisterAsync(std::string name, AsyncFunction fn,
                             std::string signature,
                             FunctionOptions options = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // Registers a plain C++ function or lambda through a typed adapter
  // (defined in rpc/function_adapter.h).
  template <typename F>
  absl::Status Register(std::string name, F fn, FunctionOptions options = {});

  // nullptr if absent.
  std::shared_ptr<const RegisteredFunction> Find(absl::string_view name) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Sorted by name.
  std::vector<std::shared_ptr<const RegisteredFunction>> List() const
      ABSL_LOCKS_EXCLUDED(mu_);

  int size() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const RegisteredFunction>>
      functions_ ABSL_GUARDED_BY(mu_);
};

template <typename F>
absl::Status Registry::Register(std::string name, F fn,
                                FunctionOptions options) {
  auto [async, signature] =
      adapter_internal::Adapt(name, std::move(fn), options.params);
  return RegisterAsync(std::move(name), std::move(async), std::move(signature),
                       std::move(options));
}

}  // namespace ferry

#endif  // FERRY_RPC_REGISTRY_H_
