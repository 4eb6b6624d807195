// The C handle of a communicator, shared by the capi/ files that serve ferry_comm_* calls.
#pragma once

#include <memory>

#include "peer/communicator.h"

struct ferry_comm {
  std::unique_ptr<ferry::peer::Communicator> impl;
};
