// A worker's collectives, plugged into its RpcAgent: the one place that
// reaches into the agent for what collectives use (collective_host.h).
// Everything below collectives/ sees only CollectiveHost.
#ifndef FERRY_COLLECTIVES_HOST_AGENT_HOST_H_
#define FERRY_COLLECTIVES_HOST_AGENT_HOST_H_

#include <memory>

#include "collectives/op/collective_context.h"
#include "collectives/transport/config.h"
#include "rpc/agent.h"

namespace ferry {

// The collectives of the worker `agent` (before its Start): the context
// over an AgentHost, its transport serving the agent's generic streams,
// its functions registered, told of every death the agent learns, and
// stopped and reported (status) with the agent.
std::shared_ptr<CollectiveContext> CollectivesForAgent(RpcAgent* agent,
                                                       CollectiveConfig config);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_HOST_AGENT_HOST_H_
