// ferry_comm_set_label: the line the master shows beside this peer (peer/status_label.h).

#include "capi/api_guard.h"
#include "capi/comm_handle.h"

using ferry::capi::guarded;
using ferry::capi::require;

ferry_result ferry_comm_set_label(ferry_comm* comm, const char* label) {
  return guarded([&] {
    require(comm, "comm");
    require(label, "label");
    comm->impl->set_label(label);
  });
}
