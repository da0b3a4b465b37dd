// Trace context: the traceparent header's form, spans as JSON lines, the
// tracer's ring and file; and in a job of three workers, one trace of a
// call nested worker0 -> worker1 -> worker2 with its spans in parent order
// (one nested call passed the context explicitly, one on the invoking
// thread).
#include "rpc/tracing.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/agent.h"
#include "rpc/base/trace_binary.h"
#include "rpc/base/trace_context.h"
#include "rpc/base/traceparent.h"
#include "rpc/value/json.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(TraceparentTest, FormatsAndParsesW3cVersion00) {
  const std::string h =
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  std::optional<TraceContext> c = ParseTraceparent(h);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(c->span_id, 0x00f067aa0ba902b7u);
  EXPECT_TRUE(c->sampled);
  EXPECT_EQ(FormatTraceparent(*c), h);
  c->sampled = false;
  EXPECT_EQ(FormatTraceparent(*c).substr(53), "00");
}

TEST(TraceparentTest, RefusesWhatIsNotAValidHeader) {
  for (const char* bad : {
           "",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
           "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
           "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
}

// Every byte that is not a lower-case hex digit, at every digit's place.
TEST(TraceparentTest, RefusesAnyOtherByteAtEveryDigit) {
  const std::string good =
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  ASSERT_TRUE(ParseTraceparent(good).has_value());
  for (size_t at : {3, 18, 19, 34, 36, 51, 53, 54}) {
    for (int c = 0; c < 256; ++c) {
      const bool digit = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
      std::string h = good;
      h[at] = static_cast<char>(c);
      EXPECT_EQ(ParseTraceparent(h).has_value(), digit)
          << "byte " << c << " at " << at;
    }
  }
}

// The binary form's example: the header above as 29 bytes.
TEST(TraceparentBinaryTest, FormatsAndParsesTheW3cLayout) {
  const std::string bytes(
      "\x00\x00\x4b\xf9\x2f\x35\x77\xb3\x4d\xa6\xa3\xce\x92\x9d\x0e\x0e"
      "\x47\x36\x01\x00\xf0\x67\xaa\x0b\xa9\x02\xb7\x02\x01",
      kTraceparentBinarySize);
  std::optional<TraceContext> c = ParseTraceparentBinary(bytes);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(c->span_id, 0x00f067aa0ba902b7u);
  EXPECT_TRUE(c->sampled);
  EXPECT_EQ(FormatTraceparentBinary(*c), bytes);
  EXPECT_EQ(ParseTraceparent(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
                ->trace_lo,
            c->trace_lo);
}

TEST(TraceparentBinaryTest, RefusesWhatIsNotOne) {
  const std::string good = FormatTraceparentBinary(NewTrace(true));
  ASSERT_TRUE(ParseTraceparentBinary(good).has_value());
  EXPECT_FALSE(ParseTraceparentBinary("").has_value());
  EXPECT_FALSE(ParseTraceparentBinary(good.substr(1)).has_value());
  EXPECT_FALSE(ParseTraceparentBinary(good + "x").has_value());
  // The version, and each field's id, changed.
  for (size_t at : {0, 1, 18, 27}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] + 1);
    EXPECT_FALSE(ParseTraceparentBinary(bad).has_value()) << "at " << at;
  }
  std::string zero_span = good;
  std::fill(zero_span.begin() + 19, zero_span.begin() + 27, '\0');
  EXPECT_FALSE(ParseTraceparentBinary(zero_span).has_value());
  std::string zero_trace = good;
  std::fill(zero_trace.begin() + 2, zero_trace.begin() + 18, '\0');
  EXPECT_FALSE(ParseTraceparentBinary(zero_trace).has_value());
}

TEST(TraceparentTest, NewContextsRoundTrip) {
  for (int i = 0; i < 1000; ++i) {
    const TraceContext c = NewTrace(i % 2 == 0);
    std::optional<TraceContext> back = ParseTraceparent(FormatTraceparent(c));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->trace_id(), c.trace_id());
    EXPECT_EQ(back->span_id, c.span_id);
    EXPECT_EQ(back->sampled, c.sampled);
    EXPECT_EQ(SpanIdHex(c.span_id).size(), 16u);
    EXPECT_EQ(ParseSpanId(SpanIdHex(c.span_id)), c.span_id);
    std::optional<TraceContext> binary =
        ParseTraceparentBinary(FormatTraceparentBinary(c));
    ASSERT_TRUE(binary.has_value());
    EXPECT_EQ(binary->trace_id(), c.trace_id());
    EXPECT_EQ(binary->span_id, c.span_id);
    EXPECT_EQ(binary->sampled, c.sampled);
  }
}

