// Keeps gRPC's process-wide callback completion queue alive until exit.
//
// gRPC 1.51 (with the iomgr poller Debian builds) serves the callback API of
// every channel from one global, reference-counted completion queue: a
// channel takes a reference at its first callback call and drops it when
// destroyed, and at zero the queue is shut down and deleted, to be made
// afresh by the next callback call. A process that destroys its last channel
// and soon makes a new one (a test per case, a soak per job) races that
// teardown: gRPC aborts with "assertion failed: prior > 0" in
// grpc_cq_internal_unref, on one of its own threads. Holding one channel
// that made a callback call keeps the count above zero, so the teardown
// happens once, at exit.
#ifndef FERRY_RPC_WIRE_CALLBACK_QUEUE_H_
#define FERRY_RPC_WIRE_CALLBACK_QUEUE_H_

namespace ferry {

// Idempotent; ChannelPool calls it before it makes its first channel, so
// every process that talks to workers (ferryd, ferryctl, clients, tests)
// holds the queue. It may start the queue's threads.
void HoldGrpcCallbackQueue();

}  // namespace ferry

#endif  // FERRY_RPC_WIRE_CALLBACK_QUEUE_H_
