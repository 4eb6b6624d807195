// ferry_comm_link_matrix: the master's link matrix, translated into the caller's array.

#include "capi/api_guard.h"
#include "capi/comm_handle.h"

using ferry::Errc;
using ferry::Error;
using ferry::capi::guarded;
using ferry::capi::require;

namespace {

ferry_link_info to_info(const ferry::wire::LinkEntry& e) {
  ferry_link_info out{};
  out.shared_memory = e.shared_memory ? 1 : 0;
  out.from_peer = e.from_peer;
  out.to_peer = e.to_peer;
  out.goodput_bytes_per_s = static_cast<double>(e.goodput_bps);
  out.delivery_rate_bytes_per_s = static_cast<double>(e.delivery_rate_bps);
  out.rtt_ms = e.rtt_us / 1e3;
  out.retransmit_ratio = e.retrans_ppm / 1e6;
  out.bytes = e.bytes;
  out.age_s = e.age_ms / 1e3;
  out.connections = e.connections;
  return out;
}

}  // namespace

extern "C" {

ferry_result ferry_comm_link_matrix(ferry_comm* comm, ferry_link_info* links, size_t capacity, size_t* count) {
  return guarded([&] {
    require(comm, "comm");
    require(count, "count");
    size_t stride = 0;
    if (capacity > 0) {
      require(links, "links");
      stride = links->struct_size;
      // At least the two leading fields, as for every versioned struct; a caller's older struct simply ends sooner.
      if (stride < 2 * sizeof(uint32_t) || stride > (1u << 16))
        throw Error(Errc::invalid_argument, "links[0].struct_size is " + std::to_string(stride) +
                                                ": set it to sizeof(ferry_link_info)");
    }
    auto matrix = comm->impl->link_matrix();
    *count = matrix.size();
    auto* base = reinterpret_cast<uint8_t*>(links);
    for (size_t i = 0; i < std::min(capacity, matrix.size()); ++i) {
      ferry::capi::write_versioned(base + i * stride, static_cast<uint32_t>(stride), to_info(matrix[i]));
    }
  });
}

}  // extern "C"
