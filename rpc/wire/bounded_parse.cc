#include "rpc/wire/bounded_parse.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/status_util.h"
#include "rpc/wire/wire_cursor.h"

namespace ferry {

namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using WFL = google::protobuf::internal::WireFormatLite;

// What protobuf's parse builds, roughly, on a 64-bit glibc host: each heap
// allocation costs malloc 16 bytes more; a repeated element of a message or
// string type is a pointer in its RepeatedPtrField; a string is a heap
// std::string (protobuf's ArenaStringPtr); repeated scalars and unknown
// fields live in arrays that grow by doubling (counted twice).
constexpr int64_t kAllocOverhead = 16;
constexpr int64_t kPointer = sizeof(void*);
constexpr int64_t kHeapString = sizeof(std::string) + kAllocOverhead;
constexpr int64_t kUnknownField = 2 * 16;  // google::protobuf::UnknownField.

struct MessagePlan;

// How one field of a message is walked and what each occurrence builds.
struct FieldPlan {
  int number = 0;
  const FieldDescriptor* descriptor = nullptr;
  WFL::WireType wire = WFL::WIRETYPE_VARINT;  // Of one element, unpacked.
  bool repeated = false;
  bool packable = false;      // A repeated number: may come packed.
  bool string = false;        // string or bytes.
  int64_t element_bytes = 0;  // A repeated number's size in its array.
  const MessagePlan* message = nullptr;  // Message-typed (map entries too).
};

struct MessagePlan {
  int64_t instance_bytes = 0;     // One instance on the heap.
  std::vector<FieldPlan> fields;  // By number.

  const FieldPlan* Find(int number) const {
    auto it = std::lower_bound(
        fields.begin(), fields.end(), number,
        [](const FieldPlan& f, int n) { return f.number < n; });
    return it != fields.end() && it->number == number ? &*it : nullptr;
  }
};

int64_t ElementBytes(const FieldDescriptor& f) {
  switch (f.cpp_type()) {
    case FieldDescriptor::CPPTYPE_BOOL:
      return 1;
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT64:
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return 8;
    default:
      return 4;
  }
}

// One instance of `type` on the heap: an empty instance's size (a map
// entry's, whose prototype cannot say, as a node of its map).
int64_t InstanceBytes(const Descriptor* type) {
  constexpr int64_t kMapNode = 64;
  const google::protobuf::Message* prototype =
      type->options().map_entry()
          ? nullptr
          : google::protobuf::MessageFactory::generated_factory()->GetPrototype(
                type);
  const int64_t bytes = prototype != nullptr
                            ? static_cast<int64_t>(prototype->SpaceUsedLong())
                            : kMapNode;
  return bytes + kAllocOverhead;
}

// The plans of every message type met, built once per type and kept for
// the process (a few dozen types).
class Plans {
 public:
  static Plans& Get() {
    static Plans* plans = new Plans();
    return *plans;
  }

  const MessagePlan* For(const Descriptor* type) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return BuildLocked(type);
  }

 private:
  const MessagePlan* BuildLocked(const Descriptor* type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::unique_ptr<MessagePlan>& slot = plans_[type];
    if (slot != nullptr) return slot.get();
    slot = std::make_unique<MessagePlan>();
    MessagePlan* plan = slot.get();  // Stays put: recursive types use it.
    plan->instance_bytes = InstanceBytes(type);
    for (int i = 0; i < type->field_count(); ++i) {
      const FieldDescriptor* f = type->field(i);
      FieldPlan fp;
      fp.number = f->number();
      fp.descriptor = f;
      fp.wire =
          WFL::WireTypeForFieldType(static_cast<WFL::FieldType>(f->type()));
      fp.repeated = f->is_repeated();
      fp.packable = f->is_packable();
      fp.string = f->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
      fp.element_bytes = ElementBytes(*f);
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        fp.message = BuildLocked(f->message_type());
      }
      plan->fields.push_back(fp);
    }
    std::sort(plan->fields.begin(), plan->fields.end(),
              [](const FieldPlan& a, const FieldPlan& b) {
                return a.number < b.number;
              });
    return plan;
  }

  absl::Mutex mu_;
  absl::flat_hash_map<const Descriptor*, std::unique_ptr<MessagePlan>> plans_
      ABSL_GUARDED_BY(mu_);
};

// Walks one message's bytes against its plan, counting what a parse
// builds; the first bound passed is the error.
class Walker {
 public:
  Walker(const Limits& limits, absl::string_view what, uint64_t message_bytes)
      : limits_(limits),
        what_(what),
        message_bytes_(message_bytes),
        budget_(kMaxParseGrowth * static_cast<int64_t>(std::min<uint64_t>(
                                      message_bytes, INT64_MAX / 64)) +
                kParseSlack) {}

  // The message filling the cursor's limit.
  absl::Status Message(WireCursor* in, const MessagePlan& plan, int depth,
                       const WirePath& path);
  int64_t bytes() const { return bytes_; }

