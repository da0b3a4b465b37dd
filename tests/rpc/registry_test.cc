#include "rpc/registry.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "rpc/base/future.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

class RegistryTest : public ::testing::Test {
 protected:
  // Calls the registered function `name` and waits (bounded) for its result.
  absl::StatusOr<Value> Call(const std::string& name, std::vector<Value> args) {
    std::shared_ptr<const RegisteredFunction> fn = registry_.Find(name);
    if (fn == nullptr) return absl::NotFoundError(name);
    return InvokeFunction(*fn, ctx_, std::move(args)).Wait(absl::Seconds(5));
  }

  std::string Signature(const std::string& name) {
    std::shared_ptr<const RegisteredFunction> fn = registry_.Find(name);
    return fn == nullptr ? "<absent>" : fn->signature;
  }

  Registry registry_;
  CallContext ctx_;
};

// ---- Parameter types ----

TEST_F(RegistryTest, TensorAndDoubleParameters) {
  ASSERT_OK(registry_.Register("scale", [](const Tensor& t, double k) {
    std::vector<float> v = t.ToVector<float>();
    for (float& x : v) x = static_cast<float>(x * k);
    return Tensor::FromVector(v);
  }));
  ASSERT_OK_AND_ASSIGN(Value r,
                       Call("scale", {Tensor::FromVector<float>({1, 2}), 2.5}));
  EXPECT_EQ(r, Value(Tensor::FromVector<float>({2.5, 5})));
}

