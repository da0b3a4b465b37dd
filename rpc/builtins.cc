#include "rpc/builtins.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"
#include "rpc/value/tensor_math.h"

namespace ferry {

namespace {

absl::Status RegisterArithmetic(Registry* r) {
  struct Op {
    const char* name;
    BinaryOp op;
    const char* doc;
  };
  for (const Op& op :
       {Op{"add", BinaryOp::kAdd,
           "a + b (tensors of one shape, or a tensor and a number, or "
           "numbers)"},
        Op{"sub", BinaryOp::kSub, "a - b"}, Op{"mul", BinaryOp::kMul, "a * b"},
        Op{"div", BinaryOp::kDiv, "a / b (true division)"}}) {
    BinaryOp kind = op.op;
    FERRY_RETURN_IF_ERROR(r->Register(
        op.name,
        [kind](const CallContext& ctx, const Value& a, const Value& b) {
          return Arithmetic(kind, a, b, *ctx.limits);
        },
        {.params = {"a", "b"}, .doc = op.doc}));
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> ShapeArg(const Value& v) {
  if (v.is_int()) return Shape{v.as_int()};
  if (!v.is_list()) {
    return absl::InvalidArgumentError(
        absl::StrCat("args[0]: expected a shape (int or list of ints), got ",
                     v.kind_name()));
  }
  Shape shape;
  for (const Value& d : v.as_list()) {
    if (!d.is_int()) {
      return absl::InvalidArgumentError("args[0]: shape entries must be ints");
    }
    shape.push_back(d.as_int());
  }
  return shape;
}

absl::StatusOr<Tensor> Filled(const CallContext& ctx, const Value& shape,
                              const std::optional<std::string>& dtype,
                              double value) {
  FERRY_ASSIGN_OR_RETURN(Shape s, ShapeArg(shape));
  FERRY_ASSIGN_OR_RETURN(DType d, ParseDType(dtype.value_or("float32")));
  absl::StatusOr<Tensor> t = Fill(d, std::move(s), value, *ctx.limits);
  if (!t.ok()) return Annotate(t.status(), "args[0]");
  return t;
}

// torch.arange: (end), (start, end) or (start, end, step); int64 if all
// bounds are ints, else float32; a trailing dtype name overrides.
absl::StatusOr<Tensor> ArangeFn(const Limits& limits, std::vector<Value> args) {
  std::optional<DType> dtype;
  if (!args.empty() && args.back().is_string()) {
    FERRY_ASSIGN_OR_RETURN(dtype, ParseDType(args.back().as_string()));
    args.pop_back();
  }
  if (args.empty() || args.size() > 3) {
    return absl::InvalidArgumentError(
        "expected arange(end), arange(start, end) or arange(start, end, step), "
        "optionally followed by a dtype");
  }
  bool all_ints = true;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_number()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "args[", i, "]: expected number, got ", args[i].kind_name()));
    }
    all_ints = all_ints && args[i].is_int();
  }
  double start = args.size() > 1 ? args[0].as_number() : 0;
  double end = args.size() > 1 ? args[1].as_number() : args[0].as_number();
  double step = args.size() > 2 ? args[2].as_number() : 1;
  return Arange(start, end, step,
                dtype.value_or(all_ints ? DType::kInt64 : DType::kFloat32),
                limits);
}

absl::StatusOr<Value> SumFn(const CallContext& ctx, const Value& x) {
  if (x.is_tensor()) return Value(SumAll(x.as_tensor()));
  if (!x.is_list() || x.as_list().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "args[0]: expected a tensor or a non-empty list, got ", x.kind_name()));
  }
  const Value& first = x.as_list()[0];
  if (!first.is_tensor() && !first.is_number() && !first.is_bool()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "args[0][0]: expected a tensor or number, got ", first.kind_name()));
  }
  Value acc = first;
  for (size_t i = 1; i < x.as_list().size(); ++i) {
    absl::StatusOr<Value> next =
        Arithmetic(BinaryOp::kAdd, acc, x.as_list()[i], *ctx.limits);
    if (!next.ok())
      return Annotate(next.status(), absl::StrCat("args[0][", i, "]"));
    acc = *std::move(next);
  }
  return acc;
}

