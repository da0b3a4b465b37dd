#include "collectives/algorithms/fold.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

namespace ferry {

Fold::Fold(ReduceOp reduce, Tensor mine, char* out)
    : reduce_(reduce), mine_(std::move(mine)), out_(out) {}

bool Fold::Write(uint64_t offset, const char* bytes, uint64_t n) {
  const size_t item = mine_.itemsize();
  // The landing's checks already hold these (Inbound::Place); a writer
  // that trusted them would fold at a wrong place if they ever did not.
  if (offset != next_ || n > mine_.nbytes() - next_) return false;
  next_ += n;
  if (carried_ > 0) {  // The rest of an element begun in the last range.
    const size_t k =
        static_cast<size_t>(std::min<uint64_t>(n, item - carried_));
    std::memcpy(carry_ + carried_, bytes, k);
    carried_ += k;
    bytes += k;
    offset += k;
    n -= k;
    if (carried_ < item) return true;
    Apply(offset - item, carry_, 1);
    carried_ = 0;
  }
  const uint64_t whole = n / item;
  if (whole > 0) Apply(offset, bytes, static_cast<int64_t>(whole));
  carried_ = static_cast<size_t>(n - whole * item);
  std::memcpy(carry_, bytes + whole * item, carried_);
  return true;
}

void Fold::Apply(uint64_t offset, const char* theirs, int64_t count) {
  const size_t item = mine_.itemsize();
  // Received bytes lie wherever the transport cut its slices: a typed read
  // of them needs an aligned copy first (the reductions load elements).
  if (reinterpret_cast<uintptr_t>(theirs) % std::min<size_t>(item, 8) != 0) {
    alignas(16) char aligned[kBounceBytes];
    const int64_t per = static_cast<int64_t>(kBounceBytes / item);
    while (count > 0) {
      const int64_t n = std::min(count, per);
      std::memcpy(aligned, theirs, static_cast<size_t>(n) * item);
      ReduceTo(reduce_, mine_.dtype(), out_ + offset, mine_.data() + offset,
               aligned, n);
      offset += static_cast<uint64_t>(n) * item;
      theirs += static_cast<size_t>(n) * item;
      count -= n;
    }
    return;
  }
  ReduceTo(reduce_, mine_.dtype(), out_ + offset, mine_.data() + offset, theirs,
           count);
}

}  // namespace ferry