 private:
  absl::Status Field(WireCursor* in, WireCursor::Tag tag, const FieldPlan& f,
                     int depth, const WirePath& at);
  absl::Status Packed(WireCursor* in, const FieldPlan& f, const WirePath& at);
  absl::Status Unknown(WireCursor* in, WireCursor::Tag tag,
                       const WirePath& path);
  // `n` items that build `bytes`.
  absl::Status Build(const WirePath& at, int64_t n, int64_t bytes);
  // `status` prefixed with "<what>: <at>: ".
  absl::Status Error(const WirePath& at, const absl::Status& status) const {
    const std::string where = at.Render();
    if (what_.empty() && where.empty()) return status;
    return Annotate(
        status,
        absl::StrCat(what_, what_.empty() || where.empty() ? "" : ": ", where));
  }

  const Limits& limits_;
  const absl::string_view what_;
  const uint64_t message_bytes_;
  const int64_t budget_;
  int64_t items_ = 0;
  int64_t bytes_ = 0;
};

absl::Status Walker::Build(const WirePath& at, int64_t n, int64_t bytes) {
  // n and bytes come from a message of at most 2 GiB: no overflow.
  items_ += n;
  bytes_ += bytes;
  if (items_ > limits_.max_items) {
    return Error(at, OverLimit(absl::StrCat("more than ", limits_.max_items,
                                            " items in one message"),
                               absl::StrCat(limits_.max_items, " items"),
                               "max_items", limits_.max_items));
  }
  if (bytes_ > budget_) {
    return Error(at, absl::ResourceExhaustedError(absl::StrCat(
                         "a message of ", HumanBytes(message_bytes_),
                         " would take more than ", HumanBytes(budget_),
                         " to build (at most ", kMaxParseGrowth,
                         " times its size, plus ", HumanBytes(kParseSlack),
                         "): ", items_, " items")));
  }
  return absl::OkStatus();
}

absl::Status Walker::Message(WireCursor* in, const MessagePlan& plan, int depth,
                             const WirePath& path) {
  WireCursor::Tag tag;
  while (in->ReadTag(&tag)) {
    const FieldPlan* f = plan.Find(WireCursor::FieldOf(tag));
    const WFL::WireType type = WireCursor::TypeOf(tag);
    // A known field in an unexpected wire type is kept as unknown, as
    // protobuf does.
    if (f == nullptr ||
        !(type == f->wire ||
          (f->packable && type == WFL::WIRETYPE_LENGTH_DELIMITED))) {
      FERRY_RETURN_IF_ERROR(Unknown(in, tag, path));
      continue;
    }
    FERRY_RETURN_IF_ERROR(
        Field(in, tag, *f, depth, path.Field(f->descriptor->name())));
  }
  if (in->failed()) {
    return Error(path, absl::InvalidArgumentError(absl::StrCat(
                           "malformed message (", in->what(), ")")));
  }
  return absl::OkStatus();
}

absl::Status Walker::Field(WireCursor* in, WireCursor::Tag tag,
                           const FieldPlan& f, int depth, const WirePath& at) {
  const int64_t slot = f.repeated ? kPointer : 0;
  if (f.message != nullptr) {
    if (depth + 1 >= kMaxParseDepth) {
      return Error(at,
                   absl::InvalidArgumentError(absl::StrCat(
                       "nesting deeper than ", kMaxParseDepth, " messages")));
    }
    uint64_t outer;
    // A failed read ends the walk: the caller's loop reports it.
    if (!in->EnterLength(&outer)) return absl::OkStatus();
    FERRY_RETURN_IF_ERROR(Build(at, 1, f.message->instance_bytes + slot));
    FERRY_RETURN_IF_ERROR(Message(in, *f.message, depth + 1, at));
    in->Leave(outer);
    return absl::OkStatus();
  }
  if (f.string) {
    uint64_t len;
    if (!in->ReadLength(&len)) return absl::OkStatus();
    if (len > static_cast<uint64_t>(limits_.max_string_bytes)) {
      return Error(
          at, OverLimit(absl::StrCat("a string of ", HumanBytes(len)),
                        HumanBytes(limits_.max_string_bytes), "max_string_mb",
                        limits_.max_string_bytes / Limits::kMiB));
    }
    FERRY_RETURN_IF_ERROR(
        Build(at, f.repeated ? 1 : 0,
              kHeapString + static_cast<int64_t>(len) + slot));
    in->Skip(len);
    return absl::OkStatus();
  }
  if (WireCursor::TypeOf(tag) == WFL::WIRETYPE_LENGTH_DELIMITED) {
    return Packed(in, f, at);
  }
  in->SkipField(tag);
  if (!f.repeated) return absl::OkStatus();
  return Build(at, 1, 2 * f.element_bytes);
}

