// Receiving a peer's tensor in place: where its bytes may land
// (TensorLanding, made Within a TensorBuilder) and who may take them as
// they arrive (LandingWriter). The transport's business, not a user's:
// ferry.h does not show it.
#ifndef FERRY_RPC_VALUE_TENSOR_LANDING_H_
#define FERRY_RPC_VALUE_TENSOR_LANDING_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "rpc/value/tensor.h"
#include "rpc/value/tensor_builder.h"

namespace ferry {

// Takes a landing's bytes as they arrive, in place of their copy there: a
// collective folding the partial sum it receives into its output as it
// comes (collectives/algorithms/ring.cc), so the partial is never stored apart.
class LandingWriter {
 public:
  virtual ~LandingWriter() = default;
  // The landing's bytes [offset, offset + n): called for consecutive
  // ranges from offset 0 on, each inside the landing, by one thread at a
  // time. False: the bytes cannot be taken (the message is refused).
  virtual bool Write(uint64_t offset, const char* bytes, uint64_t n) = 0;
};

// Where a received tensor's bytes may be written instead of into a buffer of
// their own (rpc/wire/wire_reader.h): `nbytes` bytes at `data`, kept alive by
// `owner`. The receiver that offers it writes nothing else there.
struct TensorLanding {
  // Elements [begin, end) of the buffer `builder` is building (kept alive
  // by the landing), for a peer's tensor to be received into.
  static TensorLanding Within(TensorBuilder& builder, int64_t begin,
                              int64_t end);

  std::shared_ptr<void> owner;
  char* data = nullptr;
  size_t nbytes = 0;
  // Set: the bytes go through it as they arrive
  // (collectives/transport/inbound.cc), never copied to `data` by anyone else —
  // `data` may hold what the writer still reads — so a message that did not
  // arrive into this landing leaves it alone.
  std::shared_ptr<LandingWriter> writer;

  // Whether `t`'s bytes are the ones received here (an empty `t` for an
  // empty landing: there was nothing to write).
  bool Holds(const Tensor& t) const {
    return t.nbytes() == nbytes && (nbytes == 0 || t.data() == data);
  }
};

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_TENSOR_LANDING_H_
