#include "tests/testing/fake_collectives.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/op/collective_host.h"
#include "collectives/transport/frames.h"
#include "collectives/transport/inbound.h"
#include "collectives/transport/transport.h"
#include "proto/collectives.pb.h"
#include "rpc/function.h"
#include "rpc/registry.h"
#include "rpc/wire/wire_writer.h"

namespace ferry {
namespace testing {

// One rank's transport: each message is framed as Exchange frames it and
// queued; its step feeds the frames to an Inbound on the receiver's
// mailbox, as a stream from an authenticated sender would. Backpressure is
// retried (queued again) until the deadline, as Exchange's backoff does.
class FakeCollectives::Transport final : public CollectiveTransport {
 public:
  Transport(FakeCollectives* job, int self) : job_(job), self_(self) {}

  Future<Done> Send(int dst, const MessageKey& key, const Value& message,
                    absl::Time deadline, const TraceContext&) override {
    if (stopped_) {
      return Future<Done>::Ready(absl::UnavailableError("collectives stopped"));
    }
    if (auto down = job_->SendFails(dst)) return Future<Done>::Ready(*down);
    absl::StatusOr<grpc::ByteBuffer> payload =
        EncodeValue(message, nullptr, "message");
    if (!payload.ok()) return Future<Done>::Ready(payload.status());
    proto::ChunkHeader header;
    header.set_op(key.op);
    header.set_step(key.step);
    header.set_src(self_);
    Promise<Done> done;
    Deliver(Delivery::Kind::kMessage, dst, key.step, header,
            std::make_shared<const std::vector<grpc::ByteBuffer>>(MakeFrames(
                header, *payload, job_->options_.config.chunk_bytes)),
            deadline, done);
    return done.future();
  }

  void SendAbort(int dst, const std::string& op, const absl::Status& status,
                 absl::Time deadline) override {
    if (stopped_ || job_->DownReason(dst)) return;
    proto::ChunkHeader header;
    header.set_op(op);
    header.set_src(self_);
    header.set_kind(proto::ChunkHeader::ABORT);
    header.set_code(static_cast<int>(status.code()));
    header.set_error(std::string(status.message()));
    Deliver(Delivery::Kind::kAbort, dst, 0, header,
            std::make_shared<const std::vector<grpc::ByteBuffer>>(
                MakeFrames(header, grpc::ByteBuffer(), 1 << 20)),
            deadline, Promise<Done>());
  }

  // Sends to a dead rank fail when their step comes (Deliver checks).
  void FailNode(uint64_t, const absl::Status&) override {}
  void ExpireStale() override {}
  void Stop() override { stopped_ = true; }

 private:
  using Frames = std::shared_ptr<const std::vector<grpc::ByteBuffer>>;

  void Deliver(Delivery::Kind kind, int dst, int step,
               const proto::ChunkHeader& header, Frames frames,
               absl::Time deadline, Promise<Done> done) {
    job_->Enqueue({.kind = kind,
                   .from = self_,
                   .to = dst,
                   .what = header.op(),
                   .step = step},
                  [this, kind, dst, step, header, frames, deadline, done] {
                    if (auto down = job_->SendFails(dst)) {
                      done.Set(*down);
                      return;
                    }
                    absl::Status taken = Take(dst, *frames);
                    if (IsBackpressure(taken) &&
                        job_->clock_.Now() < deadline) {  // Retried later.
                      return Deliver(kind, dst, step, header, frames, deadline,
                                     done);
                    }
                    if (taken.ok()) {
                      done.Set(Done());
                    } else {
                      done.Set(taken);
                    }
                  });
  }

  // The frames, taken by `dst` as one stream.
  absl::Status Take(int dst, const std::vector<grpc::ByteBuffer>& frames) {
    CollectiveContext& to = job_->at(dst);
    Inbound inbound(&to.mailbox(),
                    {.self_rank = dst,
                     .world_size = job_->world_size(),
                     .ttl_ms = job_->options_.limits.mailbox_ttl_ms,
                     .clock = &job_->clock_,
                     .sender = self_});
    for (const grpc::ByteBuffer& frame : frames) {
      absl::StatusOr<Inbound::Next> next = inbound.Take(frame);
      if (!next.ok()) return next.status();
      if (*next == Inbound::Next::kDone) return absl::OkStatus();
    }
    return inbound.End();
  }