// A packed run of numbers: each an item.
absl::Status Walker::Packed(WireCursor* in, const FieldPlan& f,
                            const WirePath& at) {
  uint64_t outer;
  if (!in->EnterLength(&outer)) return absl::OkStatus();
  int64_t n = 0;
  if (f.wire == WFL::WIRETYPE_VARINT) {
    uint64_t v;
    while (in->left() > 0 && in->ReadVarint(&v)) ++n;
  } else {
    const uint64_t size = f.wire == WFL::WIRETYPE_FIXED64 ? 8 : 4;
    if (in->left() % size != 0) {
      return Error(at, absl::InvalidArgumentError(
                           "malformed message (a packed field of partial "
                           "elements)"));
    }
    n = static_cast<int64_t>(in->left() / size);
    in->SkipToLimit();
  }
  in->Leave(outer);
  return Build(at, n, 2 * n * f.element_bytes);
}

absl::Status Walker::Unknown(WireCursor* in, WireCursor::Tag tag,
                             const WirePath& path) {
  int64_t bytes = kUnknownField;
  if (WireCursor::TypeOf(tag) == WFL::WIRETYPE_LENGTH_DELIMITED) {
    uint64_t len;
    if (!in->ReadLength(&len)) return absl::OkStatus();
    bytes += kHeapString + static_cast<int64_t>(len);
    in->Skip(len);
  } else {
    in->SkipField(tag);
  }
  return Build(path.Field("(unknown fields)"), 1, bytes);
}

uint64_t TotalOf(const std::vector<grpc::Slice>& slices) {
  uint64_t total = 0;
  for (const grpc::Slice& s : slices) total += s.size();
  return total;
}

// Walks `slices` as a `type`; the estimate in *bytes if OK.
absl::Status Walk(const std::vector<grpc::Slice>& slices,
                  const Descriptor* type, const Limits& limits,
                  absl::string_view what, int64_t* bytes) {
  const uint64_t total = TotalOf(slices);
  const WirePath root{nullptr, "", -1};
  if (total > static_cast<uint64_t>(INT_MAX)) {
    return absl::ResourceExhaustedError(
        absl::StrCat(what, ": a message of ", HumanBytes(total),
                     ", over protobuf's limit of 2 GiB"));
  }
  WireCursor in(&slices);
  Walker walker(limits, what, total);
  FERRY_RETURN_IF_ERROR(walker.Message(&in, *Plans::Get().For(type), 0, root));
  *bytes = walker.bytes();
  return absl::OkStatus();
}

absl::Status Unparsable(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, what.empty() ? "" : ": ",
                   "malformed message (protobuf's parse refused it)"));
}

}  // namespace

absl::Status CheckParseBounds(const std::vector<grpc::Slice>& slices,
                              const Descriptor* type, const Limits& limits,
                              absl::string_view what) {
  int64_t bytes = 0;
  return Walk(slices, type, limits, what, &bytes);
}

int64_t EstimatedParseBytes(const std::vector<grpc::Slice>& slices,
                            const Descriptor* type) {
  Limits unlimited;
  unlimited.max_items = INT64_MAX;
  unlimited.max_string_bytes = INT64_MAX;
  int64_t bytes = 0;
  // The growth bound still applies: refused estimates are -1.
  return Walk(slices, type, unlimited, "", &bytes).ok() ? bytes : -1;
}

absl::Status BoundedParse(const grpc::ByteBuffer& bytes, const Limits& limits,
                          absl::string_view what,
                          google::protobuf::Message* out) {
  std::vector<grpc::Slice> slices;
  if (bytes.Valid()) (void)bytes.Dump(&slices);
  FERRY_RETURN_IF_ERROR(
      CheckParseBounds(slices, out->GetDescriptor(), limits, what));
  if (slices.size() <= 1) {
    const bool parsed =
        slices.empty()
            ? out->ParseFromArray(nullptr, 0)
            : out->ParseFromArray(slices[0].begin(),
                                  static_cast<int>(slices[0].size()));
    return parsed ? absl::OkStatus() : Unparsable(what);
  }
  grpc::ByteBuffer copy(bytes);  // A reference: ProtoBufferReader consumes.
  grpc::ProtoBufferReader reader(&copy);
  return out->ParseFromZeroCopyStream(&reader) ? absl::OkStatus()
                                               : Unparsable(what);
}

absl::Status BoundedParse(absl::string_view bytes, const Limits& limits,
                          absl::string_view what,
                          google::protobuf::Message* out) {
  std::vector<grpc::Slice> slices;
  if (!bytes.empty()) {
    slices.emplace_back(bytes.data(), bytes.size(), grpc::Slice::STATIC_SLICE);
  }
  FERRY_RETURN_IF_ERROR(
      CheckParseBounds(slices, out->GetDescriptor(), limits, what));
  return out->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))
             ? absl::OkStatus()
             : Unparsable(what);
}

}  // namespace ferry
