#include "rref/rref_state.h"

namespace ferry {

RRefState::~RRefState() {
  // A copy that outlives its node's context has nobody left to tell.
  if (auto core = core_.lock()) core->Released(descriptor());
}

}  // namespace ferry
