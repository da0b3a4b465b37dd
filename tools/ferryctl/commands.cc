#include "tools/ferryctl/commands.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "collectives/client/client_collective.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "rpc/base/status_util.h"
#include "rpc/value/json.h"
#include "rpc/value/rref_base.h"
#include "rref/rref.h"
#include "tools/ferryctl/waits.h"
#include "tools/progress.h"

namespace ferry {
namespace ctl {

namespace {

using google::protobuf::FieldDescriptor;

Value FieldValue(const google::protobuf::Message& m, const FieldDescriptor* f,
                 int index) {
  const auto* r = m.GetReflection();
  const bool repeated = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return Value(repeated ? r->GetRepeatedInt32(m, f, index)
                            : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return Value(repeated ? r->GetRepeatedInt64(m, f, index)
                            : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return Value(int64_t{repeated ? r->GetRepeatedUInt32(m, f, index)
                                    : r->GetUInt32(m, f)});
    case FieldDescriptor::CPPTYPE_UINT64:
      return Value(static_cast<int64_t>(
          repeated ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f)));
    case FieldDescriptor::CPPTYPE_BOOL:
      return Value(repeated ? r->GetRepeatedBool(m, f, index)
                            : r->GetBool(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return Value(repeated ? r->GetRepeatedDouble(m, f, index)
                            : r->GetDouble(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return Value(double{repeated ? r->GetRepeatedFloat(m, f, index)
                                   : r->GetFloat(m, f)});
    case FieldDescriptor::CPPTYPE_STRING:
      return Value(repeated ? r->GetRepeatedString(m, f, index)
                            : r->GetString(m, f));
    case FieldDescriptor::CPPTYPE_ENUM:
      return Value(
          (repeated ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))
              ->name());
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return MessageToValue(repeated ? r->GetRepeatedMessage(m, f, index)
                                     : r->GetMessage(m, f));
  }
  return Value();
}

// A map field as a JSON object (its keys as text), e.g. WorkerStatus.limits
// as {"max_args":4096,…}.
Value MapFieldValue(const google::protobuf::Message& m,
                    const FieldDescriptor* f) {
  const auto* r = m.GetReflection();
  Value::Map out;
  for (int k = 0; k < r->FieldSize(m, f); ++k) {
    const google::protobuf::Message& entry = r->GetRepeatedMessage(m, f, k);
    const FieldDescriptor* key_field = entry.GetDescriptor()->map_key();
    Value key = FieldValue(entry, key_field, 0);
    out.insert_or_assign(
        key.is_string() ? key.as_string() : ToJson(key),
        FieldValue(entry, entry.GetDescriptor()->map_value(), 0));
  }
  return Value(std::move(out));
}

}  // namespace

Value MessageToValue(const google::protobuf::Message& message) {
  Value::Map out;
  const auto* d = message.GetDescriptor();
  const auto* r = message.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      out.emplace(f->name(), MapFieldValue(message, f));
    } else if (f->is_repeated()) {
      Value::List items;
      for (int k = 0; k < r->FieldSize(message, f); ++k) {
        items.push_back(FieldValue(message, f, k));
      }
      out.emplace(f->name(), std::move(items));
    } else {
      out.emplace(f->name(), FieldValue(message, f, 0));
    }
  }
  return Value(std::move(out));
}

absl::StatusOr<Value> CallCommand(Session& session, const std::string& worker,
                                  const std::string& fn,
                                  std::vector<Value> args) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  return client->rpc().RpcSync(worker, fn, std::move(args),
                               {.timeout = session.timeout()});
}

absl::StatusOr<Value> RemoteRRef(Session& session, const std::string& worker,
                                 const std::string& fn,
                                 std::vector<Value> args) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  FERRY_ASSIGN_OR_RETURN(
      RRef rref,
      client->rrefs().Remote(worker, fn, std::move(args), session.timeout()));
  return rref.AsValue();
}

absl::StatusOr<Value> RemoteCommand(Session& session, const std::string& worker,
                                    const std::string& fn,
                                    std::vector<Value> args) {
  FERRY_ASSIGN_OR_RETURN(Value rref,
                         RemoteRRef(session, worker, fn, std::move(args)));
  FERRY_ASSIGN_OR_RETURN(Value value, FetchCommand(session, rref));
  const RRefDescriptor& d = rref.as_rref()->descriptor();
  return Value(Value::Map{{"rref", GlobalIdString(d.rref_id)},
                          {"owner", d.owner},
                          {"value", std::move(value)}});
}

absl::StatusOr<Value> FetchCommand(Session& session, const Value& rref) {
  FERRY_ASSIGN_OR_RETURN(RRef r, RRef::FromValue(rref));
  return r.ToHere(session.timeout());
}

absl::StatusOr<Value> RRefsCommand(Session& session,
                                   const std::string& worker) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  std::vector<const WorkerInfo*> targets;
  if (worker.empty()) {
    for (const WorkerInfo& w : client->rpc().directory().workers())
      targets.push_back(&w);
  } else {
    FERRY_ASSIGN_OR_RETURN(const WorkerInfo* w,
                           client->rpc().directory().Resolve(worker));
    targets.push_back(w);
  }
  Value::List out;
  const absl::Duration t = std::min(session.bound(), absl::Seconds(10));
  for (const WorkerInfo* w : targets) {
    FERRY_ASSIGN_OR_RETURN(
        std::vector<proto::OwnedRRef> rows,
        client->rrefs().ListOwned(w->rank, t).Wait(t + absl::Seconds(1)));
    Value::List rrefs;
    for (const auto& r : rows) rrefs.push_back(MessageToValue(r));
    out.push_back(
        Value(Value::Map{{"worker", w->name}, {"rrefs", std::move(rrefs)}}));
  }
  return Value(Value::Map{{"workers", std::move(out)}});
}

