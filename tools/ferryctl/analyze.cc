#include "tools/ferryctl/analyze.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "rpc/value/json.h"

namespace ferry {
namespace ctl {

namespace {

// Most "not reached" findings and slowest ops the text shows per group.
constexpr size_t kShownFindings = 3;
// A dump file larger than this is not read (a ring of 2000 ops is ~2 MB).
constexpr std::streamoff kMaxDumpBytes = std::streamoff{512} << 20;

// One recorded op of one rank, as the analysis needs it.
struct Entry {
  int64_t seq = -1;
  std::string key, op, state;
  std::string dtypes, sizes;  // JSON of input_dtypes, input_sizes.
  int64_t created_ns = 0;
};

// One rank's view of one group.
struct RankView {
  int rank = -1;
  std::string worker;
  std::map<int64_t, Entry> by_seq;
  int64_t last_seq = -1;  // The last op it began (entries, watermarks).
};

struct GroupView {
  std::string name;        // "world", "world@1"
  std::vector<int> ranks;  // Members (global), when a dump says.
  std::map<int, RankView> by_rank;
};

std::string Str(const Value& map, const char* key) {
  const Value* v = map.Find(key);
  return v != nullptr && v->is_string() ? v->as_string() : "";
}

int64_t Int(const Value& map, const char* key, int64_t fallback = -1) {
  const Value* v = map.Find(key);
  return v != nullptr && v->is_int() ? v->as_int() : fallback;
}

std::string Json(const Value& map, const char* key) {
  const Value* v = map.Find(key);
  return v == nullptr ? "[]" : ToJson(*v);
}

// GROUP/SEQ[@EPOCH] → ("GROUP" or "GROUP@EPOCH", SEQ); nullopt for tagged.
std::optional<std::pair<std::string, int64_t>> SplitKey(
    const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return std::nullopt;
  std::string label = key.substr(slash + 1);
  const size_t at = label.find('@');
  int64_t seq;
  if (!absl::SimpleAtoi(label.substr(0, at), &seq) || seq < 0) {
    return std::nullopt;
  }
  std::string group = key.substr(0, slash);
  if (at != std::string::npos) absl::StrAppend(&group, label.substr(at));
  return std::make_pair(group, seq);
}

std::vector<int> RanksOf(const Value& list) {
  std::vector<int> out;
  if (!list.is_list()) return out;
  for (const Value& r : list.as_list()) {
    if (r.is_int()) out.push_back(static_cast<int>(r.as_int()));
  }
  return out;
}

// The groups' members, by group name (pg_config).
void AddMembers(const Value& dump, std::map<std::string, GroupView>* groups) {
  const Value* config = dump.Find("pg_config");
  if (config == nullptr || !config->is_map()) return;
  for (const auto& [name, pg] : config->as_map()) {
    GroupView& g = (*groups)[name];
    g.name = name;
    if (g.ranks.empty() && pg.Find("ranks") != nullptr)
      g.ranks = RanksOf(*pg.Find("ranks"));
  }
}

RankView& ViewOf(GroupView& g, const Value& dump) {
  const int rank = static_cast<int>(Int(dump, "rank"));
  RankView& v = g.by_rank[rank];
  v.rank = rank;
  v.worker = Str(dump, "worker");
  return v;
}

// Counts in `unsequenced` the tagged and point-to-point ops (not compared).
void AddEntries(const Value& dump, std::map<std::string, GroupView>* groups,
                int64_t* unsequenced) {
  const Value* entries = dump.Find("entries");
  for (const Value& e : entries->as_list()) {
    if (!e.is_map()) continue;
    auto split = SplitKey(Str(e, "op_key"));
    const Value* p2p = e.Find("is_p2p");
    if (!split.has_value() ||
        (p2p != nullptr && p2p->is_bool() && p2p->as_bool())) {
      ++*unsequenced;
      continue;
    }
    auto& [name, seq] = *split;
    GroupView& g = (*groups)[name];
    g.name = name;
    if (g.ranks.empty()) {
      const std::string base = name.substr(0, name.find('@'));
      if (auto it = groups->find(base); it != groups->end())
        g.ranks = it->second.ranks;
    }
    RankView& v = ViewOf(g, dump);
    Entry& out = v.by_seq[seq];
    out = Entry{seq,
                Str(e, "op_key"),
                Str(e, "op"),
                Str(e, "state"),
                Json(e, "input_dtypes"),
                Json(e, "input_sizes"),
                Int(e, "time_created_ns", 0)};
    v.last_seq = std::max(v.last_seq, seq);
  }
}

// The watermarks: a rank whose ring kept nothing of a group still says
// how far it got.
void AddWatermarks(const Value& dump,
                   std::map<std::string, GroupView>* groups) {
  const Value* status = dump.Find("pg_status");
  if (status == nullptr || !status->is_map()) return;
  for (const auto& [name, s] : status->as_map()) {
    GroupView& g = (*groups)[name];
    g.name = name;
    RankView& v = ViewOf(g, dump);
    v.last_seq = std::max(v.last_seq, Int(s, "last_enqueued_collective"));
  }
}

Value RankRef(const RankView& v) {
  return Value(Value::Map{{"rank", v.rank}, {"worker", v.worker}});
}

// Whether op `op` requires every rank's input dtypes (sizes) to agree.
bool DTypesMustMatch(const std::string& op) {
  return op == "all_reduce" || op == "reduce_scatter" || op == "all_gather" ||
         op == "all_to_all" || op == "all_to_all_single";
}
bool SizesMustMatch(const std::string& op) {
  return op == "all_reduce" || op == "reduce_scatter";
}

// The ranks present at `seq`, split by what they show for `field`.
Value Sides(const GroupView& g, int64_t seq,
            std::string (*shown)(const Entry&)) {
  std::map<std::string, std::vector<const RankView*>> by_value;
  for (const auto& [rank, v] : g.by_rank) {
    auto it = v.by_seq.find(seq);
    if (it != v.by_seq.end()) by_value[shown(it->second)].push_back(&v);
  }
  if (by_value.size() < 2) return Value();
  std::vector<std::pair<std::string, std::vector<const RankView*>>> sides(
      by_value.begin(), by_value.end());
  // The larger side first (usually the ranks that did as expected).
  std::stable_sort(sides.begin(), sides.end(),
                   [](const auto& a, const auto& b) {
                     return a.second.size() > b.second.size();
                   });
  Value::List out;
  for (const auto& [value, views] : sides) {
    Value::List ranks, workers;
    for (const RankView* v : views) {
      ranks.push_back(v->rank);
      workers.push_back(v->worker);
    }
    out.push_back(Value(Value::Map{{"value", value},
                                   {"ranks", std::move(ranks)},
                                   {"workers", std::move(workers)}}));
  }
  return Value(std::move(out));
}

std::string OpOf(const Entry& e) { return e.op; }
std::string DTypesOf(const Entry& e) { return e.dtypes; }
std::string SizesOf(const Entry& e) { return e.sizes; }

std::set<int64_t> AllSeqs(const GroupView& g) {
  std::set<int64_t> seqs;
  for (const auto& [rank, v] : g.by_rank) {
    for (const auto& [seq, e] : v.by_seq) seqs.insert(seq);
  }
  return seqs;
}

// The first sequence number whose entries disagree, or null.
Value FirstMismatch(const GroupView& g) {
  for (int64_t seq : AllSeqs(g)) {
    std::string key, op;
    for (const auto& [rank, v] : g.by_rank) {
      if (auto it = v.by_seq.find(seq); it != v.by_seq.end()) {
        key = it->second.key;
        op = it->second.op;
      }
    }
    struct Check {
      const char* field;
      std::string (*shown)(const Entry&);
      bool applies;
    };
    for (const Check& c :
         {Check{"op", &OpOf, true},
          Check{"input dtypes", &DTypesOf, DTypesMustMatch(op)},
          Check{"input sizes", &SizesOf, SizesMustMatch(op)}}) {
      if (!c.applies) continue;
      Value sides = Sides(g, seq, c.shown);
      if (sides.is_null()) continue;
      return Value(Value::Map{{"seq", seq},
                              {"key", key},
                              {"field", c.field},
                              {"sides", std::move(sides)}});
    }
  }
  return Value();
}

bool Waiting(const std::string& state) {
  return state == "scheduled" || state == "started" || state == "failed";
}

// Ops some ranks wait in (or failed in) that others never reached.
Value NotReached(const GroupView& g) {
  Value::List out;
  for (int64_t seq : AllSeqs(g)) {
    Value::List waiting, never;
    std::string key, op;
    for (const auto& [rank, v] : g.by_rank) {
      auto it = v.by_seq.find(seq);
      if (it != v.by_seq.end()) {
        key = it->second.key;
        op = it->second.op;
        if (!Waiting(it->second.state)) continue;
        Value ref = RankRef(v);
        ref.as_map()["state"] = it->second.state;
        waiting.push_back(std::move(ref));
      } else if (v.last_seq < seq) {
        Value ref = RankRef(v);
        ref.as_map()["last_seq"] = v.last_seq;
        never.push_back(std::move(ref));
      }
    }
    if (waiting.empty() || never.empty()) continue;
    out.push_back(Value(Value::Map{{"seq", seq},
                                   {"key", key},
                                   {"op", op},
                                   {"waiting", std::move(waiting)},
                                   {"never_reached", std::move(never)}}));
  }
  return Value(std::move(out));
}

// Per op seen by two ranks or more: who arrived last, and how late.
void Slowest(const GroupView& g, Value::Map* out) {
  Value::List slowest;
  std::map<int, int64_t> last_counts;
  for (int64_t seq : AllSeqs(g)) {
    const RankView* last = nullptr;
    int64_t first_ns = 0, last_ns = 0, present = 0;
    std::string op;
    for (const auto& [rank, v] : g.by_rank) {
      auto it = v.by_seq.find(seq);
      if (it == v.by_seq.end() || it->second.created_ns == 0) continue;
      const int64_t t = it->second.created_ns;
      if (present == 0 || t < first_ns) first_ns = t;
      if (present == 0 || t > last_ns) {
        last_ns = t;
        last = &v;
      }
      op = it->second.op;
      ++present;
    }
    if (present < 2 || last_ns == first_ns) continue;
    ++last_counts[last->rank];
    slowest.push_back(Value(Value::Map{
        {"seq", seq},
        {"op", op},
        {"rank", last->rank},
        {"worker", last->worker},
        {"late_ms", static_cast<double>(last_ns - first_ns) / 1e6}}));
  }
  Value::List counts;
  for (const auto& [rank, n] : last_counts) {
    counts.push_back(Value(Value::Map{
        {"rank", rank}, {"worker", g.by_rank.at(rank).worker}, {"ops", n}}));
  }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const Value& a, const Value& b) {
                     return a.Find("ops")->as_int() > b.Find("ops")->as_int();
                   });
  out->emplace("slowest", std::move(slowest));
  out->emplace("last_to_arrive", std::move(counts));
}

Value GroupReport(const GroupView& g) {
  std::set<int64_t> seqs = AllSeqs(g);
  Value::List missing;
  for (int r : g.ranks) {
    if (!g.by_rank.contains(r)) missing.push_back(r);
  }
  Value::Map out{
      {"group", g.name},
      {"ranks", Value(Value::List(g.ranks.begin(), g.ranks.end()))},
      {"first_seq", seqs.empty() ? int64_t{-1} : *seqs.begin()},
      {"last_seq", seqs.empty() ? int64_t{-1} : *seqs.rbegin()},
      {"mismatch", FirstMismatch(g)},
      {"not_reached", NotReached(g)},
      {"missing_dumps", std::move(missing)},
  };
  Slowest(g, &out);
  return Value(std::move(out));
}

// ---- Text ----

std::string Names(const Value& side) {
  std::vector<std::string> parts;
  const Value::List& ranks = side.Find("ranks")->as_list();
  const Value::List& workers = side.Find("workers")->as_list();
  for (size_t i = 0; i < ranks.size(); ++i) {
    parts.push_back(
        absl::StrCat(ranks[i].as_int(), " (", workers[i].as_string(), ")"));
  }
  return absl::StrCat(parts.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(parts, ", "));
}

std::string Refs(const Value& list, const char* extra) {
  std::vector<std::string> parts;
  for (const Value& r : list.as_list()) {
    std::string part = absl::StrCat(r.Find("rank")->as_int(), " (",
                                    r.Find("worker")->as_string());
    if (const Value* x = r.Find(extra)) {
      absl::StrAppend(&part, ", ", extra, " ",
                      x->is_string() ? x->as_string() : ToJson(*x));
    }
    parts.push_back(part + ")");
  }
  return absl::StrCat(parts.size() == 1 ? "rank " : "ranks ",
                      absl::StrJoin(parts, ", "));
}

void MismatchText(const Value& m, std::string* out) {
  absl::StrAppend(
      out, "  first mismatch: op ", m.Find("seq")->as_int(), " (",
      m.Find("key")->as_string(), "): ", m.Find("field")->as_string(),
      // "op differs", "input sizes differ".
      absl::EndsWith(m.Find("field")->as_string(), "s") ? " differ\n"
                                                        : " differs\n");
  for (const Value& side : m.Find("sides")->as_list()) {
    absl::StrAppend(out, "    ", Names(side), " ran ",
                    side.Find("value")->as_string(), "\n");
  }
}

void NotReachedText(const Value& list, std::string* out) {
  size_t shown = 0;
  for (const Value& n : list.as_list()) {
    if (shown++ == kShownFindings) {
      absl::StrAppend(out, "  ... ", list.as_list().size() - kShownFindings,
                      " more ops not reached (--format=json lists them)\n");
      break;
    }
    absl::StrAppend(out, "  not reached: op ", n.Find("seq")->as_int(), " ",
                    n.Find("op")->as_string(), " (", n.Find("key")->as_string(),
                    "): ", Refs(*n.Find("never_reached"), "last_seq"),
                    " never began it; ", Refs(*n.Find("waiting"), "state"),
                    " in it\n");
  }
}

void SlowestText(const Value& g, std::string* out) {
  const Value::List& counts = g.Find("last_to_arrive")->as_list();
  const Value::List& ops = g.Find("slowest")->as_list();
  if (counts.empty()) return;
  const Value* worst = &ops[0];
  for (const Value& op : ops) {
    if (op.Find("late_ms")->as_double() > worst->Find("late_ms")->as_double())
      worst = &op;
  }
  const Value& top = counts[0];
  absl::StrAppend(out, "  slowest: rank ", top.Find("rank")->as_int(), " (",
                  top.Find("worker")->as_string(), ") arrived last in ",
                  top.Find("ops")->as_int(), " of ", ops.size(),
                  " ops; the latest: ", "rank ", worst->Find("rank")->as_int(),
                  " (", worst->Find("worker")->as_string(), ") ",
                  absl::StrFormat("%.1f", worst->Find("late_ms")->as_double()),
                  " ms after the first in op ", worst->Find("seq")->as_int(),
                  " ", worst->Find("op")->as_string(), "\n");
}

}  // namespace