  FakeCollectives* const job_;
  const int self_;
  bool stopped_ = false;
};

// The job's store, in memory (agreements decide through CompareSet). Its
// calls are answered at once: a store's own protocol is tested elsewhere.
class FakeCollectives::Store final : public KeyValueStore {
 public:
  explicit Store(FakeCollectives* job) : job_(job) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    job_->store_[key] = value;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration) override {
    auto it = job_->store_.find(key);
    if (it == job_->store_.end()) return absl::NotFoundError(key);
    return it->second;
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t amount) override {
    int64_t sum = amount;
    auto it = job_->store_.find(key);
    if (it != job_->store_.end()) sum += std::stoll(it->second);
    job_->store_[key] = absl::StrCat(sum);
    return sum;
  }
  absl::StatusOr<std::string> CompareSet(const std::string& key,
                                         const std::string& expected,
                                         const std::string& desired) override {
    auto it = job_->store_.find(key);
    const bool match =
        it == job_->store_.end() ? expected.empty() : it->second == expected;
    if (match) job_->store_[key] = desired;
    return job_->store_.count(key) ? job_->store_[key] : std::string();
  }
  absl::StatusOr<bool> Delete(const std::string& key) override {
    return job_->store_.erase(key) > 0;
  }
  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration) override {
    absl::StatusOr<bool> all = Check(keys);
    if (*all) return absl::OkStatus();
    return absl::DeadlineExceededError("the fake store does not wait");
  }
  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    for (const std::string& k : keys) {
      if (!job_->store_.count(k)) return false;
    }
    return true;
  }
  absl::StatusOr<int64_t> NumKeys() override {
    return static_cast<int64_t>(job_->store_.size());
  }

 private:
  FakeCollectives* const job_;
};

class FakeCollectives::Host final : public CollectiveHost {
 public:
  Host(FakeCollectives* job, int rank)
      : job_(job), rank_(rank), name_(absl::StrCat("worker", rank)) {}

  const std::string& name() const override { return name_; }
  int rank() const override { return rank_; }
  int world_size() const override { return job_->world_size(); }
  const Directory& directory() const override { return job_->directory_; }
  std::optional<absl::Status> DownReason(int rank) const override {
    return job_->DownReason(rank);
  }
  Timers& timers() override { return job_->timers_; }
  absl::Status Submit(Executor::Task task) override {
    auto shared = std::make_shared<Executor::Task>(std::move(task));
    job_->Enqueue({.kind = Delivery::Kind::kTask, .from = rank_, .to = rank_},
                  [this, shared] {
                    if (!job_->dead(rank_)) std::move (*shared)();
                  });
    return absl::OkStatus();
  }
  const Limits& limits() const override { return job_->options_.limits; }
  absl::Duration default_timeout() const override {
    return job_->options_.default_timeout;
  }
  Metrics* metrics() override { return nullptr; }
  bool tracing() const override { return false; }
  Tracer* tracer() override { return nullptr; }
  void Record(MembershipEvent) override {}