TEST(TraceparentTest, ThreadsCarryTheirCurrentContext) {
  EXPECT_FALSE(CurrentTrace().valid());
  TraceContext t = NewTrace(true);
  {
    ScopedTrace scope(t);
    EXPECT_EQ(CurrentTrace().span_id, t.span_id);
    TraceContext out = OutgoingTrace(TraceContext(), false);
    EXPECT_EQ(out.span_id, t.span_id);
    TraceContext child = t.Child();
    EXPECT_EQ(child.trace_id(), t.trace_id());
    EXPECT_NE(child.span_id, t.span_id);
  }
  EXPECT_FALSE(CurrentTrace().valid());
  // Without one, a message starts a trace of its own.
  EXPECT_TRUE(OutgoingTrace(TraceContext(), false).valid());
}

TEST(TracerTest, KeepsSampledSpansAndWritesEveryOneToTheFile) {
  const std::string file = absl::StrCat(::testing::TempDir(), "/spans.jsonl");
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Tracer> tracer,
                       Tracer::Open({.worker = "worker3", .trace_file = file}));
  TraceContext sampled = NewTrace(true), unsampled = NewTrace(false);
  EXPECT_TRUE(tracer->Records(unsampled));  // It has a file.
  tracer->Record({.name = "add",
                  .context = sampled,
                  .parent_span_id = 7,
                  .start = absl::FromUnixSeconds(1),
                  .status = "OK",
                  .kind = "server"});
  tracer->Record({.name = "echo", .context = unsampled, .status = "OK"});
  std::vector<Span> kept = tracer->SpansOf(sampled.trace_hi, sampled.trace_lo);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept[0].worker, "worker3");
  EXPECT_THAT(tracer->SpansOf(unsampled.trace_hi, unsampled.trace_lo),
              IsEmpty());
  tracer.reset();
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  ASSERT_OK_AND_ASSIGN(Value first, ParseJson(lines[0]));
  ASSERT_OK_AND_ASSIGN(Span back, SpanFromValue(first));
  EXPECT_EQ(back.name, "add");
  EXPECT_EQ(back.context.trace_id(), sampled.trace_id());
  EXPECT_EQ(back.parent_span_id, 7u);
  EXPECT_EQ(back.start, absl::FromUnixSeconds(1));
  EXPECT_EQ(first.Find("parent_span_id")->as_string(), "0000000000000007");
}

// Issue 49 R8: spans were kept at whatever size their names and peers
// came (a 256 KiB unknown function name, a 512 KiB caller name), 4096 of
// them. Each text field is cut, and the ring is bounded in bytes too.
TEST(TracerTest, KeptSpansAreBoundedInFieldsAndBytes) {
  ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<Tracer> tracer,
      Tracer::Open(
          {.worker = "worker1", .keep = 1000, .keep_bytes = 64 << 10}));
  const TraceContext trace = NewTrace(true);
  const std::string huge(256 << 10, 'x');
  for (int i = 0; i < 1000; ++i) {
    tracer->Record({.name = huge, .context = trace, .peer = huge});
  }
  std::vector<Span> kept = tracer->SpansOf(trace.trace_hi, trace.trace_lo);
  ASSERT_FALSE(kept.empty());
  EXPECT_LT(kept.size(), 1000u);  // The bytes bound, not the count.
  size_t bytes = 0;
  for (const Span& s : kept) {
    EXPECT_THAT(s.name, HasSubstr("(262144 bytes)"));
    EXPECT_LE(s.name.size(), Tracer::kMaxFieldBytes + 32);
    EXPECT_LE(s.peer.size(), Tracer::kMaxFieldBytes + 32);
    bytes += sizeof(Span) + s.name.size() + s.peer.size() + s.status.size() +
             s.worker.size() + s.kind.size();
  }
  EXPECT_LE(bytes, size_t{64} << 10);
}

TEST(TracerTest, AnUnopenableFileIsUnavailable) {
  EXPECT_THAT(Tracer::Open({.trace_file = "/proc/no/such/file"}),
              testing::StatusIs(absl::StatusCode::kUnavailable));
}

// worker0's relay calls worker1 (passing its context: NestedIn), whose
// relay calls worker2 from the thread it runs on (no context passed).
void SetupRelays(WorkerImpl& w) {
  RpcAgent* agent = &w.rpc();
  if (w.rank() == 0) {
    ASSERT_OK(w.registry().RegisterAsync(
        "relay",
        [agent](const CallContext& ctx, std::vector<Value>) {
          return agent->RpcAsync("worker1", "relay", {}, NestedIn(ctx));
        },
        "relay() -> value"));
  } else if (w.rank() == 1) {
    ASSERT_OK(w.registry().Register(
        "relay", [agent]() { return agent->RpcSync("worker2", "leaf", {}); }));
  } else {
    ASSERT_OK(w.registry().Register("leaf", []() { return int64_t{42}; }));
  }
}