absl::StatusOr<RankDump> ParseDump(const std::string& file,
                                   const std::string& text) {
  absl::StatusOr<Value> dump = ParseJson(text);
  if (!dump.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not JSON: ", dump.status().message()));
  }
  const Value* entries = dump->Find("entries");
  if (!dump->is_map() || entries == nullptr || !entries->is_list() ||
      Int(*dump, "rank") < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": not a flight recorder dump (no \"rank\" and \"entries\")"));
  }
  return RankDump{file, *std::move(dump)};
}

absl::StatusOr<std::vector<RankDump>> ReadDumps(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot read directory ", dir));
  }
  std::vector<std::string> files;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (absl::EndsWith(name, ".json")) files.push_back(name);
  }
  ::closedir(d);
  std::sort(files.begin(), files.end());
  std::vector<RankDump> dumps;
  for (const std::string& name : files) {
    const std::string path = absl::StrCat(dir, "/", name);
    std::ifstream in(path, std::ios::ate);
    if (!in || in.tellg() > kMaxDumpBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": unreadable or over 512 MiB"));
    }
    in.seekg(0);
    std::stringstream text;
    text << in.rdbuf();
    absl::StatusOr<RankDump> dump = ParseDump(path, text.str());
    if (!dump.ok()) return dump.status();
    dumps.push_back(*std::move(dump));
  }
  if (dumps.empty()) {
    return absl::NotFoundError(absl::StrCat("no dumps (*.json) in ", dir));
  }
  return dumps;
}