  // Run by the callee's registry, with the caller's identity as an
  // authenticated call carries it.
  Future<Value> Call(int rank, const std::string& function,
                     std::vector<Value> args,
                     std::optional<absl::Duration> timeout) override {
    Promise<Value> answer;
    auto moved = std::make_shared<std::vector<Value>>(std::move(args));
    const absl::Duration within = timeout.value_or(default_timeout());
    job_->Enqueue(
        {.kind = Delivery::Kind::kCall,
         .from = rank_,
         .to = rank,
         .what = function},
        [this, rank, function, moved, within, answer] {
          if (auto down = job_->DownReason(rank)) {
            answer.Set(*down);
            return;
          }
          std::shared_ptr<const RegisteredFunction> fn =
              job_->at(rank).host().registry().Find(function);
          if (fn == nullptr) {
            answer.Set(absl::NotFoundError(function));
            return;
          }
          CallContext context{.worker = absl::StrCat("worker", rank),
                              .function = function,
                              .caller = name_,
                              .caller_node = WorkerNode(rank_),
                              .deadline = job_->clock_.Now() + within};
          InvokeFunction(*fn, context, std::move(*moved))
              .Then(
                  [answer](const absl::StatusOr<Value>& v) { answer.Set(v); });
        });
    return answer.future();
  }
  Registry& registry() override { return registry_; }
  absl::StatusOr<std::unique_ptr<KeyValueStore>> OpenStore() override {
    return std::make_unique<Store>(job_);
  }
  std::unique_ptr<CollectiveTransport> OpenTransport(
      Mailbox*, const CollectiveConfig&) override {
    return std::make_unique<Transport>(job_, rank_);
  }

 private:
  FakeCollectives* const job_;
  const int rank_;
  const std::string name_;
  Registry registry_;
};

namespace {

std::vector<WorkerInfo> Workers(int n) {
  std::vector<WorkerInfo> workers(n);
  for (int r = 0; r < n; ++r) {
    workers[r].name = absl::StrCat("worker", r);
    workers[r].rank = r;
    workers[r].address = absl::StrCat("fake:", r);
  }
  return workers;
}

}  // namespace

FakeCollectives::FakeCollectives(Options options)
    : options_(std::move(options)),
      directory_(Workers(options_.world_size)),
      down_(options_.world_size),
      unreachable_(options_.world_size, false),
      random_(options_.shuffle_seed) {
  for (int r = 0; r < options_.world_size; ++r) {
    contexts_.push_back(CollectiveContext::Create(
        std::make_unique<Host>(this, r), options_.config));
    contexts_.back()->RegisterFunctions().IgnoreError();
  }
}

FakeCollectives::~FakeCollectives() {
  for (auto& context : contexts_) context->Stop();
  queue_.clear();
  timers_.Stop();
}

void FakeCollectives::Enqueue(Delivery delivery, std::function<void()> run) {
  queue_.push_back({std::move(delivery), std::move(run)});
}

bool FakeCollectives::Step() {
  if (queue_.empty()) return false;
  size_t i = 0;
  if (options_.shuffle_seed != 0) {
    i = std::uniform_int_distribution<size_t>(0, queue_.size() - 1)(random_);
  }
  Pending next = std::move(queue_[i]);
  queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
  // A dead rank sends nothing more.
  if (next.delivery.from >= 0 && dead(next.delivery.from)) return true;
  log_.push_back(next.delivery);
  next.run();
  return true;
}

bool FakeCollectives::Drain(int max_steps) {
  for (int i = 0; i < max_steps; ++i) {
    if (!Step()) return true;
  }
  return queue_.empty();
}

int FakeCollectives::MessagesFrom(int from) const {
  int n = 0;
  for (const Delivery& d : log_) {
    if (d.kind == Delivery::Kind::kMessage && (from < 0 || d.from == from)) {
      ++n;
    }
  }
  return n;
}

void FakeCollectives::Kill(int rank, absl::Status why) {
  down_[rank] = why;
  for (int r = 0; r < world_size(); ++r) {
    if (r != rank && !dead(r)) at(r).NodeDown(WorkerNode(rank), why);
  }
}

std::optional<absl::Status> FakeCollectives::SendFails(int rank) const {
  if (down_[rank].has_value()) return down_[rank];
  if (unreachable_[rank]) return absl::UnavailableError("Socket closed");
  return std::nullopt;
}

bool FakeCollectives::Idle() const {
  for (int r = 0; r < world_size(); ++r) {
    if (dead(r)) continue;
    Mailbox& mailbox = contexts_[r]->mailbox();
    if (mailbox.held_bytes() != 0 || mailbox.held_messages() != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace testing
}  // namespace ferry
