// Typed adapters: turn a plain C++ function into an AsyncFunction over
// Values. Included by rpc/function.h; not used directly.
//
// Parameter types: Value, Tensor, int64_t, int, double (accepts int), bool,
// std::string, Bytes, Value::List, Value::Map, std::vector<Tensor>,
// std::vector<int64_t>, std::vector<double>, and std::optional<T> of these
// for trailing optional parameters (absent or null). An optional first
// parameter `const CallContext&` receives the call's context.
// Return types: void, Value or anything a Value converts from,
// absl::Status, absl::StatusOr<T> of those, or Future<Value> (asynchronous).
#ifndef FERRY_RPC_FUNCTION_ADAPTER_H_
#define FERRY_RPC_FUNCTION_ADAPTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/base/future.h"
#include "rpc/value/value.h"

namespace ferry {
namespace adapter_internal {

absl::Status KindMismatch(const std::string& where, absl::string_view expected,
                          const Value& got);

template <typename T>
struct Arg;

template <>
struct Arg<Value> {
  static std::string Name() { return "value"; }
  static absl::StatusOr<Value> From(Value& v, const std::string&) {
    return std::move(v);
  }
};

template <>
struct Arg<Tensor> {
  static std::string Name() { return "tensor"; }
  static absl::StatusOr<Tensor> From(Value& v, const std::string& where) {
    if (!v.is_tensor()) return KindMismatch(where, Name(), v);
    return v.as_tensor();
  }
};

template <>
struct Arg<int64_t> {
  static std::string Name() { return "int"; }
  static absl::StatusOr<int64_t> From(Value& v, const std::string& where) {
    if (!v.is_int()) return KindMismatch(where, Name(), v);
    return v.as_int();
  }
};

template <>
struct Arg<int> {
  static std::string Name() { return "int"; }
  static absl::StatusOr<int> From(Value& v, const std::string& where) {
    if (!v.is_int()) return KindMismatch(where, Name(), v);
    if (v.as_int() < INT32_MIN || v.as_int() > INT32_MAX) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", v.as_int(), " does not fit in int32"));
    }
    return static_cast<int>(v.as_int());
  }
};

template <>
struct Arg<double> {
  static std::string Name() { return "number"; }
  static absl::StatusOr<double> From(Value& v, const std::string& where) {
    if (!v.is_number()) return KindMismatch(where, Name(), v);
    return v.as_number();
  }
};

template <>
struct Arg<bool> {
  static std::string Name() { return "bool"; }
  static absl::StatusOr<bool> From(Value& v, const std::string& where) {
    if (!v.is_bool()) return KindMismatch(where, Name(), v);
    return v.as_bool();
  }
};

template <>
struct Arg<std::string> {
  static std::string Name() { return "string"; }
  static absl::StatusOr<std::string> From(Value& v, const std::string& where) {
    if (!v.is_string()) return KindMismatch(where, Name(), v);
    return v.as_string();
  }
};

template <>
struct Arg<Bytes> {
  static std::string Name() { return "bytes"; }
  static absl::StatusOr<Bytes> From(Value& v, const std::string& where) {
    if (!v.is_bytes()) return KindMismatch(where, Name(), v);
    return v.as_bytes();
  }
};

template <>
struct Arg<Value::List> {
  static std::string Name() { return "list"; }
  static absl::StatusOr<Value::List> From(Value& v, const std::string& where) {
    if (!v.is_list()) return KindMismatch(where, Name(), v);
    return std::move(v.as_list());
  }
};

template <>
struct Arg<Value::Map> {
  static std::string Name() { return "map"; }
  static absl::StatusOr<Value::Map> From(Value& v, const std::string& where) {
    if (!v.is_map()) return KindMismatch(where, Name(), v);
    return std::move(v.as_map());
  }
};

// A list whose every element converts with Arg<E>.
template <typename E>
struct Arg<std::vector<E>> {
  static std::string Name() {
    return absl::StrCat("list[", Arg<E>::Name(), "]");
  }
  static absl::StatusOr<std::vector<E>> From(Value& v,
                                             const std::string& where) {
    if (!v.is_list()) return KindMismatch(where, Name(), v);
    std::vector<E> out;
    out.reserve(v.as_list().size());
    for (size_t k = 0; k < v.as_list().size(); ++k) {
      absl::StatusOr<E> e =
          Arg<E>::From(v.as_list()[k], absl::StrCat(where, "[", k, "]"));
      if (!e.ok()) return e.status();
      out.push_back(*std::move(e));
    }
    return out;
  }
};

template <typename T>
struct Arg<std::optional<T>> {
  static constexpr bool kOptional = true;
  static std::string Name() { return Arg<T>::Name(); }
  static absl::StatusOr<std::optional<T>> From(Value& v,
                                               const std::string& where) {
    if (v.is_null()) return std::optional<T>();
    absl::StatusOr<T> t = Arg<T>::From(v, where);
    if (!t.ok()) return t.status();
    return std::optional<T>(*std::move(t));
  }
};

template <typename T, typename = void>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<T, std::void_t<decltype(Arg<T>::kOptional)>>
    : std::true_type {};

// Return values.
template <typename R>
struct Result {
  static std::string Name() { return "value"; }
  static Future<Value> Wrap(R&& r) {
    return Future<Value>::Ready(Value(std::forward<R>(r)));
  }
};
template <>
struct Result<Future<Value>> {
  static std::string Name() { return "value"; }
  static Future<Value> Wrap(Future<Value>&& f) { return std::move(f); }
};
template <>
struct Result<absl::Status> {
  static std::string Name() { return "null"; }
  static Future<Value> Wrap(absl::Status&& s) {
    if (!s.ok()) return Future<Value>::Ready(std::move(s));
    return Future<Value>::Ready(Value());
  }
};
template <typename T>
struct Result<absl::StatusOr<T>> {
  static std::string Name() { return Result<T>::Name(); }
  static Future<Value> Wrap(absl::StatusOr<T>&& s) {
    if (!s.ok()) return Future<Value>::Ready(s.status());
    return Future<Value>::Ready(Value(*std::move(s)));
  }
};
template <>
struct Result<Tensor> {
  static std::string Name() { return "tensor"; }
  static Future<Value> Wrap(Tensor&& t) {
    return Future<Value>::Ready(Value(std::move(t)));
  }
};

// Function traits for lambdas, functors and function pointers.
template <typename F>
struct Traits : Traits<decltype(&F::operator())> {};
template <typename C, typename R, typename... A>
struct Traits<R (C::*)(A...) const> {
  using Ret = R;
  using Args = std::tuple<A...>;
};
template <typename C, typename R, typename... A>
struct Traits<R (C::*)(A...)> {
  using Ret = R;
  using Args = std::tuple<A...>;
};
template <typename R, typename... A>
struct Traits<R (*)(A...)> {
  using Ret = R;
  using Args = std::tuple<A...>;
};

template <typename T>
using Bare = std::remove_cv_t<std::remove_reference_t<T>>;

template <typename Tuple>
struct WithoutContext;
template <typename First, typename... Rest>
struct WithoutContext<std::tuple<First, Rest...>> {
  static constexpr bool kHasContext =
      std::is_same<Bare<First>, CallContext>::value;
  using Params = std::conditional_t<kHasContext, std::tuple<Bare<Rest>...>,
                                    std::tuple<Bare<First>, Bare<Rest>...>>;
};
template <>
struct WithoutContext<std::tuple<>> {
  static constexpr bool kHasContext = false;
  using Params = std::tuple<>;
};

template <typename... P>
constexpr size_t RequiredCount(std::tuple<P...>*) {
  size_t required = 0, index = 0;
  ((index++, required = IsOptional<P>::value ? required : index), ...);
  return required;
}

template <typename... P>
std::string ParamList(std::tuple<P...>*,
                      const std::vector<std::string>& names) {
  std::vector<std::string> parts;
  size_t i = 0;
  ((parts.push_back(
        absl::StrCat(i < names.size() ? names[i] : absl::StrCat("arg", i), ": ",
                     Arg<P>::Name(), IsOptional<P>::value ? "?" : "")),
    ++i),
   ...);
  return absl::StrJoin(parts, ", ");
}

// Converts args[I] for each parameter; the first error wins.
template <typename Params, size_t... I>
absl::StatusOr<Params> ConvertArgs([[maybe_unused]] std::vector<Value>& args,
                                   std::index_sequence<I...>) {
  absl::Status status;
  Params out;
  auto one = [&](auto& slot, size_t i) {
    using P = Bare<decltype(slot)>;
    if (!status.ok()) return;
    if (i >= args.size()) return;  // Optional parameter left absent.
    absl::StatusOr<P> v = Arg<P>::From(args[i], absl::StrCat("args[", i, "]"));
    if (!v.ok()) {
      status = v.status();
      return;
    }
    slot = *std::move(v);
  };
  (one(std::get<I>(out), I), ...);
  (void)one;  // Unused for functions without parameters.
  if (!status.ok()) return status;
  return out;
}

template <typename F>
struct Adapter {
  using T = Traits<F>;
  using Ctx = WithoutContext<typename T::Args>;
  using Params = typename Ctx::Params;
  static constexpr size_t kCount = std::tuple_size<Params>::value;