Future<Value> SleepMs(Timers* timers, const CallContext& ctx, int64_t ms) {
  if (ms < 0) {
    return Future<Value>::Ready(
        absl::InvalidArgumentError("args[0]: sleep time must be >= 0"));
  }
  Promise<Value> done;
  // Wake no later than the caller's deadline: nobody waits beyond it, and a
  // sleep cut short is a failure, not a result.
  const absl::Time full = timers->clock()->Now() + absl::Milliseconds(ms);
  const bool cut_short = ctx.deadline < full;
  // The timer and the cancellation each stop the other, so a cancelled
  // sleep holds neither a timer nor a callback afterwards.
  auto cancel_id = std::make_shared<std::atomic<Cancellation::Id>>(0);
  std::shared_ptr<Cancellation> cancellation = ctx.cancellation;
  auto wake = [done, cut_short, cancellation, cancel_id] {
    if (cancellation != nullptr) cancellation->Remove(cancel_id->load());
    if (cut_short) {
      done.Set(absl::DeadlineExceededError("the caller's deadline came first"));
    } else {
      done.Set(Value());
    }
  };
  Timers::TimerId timer = timers->RunAt(std::min(full, ctx.deadline), wake);
  if (timer == 0) {
    done.Set(absl::UnavailableError("worker is stopping"));
    return done.future();
  }
  if (cancellation != nullptr) {
    // Not owning: the cancellation keeps its callbacks (no cycle).
    Cancellation* c = cancellation.get();
    cancel_id->store(c->OnCancel([timers, timer, done, c] {
      if (timers->Cancel(timer)) done.Set(c->reason());
    }));
  }
  return done.future();
}

absl::Status Fail(const std::string& message,
                  const std::optional<std::string>& code) {
  absl::StatusCode c = absl::StatusCode::kUnknown;
  if (code.has_value() && !ParseStatusCodeName(*code, &c)) {
    return absl::InvalidArgumentError(
        absl::StrCat("args[1]: unknown status code name '", *code, "'"));
  }
  if (c == absl::StatusCode::kOk) c = absl::StatusCode::kUnknown;
  return absl::Status(c, message);
}

}  // namespace

absl::Status RegisterBuiltins(Registry* r, Timers* timers) {
  FERRY_RETURN_IF_ERROR(r->RegisterAsync(
      "echo",
      [](const CallContext&, std::vector<Value> args) {
        if (args.size() == 1) return Future<Value>::Ready(std::move(args[0]));
        return Future<Value>::Ready(Value(Value::List(std::move(args))));
      },
      "echo(values...) -> value",
      {.doc = "returns its argument (several arguments: a list of them)",
       .run_inline = true}));
  FERRY_RETURN_IF_ERROR(RegisterArithmetic(r));
  FERRY_RETURN_IF_ERROR(r->Register(
      "sum", SumFn,
      {.params = {"x"},
       .doc =
           "sum of a tensor's elements (0-d tensor), or of a list's items"}));
  FERRY_RETURN_IF_ERROR(
      r->Register("ones",
                  [](const CallContext& ctx, const Value& shape,
                     std::optional<std::string> dtype) {
                    return Filled(ctx, shape, dtype, 1);
                  },
                  {.params = {"shape", "dtype"},
                   .doc = "a tensor of ones (dtype default float32)"}));
  FERRY_RETURN_IF_ERROR(
      r->Register("zeros",
                  [](const CallContext& ctx, const Value& shape,
                     std::optional<std::string> dtype) {
                    return Filled(ctx, shape, dtype, 0);
                  },
                  {.params = {"shape", "dtype"},
                   .doc = "a tensor of zeros (dtype default float32)"}));
  FERRY_RETURN_IF_ERROR(r->RegisterAsync(
      "arange",
      [](const CallContext& ctx, std::vector<Value> args) {
        absl::StatusOr<Tensor> t = ArangeFn(*ctx.limits, std::move(args));
        if (!t.ok()) return Future<Value>::Ready(t.status());
        return Future<Value>::Ready(Value(*std::move(t)));
      },
      "arange(start?: number, end: number, step?: number, "
      "dtype?: string) -> tensor",
      {.doc = "like torch.arange"}));
  FERRY_RETURN_IF_ERROR(
      r->Register("concat",
                  [](const CallContext& ctx, std::vector<Tensor> tensors,
                     std::optional<int64_t> axis) {
                    return Concat(tensors, axis.value_or(0), *ctx.limits);
                  },
                  {.params = {"tensors", "axis"},
                   .doc = "concatenation along axis (default 0)"}));
  FERRY_RETURN_IF_ERROR(r->Register(
      "sleep_ms",
      [timers](const CallContext& ctx, int64_t ms) {
        return SleepMs(timers, ctx, ms);
      },
      {.params = {"ms"},
       .doc = "returns null after ms milliseconds, holding no thread",
       .run_inline = true}));
  FERRY_RETURN_IF_ERROR(r->Register(
      "fail", Fail,
      {.params = {"message", "code"},
       .doc = "fails with message (code: a status name, default UNKNOWN)"}));
  FERRY_RETURN_IF_ERROR(r->Register(
      "worker_name", [](const CallContext& ctx) { return ctx.worker; },
      {.doc = "this worker's name", .run_inline = true}));
  return absl::OkStatus();
}

}  // namespace ferry
