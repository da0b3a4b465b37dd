#include "rpc/tracing.h"

#include <errno.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/peer_text.h"
#include "rpc/base/traceparent.h"
#include "rpc/value/json.h"

namespace ferry {

namespace {

std::string Field(const Value& v, const char* key) {
  const Value* f = v.Find(key);
  return f != nullptr && f->is_string() ? f->as_string() : "";
}

void Bound(std::string* field) {
  if (field->size() > Tracer::kMaxFieldBytes) {
    *field = EchoPeerText(*field, Tracer::kMaxFieldBytes);
  }
}

// What a kept span costs: its fixed part and its text.
size_t SpanBytes(const Span& s) {
  return sizeof(Span) + s.name.size() + s.status.size() + s.peer.size() +
         s.worker.size() + s.kind.size();
}

}  // namespace

Value SpanToValue(const Span& s) {
  Value::Map m{
      {"name", s.name},
      {"trace_id", s.context.trace_id()},
      {"span_id", SpanIdHex(s.context.span_id)},
      {"start_unix_nano", absl::ToUnixNanos(s.start)},
      {"duration_ns", absl::ToInt64Nanoseconds(s.duration)},
      {"status", s.status},
      {"worker", s.worker},
      {"kind", s.kind},
  };
  if (s.parent_span_id != 0)
    m.emplace("parent_span_id", SpanIdHex(s.parent_span_id));
  if (!s.peer.empty()) m.emplace("peer", s.peer);
  return Value(std::move(m));
}

absl::StatusOr<Span> SpanFromValue(const Value& v) {
  Span s;
  auto trace = ParseTraceId(Field(v, "trace_id"));
  auto span = ParseSpanId(Field(v, "span_id"));
  const Value* start = v.Find("start_unix_nano");
  const Value* duration = v.Find("duration_ns");
  if (!v.is_map() || !trace || !span || start == nullptr || !start->is_int() ||
      duration == nullptr || !duration->is_int()) {
    return absl::InvalidArgumentError("not a span");
  }
  s.context = {trace->first, trace->second, *span, true};
  if (!Field(v, "parent_span_id").empty()) {
    auto parent = ParseSpanId(Field(v, "parent_span_id"));
    if (!parent) return absl::InvalidArgumentError("bad parent_span_id");
    s.parent_span_id = *parent;
  }
  s.name = Field(v, "name");
  s.start = absl::FromUnixNanos(start->as_int());
  s.duration = absl::Nanoseconds(duration->as_int());
  s.status = Field(v, "status");
  s.peer = Field(v, "peer");
  s.worker = Field(v, "worker");
  s.kind = Field(v, "kind");
  return s;
}

void AddTraceparent(grpc::ClientContext* client, const TraceContext& context) {
  if (context.valid())
    client->AddMetadata(kTraceparentKey, FormatTraceparent(context));
}

std::optional<TraceContext> TraceparentOf(
    const grpc::ServerContextBase& server) {
  const auto& metadata = server.client_metadata();
  auto it = metadata.find(kTraceparentKey);
  if (it == metadata.end()) return std::nullopt;
  return ParseTraceparent(
      absl::string_view(it->second.data(), it->second.size()));
}

TraceContext OutgoingTrace(const TraceContext& explicit_one, bool sample_new) {
  if (explicit_one.valid()) return explicit_one;
  if (CurrentTrace().valid()) return CurrentTrace();
  return NewTrace(sample_new);
}

absl::StatusOr<std::unique_ptr<Tracer>> Tracer::Open(Options options) {
  std::FILE* file = nullptr;
  if (!options.trace_file.empty()) {
    file = std::fopen(options.trace_file.c_str(), "ae");
    if (file == nullptr) {
      return absl::UnavailableError(
          absl::StrCat("cannot open ", options.trace_file,
                       " (--trace_file): ", std::strerror(errno)));
    }
  }
  return std::unique_ptr<Tracer>(new Tracer(std::move(options), file));
}

Tracer::Tracer(Options options, std::FILE* file)
    : options_(std::move(options)), file_(file) {}

Tracer::~Tracer() {
  if (file_ != nullptr) std::fclose(file_);
}

void Tracer::Record(Span span) {
  for (std::string* field : {&span.name, &span.peer, &span.status, &span.kind})
    Bound(field);
  span.worker = options_.worker;
  std::string line;
  if (file_ != nullptr) line = ToJson(SpanToValue(span)) + "\n";
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr) {
    // Whole lines, flushed, so a reader (or a crash) never sees half.
    std::fwrite(line.data(), 1, line.size(), file_);
    std::fflush(file_);
  }
  if (!span.context.sampled) return;
  kept_bytes_ += SpanBytes(span);
  kept_.push_back(std::move(span));
  while (!kept_.empty() &&
         (kept_.size() > options_.keep || kept_bytes_ > options_.keep_bytes)) {
    kept_bytes_ -= SpanBytes(kept_.front());
    kept_.pop_front();
  }
}

std::vector<Span> Tracer::SpansOf(uint64_t trace_hi, uint64_t trace_lo) const {
  std::vector<Span> out;
  absl::MutexLock lock(&mu_);
  for (const Span& s : kept_) {
    if (s.context.trace_hi == trace_hi && s.context.trace_lo == trace_lo)
      out.push_back(s);
  }
  return out;
}

}  // namespace ferry