absl::StatusOr<Value> StatusCommand(Session& session) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  Value::List workers;
  for (const WorkerInfo& w : client->rpc().directory().workers()) {
    absl::StatusOr<proto::WorkerStatus> s = client->rpc().GetStatus(
        w.name, std::min(session.bound(), absl::Seconds(10)));
    if (s.ok()) {
      workers.push_back(MessageToValue(*s));
      continue;
    }
    workers.push_back(Value(Value::Map{
        {"name", w.name},
        {"rank", w.rank},
        {"address", w.address},
        {"pid", w.pid},
        {"state", "unreachable"},
        {"error", s.status().ToString()},
    }));
  }
  Value status(Value::Map{{"workers", std::move(workers)}});
  AddBlocking(&status);
  return status;
}

std::string StatusTable(const Value& status) {
  static const char* const kColumns[][2] = {
      {"name", "NAME"},       {"rank", "RANK"},
      {"state", "STATE"},     {"address", "ADDRESS"},
      {"pid", "PID"},         {"uptime_ms", "UPTIME"},
      {"inflight", "CALLS"},  {"owned_rrefs", "OWNED"},
      {"user_rrefs", "HELD"}, {"collectives_inflight", "COLLECTIVES"}};
  std::vector<std::vector<std::string>> rows = {{}};
  for (const auto& c : kColumns) rows[0].push_back(c[1]);
  const Value* workers = status.Find("workers");
  for (const Value& w : workers != nullptr && workers->is_list()
                            ? workers->as_list()
                            : Value::List{}) {
    std::vector<std::string> row;
    for (const auto& c : kColumns) {
      const Value* v = w.Find(c[0]);
      std::string cell = v == nullptr     ? "-"
                         : v->is_string() ? v->as_string()
                                          : ToJson(*v);
      if (std::string(c[0]) == "uptime_ms" && v != nullptr && v->is_int()) {
        cell = absl::StrFormat("%.1fs", v->as_int() / 1000.0);
      }
      if (std::string(c[0]) == "state" && w.Find("error") != nullptr) {
        absl::StrAppend(
            &cell, " (",
            w.Find("error")->is_string() ? w.Find("error")->as_string() : "",
            ")");
      }
      row.push_back(cell);
    }
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c],
                      std::string(width[c] - row[c].size() + 2, ' '));
    }
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return out;
}

absl::StatusOr<Value> FunctionsCommand(Session& session,
                                       const std::string& worker) {
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  FERRY_ASSIGN_OR_RETURN(
      std::vector<proto::FunctionInfo> fns,
      client->rpc().ListFunctions(
          worker, std::min(session.bound(), absl::Seconds(10))));
  FERRY_ASSIGN_OR_RETURN(const WorkerInfo* w,
                         client->rpc().directory().Resolve(worker));
  Value::List list;
  for (const auto& f : fns) list.push_back(MessageToValue(f));
  return Value(Value::Map{{"worker", w->name}, {"functions", std::move(list)}});
}

absl::StatusOr<Value> CollectiveCommand(Session& session, const std::string& op,
                                        Value request) {
  if (request.is_map() && request.Find("timeout_ms") == nullptr &&
      session.timeout() > absl::ZeroDuration()) {
    request.as_map()["timeout_ms"] =
        absl::ToInt64Milliseconds(session.timeout());
  }
  FERRY_ASSIGN_OR_RETURN(ClientImpl * client, session.client());
  Progress progress;
  Progress::Ticker ticker(
      progress,
      absl::StrCat("collective ", op, " on ",
                   client->rpc().directory().world_size(), " workers"));
  return RunCollectiveFromClient(client->rpc(), op, request);
}

}  // namespace ctl
}  // namespace ferry
