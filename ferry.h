// ferry: the one header a program using ferry includes.
//
//   #include <ferry/ferry.h>
//
//   ferry::Worker w({.rank = 1, .world_size = 2, .master = "10.0.0.1:29500"});
//   ferry::Client::Connect({.master = "10.0.0.1:29500"});
//
// What it offers:
//   ferry::Worker, ferry::Client   this process as a worker, or as a client
//                                  of a job (tools/runtime/worker.h, client.h)
//   ferry::Value, ferry::Tensor    what calls take and return
//                                  (rpc/value/value.h, tensor.h; JSON forms:
//                                  rpc/value/json.h)
//   ferry::RRef                    a reference to a value on another worker
//                                  (rref/rref.h)
//   ferry::AllReduce, AllToAll…    collectives over a ProcessGroup
//                                  (collectives/collectives.h), and the
//                                  jagged all-to-all (collectives/sparse.h)
//   ferry::Future                  results of async calls (rpc/base/future.h)
//
// It includes no gRPC and no generated header (tests/ferry_h_test checks).
#ifndef FERRY_FERRY_H_
#define FERRY_FERRY_H_

#include "collectives/algorithms/kjt.h"   // IWYU pragma: export
#include "collectives/collectives.h"      // IWYU pragma: export
#include "collectives/elastic/elastic.h"  // IWYU pragma: export
#include "collectives/into.h"             // IWYU pragma: export
#include "collectives/p2p.h"              // IWYU pragma: export
#include "collectives/sparse.h"           // IWYU pragma: export
#include "rpc/base/future.h"              // IWYU pragma: export
#include "rpc/base/status_util.h"         // IWYU pragma: export
#include "rpc/value/dtype.h"              // IWYU pragma: export
#include "rpc/value/json.h"               // IWYU pragma: export
#include "rpc/value/tensor.h"             // IWYU pragma: export
#include "rpc/value/value.h"              // IWYU pragma: export
#include "rref/rref.h"                    // IWYU pragma: export
#include "tools/runtime/client.h"         // IWYU pragma: export
#include "tools/runtime/status.h"         // IWYU pragma: export
#include "tools/runtime/worker.h"         // IWYU pragma: export

#endif  // FERRY_FERRY_H_