TEST(NestedTraceTest, OneTraceThreeSpansInParentOrder) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                       LocalJob::Start(3, {.setup = SetupRelays}));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientImpl> client, job->Connect());
  const TraceContext root = NewTrace(/*sampled=*/true);
  ASSERT_OK_AND_ASSIGN(
      Value result,
      client->rpc().RpcSync("worker0", "relay", {},
                            {.timeout = absl::Seconds(30), .trace = root}));
  EXPECT_EQ(result.as_int(), 42);
  std::vector<Span> spans;
  for (int r = 0; r < 3; ++r) {
    std::vector<Span> mine =
        job->worker(r).rpc().tracer()->SpansOf(root.trace_hi, root.trace_lo);
    ASSERT_EQ(mine.size(), 1u) << "worker" << r;
    spans.push_back(mine[0]);
  }
  EXPECT_EQ(spans[0].worker, "worker0");
  EXPECT_EQ(spans[0].name, "relay");
  EXPECT_EQ(spans[0].parent_span_id, root.span_id);
  EXPECT_EQ(spans[1].name, "relay");
  EXPECT_EQ(spans[1].parent_span_id, spans[0].context.span_id);
  EXPECT_EQ(spans[1].peer, "worker0");
  EXPECT_EQ(spans[2].name, "leaf");
  EXPECT_EQ(spans[2].parent_span_id, spans[1].context.span_id);
  for (const Span& s : spans) {
    EXPECT_EQ(s.context.trace_id(), root.trace_id());
    EXPECT_EQ(s.status, "OK");
  }
  // Unsampled, and no trace file: no span anywhere.
  const TraceContext quiet = NewTrace(false);
  ASSERT_OK(client->rpc().RpcSync(
      "worker0", "relay", {}, {.timeout = absl::Seconds(30), .trace = quiet}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(
        job->worker(r).rpc().tracer()->SpansOf(quiet.trace_hi, quiet.trace_lo),
        IsEmpty());
  }
}

// A caller that is not ferry (any gRPC client) sends the header as a
// `traceparent` metadata entry; ferry's callers send the binary form in
// the request, which wins over the entry. A request's form that is not a
// trace context (and no entry) starts a new trace, and the call runs.
TEST(NestedTraceTest, EitherCarrierContinuesTheTrace) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job,
                       LocalJob::Start(3, {.setup = SetupRelays}));
  Tracer* tracer = job->worker(2).rpc().tracer();
  const TraceContext by_metadata = NewTrace(true);
  const TraceContext by_request = NewTrace(true);
  const std::string leaf = ::ferry::testing::wire::CallRequest("leaf", {});
  ::ferry::testing::RawClient raw(job->worker(2).rpc().address());
  raw.add_metadata("traceparent", FormatTraceparent(by_metadata));

  auto answered = [](const ::ferry::testing::RawReply& r) {
    return r.status.ok() ? ::ferry::testing::ParseResult(r.bytes)
                         : absl::InternalError(r.status.error_message());
  };
  ASSERT_OK_AND_ASSIGN(
      proto::Value alone,
      answered(raw.Unary(::ferry::testing::kCallMethod, leaf)));
  EXPECT_EQ(alone.int_value(), 42);
  std::vector<Span> spans =
      tracer->SpansOf(by_metadata.trace_hi, by_metadata.trace_lo);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].parent_span_id, by_metadata.span_id);

  ASSERT_OK(
      answered(raw.Unary(::ferry::testing::kCallMethod,
                         leaf + ::ferry::testing::wire::Bytes(
                                    6, FormatTraceparentBinary(by_request)))));
  spans = tracer->SpansOf(by_request.trace_hi, by_request.trace_lo);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].parent_span_id, by_request.span_id);
  EXPECT_EQ(tracer->SpansOf(by_metadata.trace_hi, by_metadata.trace_lo).size(),
            1u);

  // Not a trace context (a version this reader does not know, a length),
  // from a client without the entry: a trace of the worker's own; the call
  // is answered all the same.
  ::ferry::testing::RawClient plain(job->worker(2).rpc().address());
  std::string unknown = FormatTraceparentBinary(by_request);
  unknown[0] = 1;
  for (const std::string& bad : {unknown, std::string(1000, 'x')}) {
    ASSERT_OK(
        answered(plain.Unary(::ferry::testing::kCallMethod,
                             leaf + ::ferry::testing::wire::Bytes(6, bad))));
  }
  EXPECT_EQ(tracer->SpansOf(by_request.trace_hi, by_request.trace_lo).size(),
            1u);
  EXPECT_EQ(tracer->SpansOf(by_metadata.trace_hi, by_metadata.trace_lo).size(),
            1u);
}

}  // namespace
}  // namespace ferry
