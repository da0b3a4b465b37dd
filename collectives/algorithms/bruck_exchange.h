// Each rank's block for every rank delivered in ceil(log2 n) rounds (the
// index algorithm of Bruck et al., "Efficient algorithms for all-to-all
// communications in multiprocessor systems", 1997): the schedule of small
// all-to-alls, where the number of messages, not their bytes, is the cost.
//
// Rank r first holds at index i its block for rank r + i (mod n): a block
// i ranks from where it goes. In round k every block whose index has bit k
// set moves 2^k ranks on — rank r sends those to r + 2^k, packed in one
// message, and takes the same indices from r - 2^k — so after the rounds
// each has travelled its distance, and index i holds rank (r - i)'s block
// for r. Each rank sends ceil(log2 n) messages of about n/2 blocks instead
// of n - 1 of one: the job O(n log n) messages instead of O(n²), for
// about log2(n)/2 times the bytes (so only small blocks go this way).
// Round k is step 1 + k (op_key.h: all_to_all uses no ring steps).
//
// A message is rejected (INTERNAL, naming its sender) unless it holds
// exactly the blocks of its round: tensors only, as many as the round
// moves; what a block holds is the caller's to check, as with a direct
// exchange.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_BRUCK_EXCHANGE_H_
#define FERRY_COLLECTIVES_ALGORITHMS_BRUCK_EXCHANGE_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "collectives/op/op.h"
#include "rpc/value/tensor.h"

namespace ferry {

using OnBlocks = absl::AnyInvocable<void(std::vector<Tensor>) &&>;

// `blocks[i]` is this rank's block for group rank i (op.size() of them);
// `then` gets, by group rank, the block each rank sent this one (its own
// entry: blocks[op.rank()]).
void BruckExchange(Op& op, std::vector<Tensor> blocks, OnBlocks then);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_BRUCK_EXCHANGE_H_
