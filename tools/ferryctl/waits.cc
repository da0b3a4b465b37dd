#include "tools/ferryctl/waits.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ferry {
namespace ctl {

namespace {

const Value::List& ListOf(const Value& v, const char* key) {
  static const Value::List* empty = new Value::List();
  const Value* l = v.Find(key);
  return l != nullptr && l->is_list() ? l->as_list() : *empty;
}

std::string StringOf(const Value& v, const char* key) {
  const Value* s = v.Find(key);
  return s != nullptr && s->is_string() ? s->as_string() : "";
}

int64_t IntOf(const Value& v, const char* key) {
  const Value* i = v.Find(key);
  return i != nullptr && i->is_int() ? i->as_int() : -1;
}

// The op others wait for one worker in: (group, key) → what they say.
struct Blocked {
  std::string group, key, op;
  int64_t seq = -1;
  std::vector<std::string> waiting;
};

// The last op `worker` began in `group` (-1: none, or unknown).
int64_t LastBegun(const Value& worker, const std::string& group) {
  for (const Value& g : ListOf(worker, "groups")) {
    if (StringOf(g, "group") == group) return IntOf(g, "last_scheduled_seq");
  }
  return -1;
}

}  // namespace

void AddBlocking(Value* status) {
  if (!status->is_map() || status->Find("workers") == nullptr ||
      !status->Find("workers")->is_list()) {
    return;
  }
  Value::List& workers = status->as_map()["workers"].as_list();
  // Waited-for worker name → its ops, keyed by op key.
  std::map<std::string, std::map<std::string, Blocked>> blocked;
  for (const Value& w : workers) {
    for (const Value& g : ListOf(w, "groups")) {
      const Value* waiting = g.Find("waiting");
      if (waiting == nullptr || StringOf(*waiting, "op").empty()) continue;
      for (const Value& name : ListOf(*waiting, "waiting_for")) {
        if (!name.is_string()) continue;
        Blocked& b = blocked[name.as_string()][StringOf(*waiting, "key")];
        b.group = StringOf(g, "group");
        b.key = StringOf(*waiting, "key");
        b.op = StringOf(*waiting, "op");
        b.seq = IntOf(*waiting, "seq");
        b.waiting.push_back(StringOf(w, "name"));
      }
    }
  }
  for (Value& w : workers) {
    auto it = blocked.find(StringOf(w, "name"));
    if (it == blocked.end() || !w.is_map()) continue;
    Value::List out;
    for (const auto& [key, b] : it->second) {
      out.push_back(Value(Value::Map{
          {"group", b.group},
          {"seq", b.seq},
          {"key", b.key},
          {"op", b.op},
          {"waiting", Value(Value::List(b.waiting.begin(), b.waiting.end()))},
          {"began", b.seq >= 0 && LastBegun(w, b.group) >= b.seq}}));
    }
    w.as_map()["blocking"] = Value(std::move(out));
  }
}

std::string BlockingLines(const Value& status) {
  std::string out;
  const Value* workers = status.Find("workers");
  if (workers == nullptr || !workers->is_list()) return out;
  for (const Value& w : workers->as_list()) {
    for (const Value& b : ListOf(w, "blocking")) {
      std::vector<std::string> waiting;
      for (const Value& n : ListOf(b, "waiting")) {
        if (n.is_string()) waiting.push_back(n.as_string());
      }
      const Value* began = b.Find("began");
      absl::StrAppend(&out, StringOf(w, "name"), " holds up ",
                      StringOf(b, "op"), " op ", IntOf(b, "seq"), " of ",
                      StringOf(b, "group"), " (", StringOf(b, "key"),
                      "): ", absl::StrJoin(waiting, ", "), " wait for it; ",
                      began != nullptr && began->is_bool() && began->as_bool()
                          ? "it is in that op too"
                          : "it has not begun it",
                      "\n");
    }
  }
  return out;
}

}  // namespace ctl
}  // namespace ferry
