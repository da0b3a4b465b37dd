#include "rpc/stacks.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/debugging/symbolize.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ferry {

namespace {

constexpr int kMaxFrames = 64;

// One thread's answer. Written by the thread itself, in its handler.
struct Slot {
  int tid = 0;
  std::atomic<int> done{0};
  int depth = 0;
  void* pcs[kMaxFrames];
};

struct Request {
  explicit Request(size_t n) : slots(new Slot[n]), size(n) {}
  std::unique_ptr<Slot[]> slots;
  size_t size;
};

// The capture under way, if any (what a handler writes into).
std::atomic<Request*> current_request{nullptr};

int StackSignal() { return SIGRTMIN + 5; }

int ThisTid() { return static_cast<int>(::syscall(SYS_gettid)); }

// Async-signal-safe but for backtrace()'s first call, which loads the
// unwinder: Install() makes that call first, outside any handler.
void Handler(int, siginfo_t*, void*) {
  const int saved_errno = errno;
  Request* r = current_request.load(std::memory_order_acquire);
  if (r != nullptr) {
    const int tid = ThisTid();
    for (size_t i = 0; i < r->size; ++i) {
      Slot& s = r->slots[i];
      if (s.tid != tid || s.done.load(std::memory_order_relaxed) != 0) continue;
      s.depth = backtrace(s.pcs, kMaxFrames);
      s.done.store(1, std::memory_order_release);
      break;
    }
  }
  errno = saved_errno;
}

void Install() {
  static std::once_flag once;
  std::call_once(once, [] {
    void* warm[1];
    backtrace(warm, 1);
    struct sigaction sa = {};
    sa.sa_sigaction = &Handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(StackSignal(), &sa, nullptr);
  });
}

std::vector<int> ThreadIds() {
  std::vector<int> tids;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return tids;
  while (const dirent* e = ::readdir(d)) {
    int tid;
    if (absl::SimpleAtoi(e->d_name, &tid)) tids.push_back(tid);
  }
  ::closedir(d);
  std::sort(tids.begin(), tids.end());
  return tids;
}

std::string ThreadName(int tid) {
  std::ifstream in(absl::StrFormat("/proc/self/task/%d/comm", tid));
  std::string name;
  std::getline(in, name);
  return std::string(absl::StripAsciiWhitespace(name));
}

// "function+0x1c", or "libfoo.so+0x1234" without a symbol.
std::string Describe(void* pc, bool return_address) {
  // A return address points after its call: name the call's line.
  void* at = return_address ? static_cast<char*>(pc) - 1 : pc;
  char name[1024];
  if (absl::Symbolize(at, name, sizeof(name))) return name;
  Dl_info info;
  if (::dladdr(at, &info) != 0 && info.dli_fname != nullptr) {
    return absl::StrFormat("%s+0x%x", info.dli_fname,
                           reinterpret_cast<uintptr_t>(pc) -
                               reinterpret_cast<uintptr_t>(info.dli_fbase));
  }
  return absl::StrFormat("%p", pc);
}

// The frames from `first` on; pcs[first] is where the thread was (not a
// return address).
std::vector<std::string> Frames(void* const* pcs, int depth, int first) {
  std::vector<std::string> out;
  for (int i = first; i < depth; ++i)
    out.push_back(Describe(pcs[i], i > first));
  return out;
}

// What threads wait for: tid → note.
struct Notes {
  absl::Mutex mu;
  absl::flat_hash_map<int, std::string> by_tid ABSL_GUARDED_BY(mu);
};
Notes& WaitNotes() {
  static Notes* notes = new Notes();
  return *notes;
}

absl::Mutex capture_mu(absl::kConstInit);

}  // namespace

WaitNote::WaitNote(std::string what) {
  Notes& notes = WaitNotes();
  absl::MutexLock lock(&notes.mu);
  std::string& note = notes.by_tid[ThisTid()];
  had_previous_ = !note.empty();
  previous_ = std::exchange(note, std::move(what));
}

WaitNote::~WaitNote() {
  Notes& notes = WaitNotes();
  absl::MutexLock lock(&notes.mu);
  if (had_previous_) {
    notes.by_tid[ThisTid()] = std::move(previous_);
  } else {
    notes.by_tid.erase(ThisTid());
  }
}

namespace {

// What one capture recorded, before its frames are named.
struct Recorded {
  int tid = 0;
  bool captured = false;
  int depth = 0;
  int first = 0;  // The first frame of its own (past the handler's).
  void* pcs[kMaxFrames];
  std::string waiting;
};

// Signals every thread and collects their return addresses (and notes),
// under capture_mu: one capture at a time, and only for as long as the
// threads take to answer (microseconds each), never while naming frames.
std::vector<Recorded> Record(absl::Duration timeout) {
  absl::MutexLock capture(&capture_mu);
  const int self = ThisTid();
  std::vector<int> tids = ThreadIds();
  auto* request = new Request(tids.size());
  for (size_t i = 0; i < tids.size(); ++i) request->slots[i].tid = tids[i];
  current_request.store(request, std::memory_order_release);
  for (size_t i = 0; i < tids.size(); ++i) {
    Slot& s = request->slots[i];
    if (s.tid == self) {
      s.depth = backtrace(s.pcs, kMaxFrames);
      s.done.store(1, std::memory_order_release);
    } else if (::syscall(SYS_tgkill, ::getpid(), s.tid, StackSignal()) != 0) {
      s.done.store(2, std::memory_order_release);  // Gone already.
    }
  }
  // Bounded by `timeout` of real time: threads answer within microseconds
  // unless they block the signal.
  const absl::Time deadline = absl::Now() + timeout;
  auto answered = [&] {
    for (size_t i = 0; i < tids.size(); ++i) {
      if (request->slots[i].done.load(std::memory_order_acquire) == 0)
        return false;
    }
    return true;
  };
  while (!answered() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  current_request.store(nullptr, std::memory_order_release);
  std::vector<Recorded> out(tids.size());
  bool complete = true;
  {
    Notes& notes = WaitNotes();
    absl::MutexLock lock(&notes.mu);
    for (size_t i = 0; i < tids.size(); ++i) {
      Slot& s = request->slots[i];
      Recorded& r = out[i];
      const int done = s.done.load(std::memory_order_acquire);
      complete = complete && done != 0;
      r.tid = s.tid;
      r.captured = done == 1;
      if (r.captured) {
        r.depth = s.depth;
        // A signalled thread's first two frames are the handler and the
        // kernel's signal trampoline.
        r.first = s.tid == self ? 0 : 2;
        std::copy(s.pcs, s.pcs + s.depth, r.pcs);
      }
      auto it = notes.by_tid.find(s.tid);
      if (it != notes.by_tid.end()) r.waiting = it->second;
    }
  }
  // A thread that has not answered may still write into its slot later:
  // its request is then left alive (a few KiB, only in that case).
  if (complete) delete request;
  return out;
}

}  // namespace

std::vector<ThreadStack> CaptureStacks(absl::Duration timeout) {
  Install();
  std::vector<ThreadStack> out;
  // Named outside every lock: symbolizing is the slow part (milliseconds
  // a thread), and no other capture or WaitNote waits for it.
  for (Recorded& r : Record(timeout)) {
    ThreadStack t;
    t.tid = r.tid;
    t.name = ThreadName(r.tid);
    t.captured = r.captured;
    if (r.captured) t.frames = Frames(r.pcs, r.depth, r.first);
    t.waiting = std::move(r.waiting);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace ferry
