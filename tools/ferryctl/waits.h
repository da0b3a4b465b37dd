// Who holds up whom, from every worker's status: a worker whose group op
// others wait in, and which has not begun that op itself (or is slow in
// it), is the one to look at — `ferryctl status` adds what it finds to
// each worker's entry, so an alive-but-stuck rank shows without a dump.
#ifndef FERRY_TOOLS_FERRYCTL_WAITS_H_
#define FERRY_TOOLS_FERRYCTL_WAITS_H_

#include <string>

#include "rpc/value/value.h"

namespace ferry {
namespace ctl {

// For `status` = {"workers":[…]} as StatusCommand builds it (each worker
// with "groups":[{group, last_scheduled_seq, waiting:{op, key, seq,
// waiting_for:[names]}}]): adds to every worker that others wait for
//   "blocking":[{"group","seq","key","op","waiting":[names],
//                "began":bool}]
// ("began": whether it began that op itself; false: it is behind).
void AddBlocking(Value* status);

// One line per blocking worker ("worker2 holds up all_reduce op 5 of
// world (world/5): worker0, worker1 wait for it; it has not begun it"),
// for the status table; empty if nobody waits.
std::string BlockingLines(const Value& status);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_WAITS_H_
