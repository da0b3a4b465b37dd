#include "collectives/fold.h"

#include <algorithm>
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
  ReduceTo(reduce_, mine_.dtype(), out_ + offset, mine_.data() + offset, theirs,
           count);
}

}  // namespace ferry
