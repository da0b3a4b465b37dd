// Every rank's message on every rank in ceil(log2 n) rounds (the
// all-gather of Bruck et al., "Efficient algorithms for all-to-all
// communications in multiprocessor systems", 1997): the schedule of small
// exchanges, where the number of messages, not their bytes, is the cost.
//
// After round j a rank holds the messages of itself and the next
// min(2^(j+1), n) - 1 ranks (mod n). In round j rank r sends the first
// min(2^j, n - 2^j) of those, packed into one message, to rank r - 2^j,
// and receives as many from rank r + 2^j, appended. So each rank sends
// ceil(log2 n) messages instead of n - 1 — an op of n ranks costs each
// O(log n) message latencies, the job O(n log n) messages instead of
// O(n²) — and as many bytes as the direct exchange (every other rank's
// message once). The rounds use steps [FirstGatherStep(n), +rounds)
// (op_key.h), apart from every other schedule's.
//
// A packed message is rejected (INTERNAL, naming its sender) unless it
// holds exactly the ranks the schedule says, each with its header and its
// tensors; whatever it says is compared, never trusted to size anything.
// Messages carrying a Value cannot be packed: GatherAll is for headers and
// tensors (all_reduce, all_gather).
#ifndef FERRY_COLLECTIVES_ALGORITHMS_GATHER_ALL_H_
#define FERRY_COLLECTIVES_ALGORITHMS_GATHER_ALL_H_

#include "collectives/op/message.h"
#include "collectives/op/op.h"

namespace ferry {

// `then` gets every rank's message by group rank (this rank's own is
// `mine`), as Op::ExchangeAll's continuation does.
void GatherAll(Op& op, Message mine, Op::OnMessages then);

// Rounds GatherAll takes on `n` ranks: ceil(log2 n).
int GatherRounds(int n);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_GATHER_ALL_H_
