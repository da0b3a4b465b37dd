// Keyword arguments end to end (CallRequest.kwargs): sent by calls and
// remote(), bounded and checked by the callee, given to functions that take
// them (CallContext::kwargs), refused by those that do not, naming them,
// before they run.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rpc/agent.h"
#include "rpc/function.h"
#include "rref/rref.h"
#include "rref/rref_context.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

class KeywordArgsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<LocalJob>> job = LocalJob::Start(
        2, {.setup = [this](WorkerImpl& w) {
          // Answers [args, kwargs] (kwargs null when the call had none).
          ASSERT_OK(w.registry().RegisterAsync(
              "keywords",
              [](const CallContext& ctx, std::vector<Value> args) {
                Value kwargs;
                if (ctx.kwargs != nullptr) kwargs = Value(*ctx.kwargs);
                return Future<Value>::Ready(
                    Value(Value::List{Value(std::move(args)), kwargs}));
              },
              "keywords(*args, **kwargs) -> value", {.keywords = true}));
          ASSERT_OK(w.registry().Register("positional",
                                          [this](int64_t a) {
                                            ++positional_runs_;
                                            return a;
                                          },
                                          {.params = {"a"}}));
        }});
    ASSERT_OK(job);
    job_ = *std::move(job);
  }
  RpcAgent& agent(int rank) { return job_->worker(rank).rpc(); }

  std::atomic<int> positional_runs_{0};
  std::unique_ptr<LocalJob> job_;
};

TEST_F(KeywordArgsTest, AFunctionTakingKeywordsGetsThem) {
  Value::Map kwargs{{"scale", 2.5}, {"names", Value::List{"a", "b"}}};
  ASSERT_OK_AND_ASSIGN(Value r, agent(0).RpcSync("worker1", "keywords", {1, 2},
                                                 {.kwargs = kwargs}));
  EXPECT_EQ(r, Value(Value::List{Value(Value::List{1, 2}), Value(kwargs)}));
  // Without any: a null CallContext::kwargs.
  ASSERT_OK_AND_ASSIGN(Value plain,
                       agent(0).RpcSync("worker1", "keywords", {1}));
  EXPECT_EQ(plain, Value(Value::List{Value(Value::List{1}), Value()}));
}

TEST_F(KeywordArgsTest, RemoteCarriesKeywords) {
  ASSERT_OK_AND_ASSIGN(
      RRef r, job_->worker(0).rrefs().Remote("worker1", "keywords", {},
                                             std::nullopt, {{"k", 7}}));
  ASSERT_OK_AND_ASSIGN(Value v, r.ToHere());
  EXPECT_EQ(
      v, Value(Value::List{Value(Value::List{}), Value(Value::Map{{"k", 7}})}));
}

TEST_F(KeywordArgsTest, CxxFunctionsRefuseKeywordsNamingThemBeforeRunning) {
  EXPECT_THAT(
      agent(0).RpcSync("worker1", "positional", {1}, {.kwargs = {{"b", 2}}}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("worker1: positional: takes no keyword "
                         "arguments")));
  EXPECT_EQ(positional_runs_.load(), 0);
  // Builtins are C++ functions too.
  EXPECT_THAT(agent(0).RpcSync("worker1", "add", {1}, {.kwargs = {{"b", 2}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("worker1: add: takes no keyword arguments")));
  ASSERT_OK_AND_ASSIGN(
      RRef r, job_->worker(0).rrefs().Remote("worker1", "positional", {1},
                                             std::nullopt, {{"b", 2}}));
  EXPECT_THAT(r.ToHere(), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("positional: takes no keyword")));
  EXPECT_EQ(positional_runs_.load(), 0);
  // An empty map is no keyword argument.
  ASSERT_OK_AND_ASSIGN(Value one, agent(0).RpcSync("worker1", "positional", {1},
                                                   {.kwargs = {}}));
  EXPECT_EQ(one, Value(1));
}

TEST_F(KeywordArgsTest, KeywordsAreBoundedByTheCallee) {
  EXPECT_THAT(agent(0).RpcSync("worker1", "keywords", {},
                               {.kwargs = {{"not-a-name", 1}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("is not a keyword")));
  Value::Map many;
  for (int i = 0; i <= Limits().max_args; ++i) {
    many.emplace("k" + std::to_string(i), i);
  }
  EXPECT_THAT(
      agent(0).RpcSync("worker1", "keywords", {}, {.kwargs = std::move(many)}),
      StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("--max_args")));
}

}  // namespace
}  // namespace ferry
