// Folding a peer's partial reduction into this rank's result as its bytes
// arrive (a ring all_reduce's or reduce_scatter's receive, ring.cc): the
// landing (rpc/value/tensor.h) of the partial is the result's own memory,
// and each range of bytes that comes is reduced there with this rank's
// contribution at once — the partial is never stored apart, and read once.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_FOLD_H_
#define FERRY_COLLECTIVES_ALGORITHMS_FOLD_H_

#include <cstddef>
#include <cstdint>

#include "collectives/algorithms/reduce.h"
#include "rpc/value/tensor.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {

// out[i] = mine[i] ⊕ theirs[i] (ReduceTo's operands, in its order, so the
// bits are those of reducing the whole partial after it came), theirs
// arriving through Write in consecutive ranges cut anywhere: an element cut
// between two ranges waits in a small carry until its last byte comes.
// `out` (mine.nbytes() bytes, kept alive by the landing's owner) may be
// `mine`'s own memory (an all_reduce in place): element i of `mine` is
// read before element i of `out` is written, and nothing else is.
class Fold : public LandingWriter {
 public:
  // The largest element it folds (complex128); Foldable says whether a
  // tensor's are.
  static constexpr size_t kMaxItem = 16;
  static bool Foldable(const Tensor& mine) {
    return mine.itemsize() > 0 && mine.itemsize() <= kMaxItem;
  }

  Fold(ReduceOp reduce, Tensor mine, char* out);

  // False for a range that does not continue the last one or goes past
  // mine.nbytes().
  bool Write(uint64_t offset, const char* bytes, uint64_t n) override;

  // Every byte came and was folded. Read once the message was delivered
  // (after the writes, through the mailbox's synchronisation).
  bool done() const { return next_ == mine_.nbytes() && carried_ == 0; }

 private:
  // Misaligned received bytes are reduced through a buffer of this size.
  static constexpr size_t kBounceBytes = 4096;
  void Apply(uint64_t offset, const char* theirs, int64_t count);

  const ReduceOp reduce_;
  const Tensor mine_;  // Kept alive while bytes may arrive.
  char* const out_;
  uint64_t next_ = 0;  // The next byte expected.
  alignas(16) char carry_[kMaxItem];
  size_t carried_ = 0;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_FOLD_H_