Value Analyze(const std::vector<RankDump>& dumps) {
  std::map<std::string, GroupView> groups;
  Value::List read;
  int64_t unsequenced = 0;
  for (const RankDump& d : dumps) AddMembers(d.dump, &groups);
  for (const RankDump& d : dumps) {
    AddEntries(d.dump, &groups, &unsequenced);
    AddWatermarks(d.dump, &groups);
    read.push_back(Value(Value::Map{
        {"worker", Str(d.dump, "worker")},
        {"rank", Int(d.dump, "rank")},
        {"file", d.file},
        {"entries",
         static_cast<int64_t>(d.dump.Find("entries")->as_list().size())},
        {"reason", Str(d.dump, "reason")}}));
  }
  Value::List reports;
  for (const auto& [name, g] : groups) {
    if (!g.by_rank.empty()) reports.push_back(GroupReport(g));
  }
  return Value(Value::Map{{"dumps", std::move(read)},
                          {"groups", std::move(reports)},
                          {"unsequenced_ops", unsequenced}});
}

std::string AnalysisText(const Value& analysis) {
  const Value::List& dumps = analysis.Find("dumps")->as_list();
  std::vector<std::string> workers;
  for (const Value& d : dumps) workers.push_back(d.Find("worker")->as_string());
  std::string out =
      absl::StrCat(dumps.size(), " dumps: ", absl::StrJoin(workers, " "), "\n");
  for (const Value& g : analysis.Find("groups")->as_list()) {
    absl::StrAppend(&out, "group ", g.Find("group")->as_string(), " (ranks ",
                    absl::StrJoin(RanksOf(*g.Find("ranks")), ","), "): ops ",
                    g.Find("first_seq")->as_int(), "..",
                    g.Find("last_seq")->as_int(), "\n");
    const Value::List& missing = g.Find("missing_dumps")->as_list();
    if (!missing.empty()) {
      absl::StrAppend(&out, "  no dump from ranks ",
                      absl::StrJoin(RanksOf(Value(missing)), ","), "\n");
    }
    const Value* mismatch = g.Find("mismatch");
    if (!mismatch->is_null()) MismatchText(*mismatch, &out);
    NotReachedText(*g.Find("not_reached"), &out);
    SlowestText(g, &out);
    if (mismatch->is_null() && g.Find("not_reached")->as_list().empty()) {
      absl::StrAppend(&out, "  every rank ran the same ops\n");
    }
  }
  if (const Value* n = analysis.Find("unsequenced_ops");
      n != nullptr && n->is_int() && n->as_int() > 0) {
    absl::StrAppend(&out, n->as_int(),
                    " tagged or point-to-point op records (clients' ops, "
                    "send/recv): not compared\n");
  }
  if (analysis.Find("groups")->as_list().empty()) {
    absl::StrAppend(&out, "no group ops recorded\n");
  }
  return out;
}

}  // namespace ctl
}  // namespace ferry