  static std::string Signature(const std::string& name,
                               const std::vector<std::string>& params) {
    return absl::StrCat(name, "(",
                        ParamList(static_cast<Params*>(nullptr), params),
                        ") -> ", ReturnName());
  }

  static std::string ReturnName() {
    if constexpr (std::is_void<typename T::Ret>::value) {
      return "null";
    } else {
      return Result<Bare<typename T::Ret>>::Name();
    }
  }

  static AsyncFunction Make(F fn, std::string signature) {
    return [fn = std::move(fn), signature = std::move(signature)](
               const CallContext& ctx,
               std::vector<Value> args) -> Future<Value> {
      constexpr size_t required = RequiredCount(static_cast<Params*>(nullptr));
      if (args.size() < required || args.size() > kCount) {
        return Future<Value>::Ready(absl::InvalidArgumentError(absl::StrCat(
            "expected ", required == kCount ? "" : "at least ", required,
            required == kCount ? "" : absl::StrCat(" and at most ", kCount),
            " argument", kCount == 1 ? "" : "s", ", got ", args.size(), " (",
            signature, ")")));
      }
      absl::StatusOr<Params> params =
          ConvertArgs<Params>(args, std::make_index_sequence<kCount>());
      if (!params.ok()) return Future<Value>::Ready(params.status());
      return Call(fn, ctx, *std::move(params),
                  std::make_index_sequence<kCount>());
    };
  }

