// What a worker reports about itself (Worker::status(),
// Client::GetStatus()) and what it offers (Client::ListFunctions()): plain
// structs, so the public API carries no generated code.
#ifndef FERRY_TOOLS_RUNTIME_STATUS_H_
#define FERRY_TOOLS_RUNTIME_STATUS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ferry {

struct WorkerStatus {
  std::string name;
  int rank = -1;
  std::string address;
  int64_t pid = 0;
  // new, starting, running, stopping, stopped.
  std::string state;
  int64_t uptime_ms = 0;
  // Calls executing here, and calls this worker waits on.
  int64_t inflight_incoming = 0;
  int64_t inflight_outgoing = 0;
  int64_t calls_served = 0;
  int functions = 0;
  // Workers this one knows dead or gone.
  std::vector<std::string> dead_peers;
  // RRefs owned here, copies held here, and protocol messages in flight.
  int64_t owned_rrefs = 0;
  int64_t user_rrefs = 0;
  int64_t pending_forks = 0;
  int64_t pending_deletes = 0;
  int64_t parked_requests = 0;
  int64_t collectives_inflight = 0;
  int64_t mailbox_bytes = 0;
  // C heap in use (not RSS): flat while the worker serves, if nothing leaks.
  int64_t heap_bytes = 0;
  // How long its membership lease (etcd's) has left as it last heard from
  // etcd; 0: no lease (the embedded master).
  int64_t membership_lease_ms = 0;
  // The limits it enforces, by ferryd flag name, in the flag's unit.
  std::map<std::string, int64_t> limits;
};

struct FunctionInfo {
  std::string name;
  std::string signature;  // "add(a: value, b: value) -> value"
  std::string doc;
};

}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_STATUS_H_