TEST_F(RegistryTest, DoubleParameterAcceptsInt) {
  ASSERT_OK(registry_.Register("half", [](double x) { return x / 2; }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("half", {3}));
  EXPECT_EQ(r, Value(1.5));
}

TEST_F(RegistryTest, IntParameters) {
  ASSERT_OK(registry_.Register(
      "add_ints", [](int64_t a, int b) { return a + int64_t{b}; }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("add_ints", {int64_t{1} << 40, 2}));
  EXPECT_EQ(r, Value((int64_t{1} << 40) + 2));
}

TEST_F(RegistryTest, IntParameterRejectsValueOutsideInt32) {
  ASSERT_OK(registry_.Register("id", [](int x) { return x; }));
  EXPECT_THAT(Call("id", {int64_t{1} << 40}),
              StatusIs(kInvalid, AllOf(HasSubstr("args[0]"),
                                       HasSubstr("does not fit in int32"))));
}

TEST_F(RegistryTest, BoolStringAndBytesParameters) {
  ASSERT_OK(registry_.Register("pick",
                               [](bool first, std::string s, Bytes b) -> Value {
                                 if (first) return s;
                                 return b;
                               }));
  ASSERT_OK_AND_ASSIGN(Value a, Call("pick", {true, "text", Bytes{"raw"}}));
  EXPECT_EQ(a, Value("text"));
  ASSERT_OK_AND_ASSIGN(Value b, Call("pick", {false, "text", Bytes{"raw"}}));
  EXPECT_EQ(b, Value(Bytes{"raw"}));
}

TEST_F(RegistryTest, ListAndMapParameters) {
  ASSERT_OK(registry_.Register("count", [](Value::List l, Value::Map m) {
    return static_cast<int64_t>(l.size() + m.size());
  }));
  Value::Map m{{"a", 1}, {"b", 2}};
  ASSERT_OK_AND_ASSIGN(Value r,
                       Call("count", {Value::List{1, "x", nullptr}, m}));
  EXPECT_EQ(r, Value(5));
}

TEST_F(RegistryTest, VectorOfTensorsParameter) {
  ASSERT_OK(registry_.Register("numel", [](std::vector<Tensor> ts) {
    int64_t n = 0;
    for (const Tensor& t : ts) n += t.numel();
    return n;
  }));
  ASSERT_OK_AND_ASSIGN(
      Value r,
      Call("numel", {Value(Value::List{Tensor::FromVector<float>({1, 2}),
                                       Tensor::FromVector<int32_t>({3})})}));
  EXPECT_EQ(r, Value(3));
}

TEST_F(RegistryTest, VectorOfIntsParameter) {
  ASSERT_OK(registry_.Register("total", [](std::vector<int64_t> v) {
    int64_t s = 0;
    for (int64_t x : v) s += x;
    return s;
  }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("total", {Value(Value::List{1, 2, 3})}));
  EXPECT_EQ(r, Value(6));
  ASSERT_OK_AND_ASSIGN(Value empty, Call("total", {Value(Value::List{})}));
  EXPECT_EQ(empty, Value(0));
}

TEST_F(RegistryTest, ValueParameterTakesAnything) {
  ASSERT_OK(registry_.Register(
      "kind", [](const Value& v) { return std::string(v.kind_name()); }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("kind", {nullptr}));
  EXPECT_EQ(r, Value("null"));
  ASSERT_OK_AND_ASSIGN(r, Call("kind", {Value::Map{}}));
  EXPECT_EQ(r, Value("map"));
}

TEST_F(RegistryTest, TrailingOptionalAbsentOrNull) {
  ASSERT_OK(registry_.Register("opt", [](int64_t a, std::optional<int64_t> b) {
    return a + b.value_or(100);
  }));
  ASSERT_OK_AND_ASSIGN(Value absent, Call("opt", {1}));
  EXPECT_EQ(absent, Value(101));
  ASSERT_OK_AND_ASSIGN(Value null, Call("opt", {1, nullptr}));
  EXPECT_EQ(null, Value(101));
  ASSERT_OK_AND_ASSIGN(Value given, Call("opt", {1, 2}));
  EXPECT_EQ(given, Value(3));
}

TEST_F(RegistryTest, OptionalParameterStillChecksKind) {
  ASSERT_OK(registry_.Register(
      "opt", [](std::optional<std::string> s) { return s.value_or("none"); }));
  EXPECT_THAT(
      Call("opt", {3}),
      StatusIs(kInvalid, HasSubstr("args[0]: expected string, got int")));
}

TEST_F(RegistryTest, CallContextFirstParameter) {
  ctx_.worker = "worker3";
  ctx_.caller = "client1";
  ASSERT_OK(registry_.Register(
      "who", [](const CallContext& ctx, const std::string& suffix) {
        return ctx.worker + "/" + ctx.caller + suffix;
      }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("who", {"!"}));
  EXPECT_EQ(r, Value("worker3/client1!"));
  // The context is not an argument.
  EXPECT_EQ(Signature("who"), "who(arg0: string) -> value");
}

TEST_F(RegistryTest, CallContextOnly) {
  ctx_.worker = "w0";
  ASSERT_OK(registry_.Register(
      "name", [](const CallContext& ctx) { return ctx.worker; }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("name", {}));
  EXPECT_EQ(r, Value("w0"));
  EXPECT_THAT(Call("name", {1}),
              StatusIs(kInvalid, HasSubstr("expected 0 arguments, got 1")));
}

int64_t Twice(int64_t x) { return 2 * x; }

TEST_F(RegistryTest, PlainFunctionPointer) {
  ASSERT_OK(registry_.Register("twice", Twice));
  ASSERT_OK(registry_.Register("twice2", &Twice));
  ASSERT_OK_AND_ASSIGN(Value r, Call("twice", {21}));
  EXPECT_EQ(r, Value(42));
  ASSERT_OK_AND_ASSIGN(r, Call("twice2", {4}));
  EXPECT_EQ(r, Value(8));
}

// ---- Return types ----

TEST_F(RegistryTest, VoidReturnsNull) {
  int calls = 0;
  ASSERT_OK(registry_.Register("touch", [&calls]() { ++calls; }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("touch", {}));
  EXPECT_TRUE(r.is_null());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(Signature("touch"), "touch() -> null");
}

TEST_F(RegistryTest, ValueReturn) {
  ASSERT_OK(registry_.Register("pair", [](int64_t a) {
    return Value(Value::List{a, a + 1});
  }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("pair", {1}));
  EXPECT_EQ(r, Value(Value::List{1, 2}));
  EXPECT_EQ(Signature("pair"), "pair(arg0: int) -> value");
}

TEST_F(RegistryTest, TensorReturn) {
  ASSERT_OK(registry_.Register(
      "vec", [](int64_t a) { return Tensor::FromVector<int64_t>({a}); }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("vec", {7}));
  EXPECT_EQ(r, Value(Tensor::FromVector<int64_t>({7})));
  EXPECT_EQ(Signature("vec"), "vec(arg0: int) -> tensor");
}

TEST_F(RegistryTest, StatusReturn) {
  ASSERT_OK(registry_.Register("check", [](bool ok) {
    return ok ? absl::OkStatus() : absl::NotFoundError("missing thing");
  }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("check", {true}));
  EXPECT_TRUE(r.is_null());
  EXPECT_THAT(Call("check", {false}),
              StatusIs(absl::StatusCode::kNotFound, "missing thing"));
  EXPECT_EQ(Signature("check"), "check(arg0: bool) -> null");
}

TEST_F(RegistryTest, StatusOrReturn) {
  ASSERT_OK(
      registry_.Register("maybe", [](int64_t x) -> absl::StatusOr<Tensor> {
        if (x < 0) return absl::OutOfRangeError("negative");
        return Tensor::FromVector<int64_t>({x});
      }));
  ASSERT_OK_AND_ASSIGN(Value r, Call("maybe", {3}));
  EXPECT_EQ(r, Value(Tensor::FromVector<int64_t>({3})));
  EXPECT_THAT(Call("maybe", {-1}),
              StatusIs(absl::StatusCode::kOutOfRange, "negative"));
  EXPECT_EQ(Signature("maybe"), "maybe(arg0: int) -> tensor");
}

TEST_F(RegistryTest, FutureReturnIsAsynchronous) {
  Promise<Value> later;
  ASSERT_OK(
      registry_.Register("wait", [later](int64_t) { return later.future(); }));
  std::shared_ptr<const RegisteredFunction> fn = registry_.Find("wait");
  ASSERT_NE(fn, nullptr);
  Future<Value> f = fn->fn(ctx_, {1});
  EXPECT_FALSE(f.IsReady());
  later.Set(Value("done"));
  ASSERT_OK_AND_ASSIGN(Value r, f.Wait(absl::Seconds(5)));
  EXPECT_EQ(r, Value("done"));
}

// ---- Argument errors ----

TEST_F(RegistryTest, ArityErrorNamesCountAndSignature) {
  ASSERT_OK(registry_.Register("f", [](const Tensor& t, int64_t) { return t; },
                               {.params = {"t", "n"}}));
  EXPECT_THAT(Call("f", {Tensor()}),
              StatusIs(kInvalid, AllOf(HasSubstr("expected 2 arguments, got 1"),
                                       HasSubstr("f(t: tensor, n: int) -> "
                                                 "tensor"))));
  EXPECT_THAT(Call("f", {Tensor(), 1, 2}),
              StatusIs(kInvalid, HasSubstr("expected 2 arguments, got 3")));
}

TEST_F(RegistryTest, ArityErrorWithOptionalGivesRange) {
  ASSERT_OK(registry_.Register("g", [](int64_t a, std::optional<int64_t>,
                                       std::optional<int64_t>) { return a; }));
  EXPECT_THAT(Call("g", {}),
              StatusIs(kInvalid,
                       HasSubstr("expected at least 1 and at most 3 arguments, "
                                 "got 0")));
  EXPECT_THAT(Call("g", {1, 2, 3, 4}), StatusIs(kInvalid, HasSubstr("got 4")));
}

TEST_F(RegistryTest, KindErrorNamesArgument) {
  ASSERT_OK(
      registry_.Register("f", [](int64_t, const Tensor& t) { return t; }));
  EXPECT_THAT(Call("f", {1, "oops"}),
              StatusIs(kInvalid, "args[1]: expected tensor, got string"));
}

TEST_F(RegistryTest, FirstKindErrorWins) {
  ASSERT_OK(registry_.Register("f", [](std::string, bool) {}));
  EXPECT_THAT(Call("f", {1, 2}),
              StatusIs(kInvalid, "args[0]: expected string, got int"));
}

TEST_F(RegistryTest, NullForRequiredParameterIsKindError) {
  ASSERT_OK(registry_.Register("f", [](double x) { return x; }));
  EXPECT_THAT(Call("f", {nullptr}),
              StatusIs(kInvalid, "args[0]: expected number, got null"));
  EXPECT_THAT(Call("f", {true}),
              StatusIs(kInvalid, "args[0]: expected number, got bool"));
}

TEST_F(RegistryTest, ListParameterRejectsNonList) {
  ASSERT_OK(registry_.Register("f", [](std::vector<Tensor> ts) {
    return static_cast<int64_t>(ts.size());
  }));
  EXPECT_THAT(Call("f", {Tensor()}),
              StatusIs(kInvalid, "args[0]: expected list[tensor], got tensor"));
}

TEST_F(RegistryTest, ListElementErrorNamesElement) {
  ASSERT_OK(registry_.Register("f", [](int64_t, std::vector<int64_t> v) {
    return static_cast<int64_t>(v.size());
  }));
  EXPECT_THAT(Call("f", {0, Value::List{1, 2, "three"}}),
              StatusIs(kInvalid, "args[1][2]: expected int, got string"));
}

TEST_F(RegistryTest, ListElementErrorKeepsElementReason) {
  ASSERT_OK(registry_.Register(
      "f", [](std::vector<int> v) { return static_cast<int64_t>(v.size()); }));
  EXPECT_THAT(Call("f", {Value(Value::List{1, int64_t{1} << 40})}),
              StatusIs(kInvalid, AllOf(HasSubstr("args[0][1]"),
                                       HasSubstr("does not fit in int32"))));
}

// ---- Signatures ----

TEST_F(RegistryTest, SignatureUsesParamNamesAndMarksOptional) {
  ASSERT_OK(registry_.Register(
      "scale",
      [](const Tensor& t, double k,
         std::optional<std::string> dtype) -> absl::StatusOr<Tensor> {
        (void)k;
        (void)dtype;
        return t;
      },
      {.params = {"t", "k", "dtype"}, .doc = "t * k"}));
  EXPECT_EQ(Signature("scale"),
            "scale(t: tensor, k: number, dtype: string?) -> tensor");
  EXPECT_EQ(registry_.Find("scale")->doc, "t * k");
}

TEST_F(RegistryTest, SignatureDefaultsMissingNames) {
  ASSERT_OK(
      registry_.Register("f",
                         [](Value::List, Value::Map, Bytes,
                            std::vector<int64_t>) { return absl::OkStatus(); },
                         {.params = {"first"}}));
  EXPECT_EQ(Signature("f"),
            "f(first: list, arg1: map, arg2: bytes, arg3: list[int]) -> null");
}

TEST_F(RegistryTest, RegisterAsyncKeepsGivenSignatureAndOptions) {
  ASSERT_OK(registry_.RegisterAsync(
      "raw",
      [](const CallContext&, std::vector<Value> args) {
        return Future<Value>::Ready(Value(static_cast<int64_t>(args.size())));
      },
      "raw(values...) -> int", {.doc = "counts", .run_inline = true}));
  std::shared_ptr<const RegisteredFunction> fn = registry_.Find("raw");
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ(fn->name, "raw");
  EXPECT_EQ(fn->signature, "raw(values...) -> int");
  EXPECT_EQ(fn->doc, "counts");
  EXPECT_TRUE(fn->run_inline);
  ASSERT_OK_AND_ASSIGN(Value r, Call("raw", {1, 2, 3}));
  EXPECT_EQ(r, Value(3));
}

// ---- Names, lookup ----

TEST_F(RegistryTest, DuplicateNameIsAlreadyExists) {
  ASSERT_OK(registry_.Register("f", []() {}));
  EXPECT_THAT(registry_.Register("f", [](int64_t x) { return x; }),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("'f'")));
  // The first registration stays.
  EXPECT_EQ(Signature("f"), "f() -> null");
  EXPECT_EQ(registry_.size(), 1);
}

TEST_F(RegistryTest, InvalidNamesRejected) {
  for (const std::string& name :
       {std::string(""), std::string("1abc"), std::string("a-b"),
        std::string(".x"), std::string("a b"), std::string("é"),
        std::string(129, 'a')}) {
    EXPECT_THAT(registry_.Register(name, []() {}), StatusIs(kInvalid))
        << "'" << name << "'";
  }
  EXPECT_EQ(registry_.size(), 0);
}

TEST_F(RegistryTest, ValidNamesAccepted) {
  for (const std::string& name :
       {std::string("a"), std::string("_x"), std::string("ns.fn_2"),
        std::string("A.b.C"), std::string(128, 'a')}) {
    EXPECT_OK(registry_.Register(name, []() {}));
  }
  EXPECT_EQ(registry_.size(), 5);
}

TEST_F(RegistryTest, FindAbsentIsNull) {
  EXPECT_EQ(registry_.Find("nope"), nullptr);
}

TEST_F(RegistryTest, ListIsSortedByName) {
  for (const char* name : {"zeta", "alpha", "mid.x", "Beta", "mid"}) {
    ASSERT_OK(registry_.Register(name, []() {}));
  }
  std::vector<std::string> names;
  for (const auto& fn : registry_.List()) names.push_back(fn->name);
  EXPECT_THAT(names, ElementsAre("Beta", "alpha", "mid", "mid.x", "zeta"));
}

// ---- Exceptions ----

TEST_F(RegistryTest, ThrownExceptionBecomesInternal) {
  ASSERT_OK(registry_.Register(
      "boom", [](int64_t) -> int64_t { throw std::runtime_error("kaboom"); }));
  EXPECT_THAT(Call("boom", {1}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("kaboom")));
}

TEST_F(RegistryTest, ThrownNonStdExceptionBecomesInternal) {
  ASSERT_OK(registry_.RegisterAsync(
      "boom",
      [](const CallContext&, std::vector<Value>) -> Future<Value> { throw 42; },
      "boom() -> value"));
  EXPECT_THAT(Call("boom", {}), StatusIs(absl::StatusCode::kInternal));
}

}  // namespace
}  // namespace ferry
