// Point-to-point: tensors sent from one member of a group to another,
// tagged (torch's send/recv, isend/irecv, and recv from any source).
//
//   Work<Done> s = SendAsync(group, grad, /*dst=*/1, /*tag=*/7);
//   Work<Received> r = RecvAsync(group, /*src=*/0, /*tag=*/7);
//   absl::StatusOr<Received> got = r.Wait(absl::Seconds(30));
//
// Matching: messages from one rank to another with one tag are received
// in the order they were sent; each send is received by exactly one
// receive of its destination (from its source, or from any source, with
// its tag). Receives of one tag match in the order they were called
// (p2p_book.h). Ranks are group ranks.
//
// A send is done once the message is in the destination's mailbox (the
// tensor's memory may be reused then): it does not wait for the receive,
// within the destination's --max_mailbox_mb (beyond, it waits for room).
// A message that arrived is received even if its sender died since or
// this worker is stopping (a sender's process may exit right after its
// last send; a receive of a message that did not arrive then fails).
// A message nobody receives within --mailbox_ttl_ms is dropped, and the
// receive that comes for it later fails (DEADLINE_EXCEEDED naming the
// flag). A receive into `into` (caller memory) gets the tensor written
// there: received straight there if it arrives after the receive began.
//
// Every send and receive is bounded by options.timeout (default: the
// worker's) and fails naming its peer and tag: DEADLINE_EXCEEDED ("recv
// from rank 1 (worker1) with tag 7: no message within 1000 ms"),
// UNAVAILABLE when the peer died (a receive from any source waits for the
// live ones, until its deadline), INVALID_ARGUMENT for a peer outside the
// group or this rank itself, and for a tensor unlike `into`. options.tag
// is not used (tags are integers here).
#ifndef FERRY_COLLECTIVES_P2P_H_
#define FERRY_COLLECTIVES_P2P_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectives/op/options.h"
#include "collectives/op/process_group.h"
#include "collectives/op/tensor_out.h"
#include "collectives/op/work.h"
#include "rpc/value/tensor.h"

namespace ferry {

// `src` of a receive from any member.
inline constexpr int kAnySource = -1;

// What a receive got: the tensor, and who sent it (a group rank).
struct Received {
  int src = -1;
  Tensor tensor;
};

Work<Done> SendAsync(ProcessGroup& group, const Tensor& tensor, int dst,
                     int64_t tag = 0, const CollectiveOptions& options = {});
absl::Status Send(ProcessGroup& group, const Tensor& tensor, int dst,
                  int64_t tag = 0, const CollectiveOptions& options = {});

// The next message from `src` (or kAnySource) with `tag`; into `into` if
// given (its dtype and shape must be the message's).
Work<Received> RecvAsync(ProcessGroup& group, int src, int64_t tag = 0,
                         TensorOut into = nullptr,
                         const CollectiveOptions& options = {});
absl::StatusOr<Received> Recv(ProcessGroup& group, int src, int64_t tag = 0,
                              TensorOut into = nullptr,
                              const CollectiveOptions& options = {});

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_P2P_H_