  template <size_t... I>
  static Future<Value> Call(const F& fn, const CallContext& ctx, Params&& p,
                            std::index_sequence<I...>) {
    auto invoke = [&]() -> decltype(auto) {
      if constexpr (Ctx::kHasContext) {
        return fn(ctx, std::move(std::get<I>(p))...);
      } else {
        (void)ctx;
        return fn(std::move(std::get<I>(p))...);
      }
    };
    if constexpr (std::is_void<typename T::Ret>::value) {
      invoke();
      return Future<Value>::Ready(Value());
    } else {
      return Result<Bare<typename T::Ret>>::Wrap(invoke());
    }
  }
};

// The AsyncFunction of plain `fn` registered as `name`, and its
// signature ("scale(t: tensor, k: float) -> tensor"), parameters named by
// `params` (Registry::Register, Worker::Register).
template <typename F>
std::pair<AsyncFunction, std::string> Adapt(
    const std::string& name, F fn, const std::vector<std::string>& params) {
  std::string signature = Adapter<F>::Signature(name, params);
  AsyncFunction async = Adapter<F>::Make(std::move(fn), signature);
  return {std::move(async), std::move(signature)};
}

}  // namespace adapter_internal

}  // namespace ferry

#endif  // FERRY_RPC_FUNCTION_ADAPTER_H_
