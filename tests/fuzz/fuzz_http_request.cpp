// libFuzzer target: the HTTP request head parser (net/http_request.h) on
// arbitrary bytes, as a stranger's connection would send them to the
// master's HTTP port. No input may make it crash or read outside the bytes,
// and whatever it says keeps the documented contracts:
//  - the head's end is found the same way when the bytes arrive in two reads
//    and the second scan resumes 3 bytes before the first one's end, as
//    HttpServer does;
//  - a head is either refused (400, 405 or 505, with a reason, no path) or
//    gives a path that starts with '/' and holds no query, fragment, space or
//    control byte: nothing odd reaches a handler.
//
// Input: u16 where the first read ends; then the bytes.
#include <cstdlib>
#include <string_view>

#include "fuzz_input.h"
#include "net/http_request.h"

using namespace ferry::net;
using ferry::fuzz::FuzzInput;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  size_t split = in.u16();
  auto rest = in.rest();
  std::string_view bytes(reinterpret_cast<const char*>(rest.data()), rest.size());
  split = bytes.empty() ? 0 : split % (bytes.size() + 1);

  size_t end = http_head_end(bytes);
  if (end != std::string_view::npos && (end > bytes.size() || bytes[end - 1] != '\n')) std::abort();
  if (http_head_end(bytes.substr(0, split)) == std::string_view::npos &&
      http_head_end(bytes, split >= 3 ? split - 3 : 0) != end)
    std::abort();
  (void)http_request_line_complete(bytes);

  HttpRequestHead head = parse_http_request_head(end == std::string_view::npos ? bytes : bytes.substr(0, end));
  if (head.error_status != 0) {
    if (head.error_status != 400 && head.error_status != 405 && head.error_status != 505) std::abort();
    if (head.error.empty() || !head.path.empty()) std::abort();
    return 0;
  }
  if (end == std::string_view::npos || head.path.empty() || head.path.front() != '/' || !head.error.empty())
    std::abort();
  for (char c : head.path)
    if (c == '?' || c == '#' || static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f)
      std::abort();
  return 0;
}
