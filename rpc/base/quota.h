// Quota: how much of one thing a worker holds at once — bytes of streamed
// requests, streams open, calls waiting for the job to form — never more
// than a bound. The holder takes before it holds and gives back exactly
// what it took.
//
//   Quota streams(limits.max_open_streams);
//   if (!streams.TryTake()) return OverLimit(..., "max_open_streams", ...);
//   ...
//   streams.Give();
//
// Lock-free and thread-safe.
#ifndef FERRY_RPC_BASE_QUOTA_H_
#define FERRY_RPC_BASE_QUOTA_H_

#include <atomic>
#include <cstdint>

namespace ferry {

class Quota {
 public:
  explicit Quota(int64_t max) : max_(max) {}

  Quota(const Quota&) = delete;
  Quota& operator=(const Quota&) = delete;

  // Takes `n` (>= 0) if used() + n stays within max(); false, taking
  // nothing, if not.
  bool TryTake(int64_t n = 1) {
    int64_t used = used_.load();
    do {
      if (n > max_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + n));
    return true;
  }
  // Gives back `n` taken before.
  void Give(int64_t n = 1) { used_.fetch_sub(n); }

  int64_t max() const { return max_; }
  int64_t used() const { return used_.load(); }

 private:
  const int64_t max_;
  std::atomic<int64_t> used_{0};
};

}  // namespace ferry

#endif  // FERRY_RPC_BASE_QUOTA_H_
