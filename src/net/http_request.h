// The head of an HTTP/1.x request, read from untrusted bytes: the request
// line and the header block, checked strictly enough that nothing odd reaches
// a handler (RFC 9112: no whitespace before a header's colon, no line
// folding, no control bytes, one Host in HTTP/1.1). Bodies are never read:
// the server answers GET and HEAD only and closes after every response.
// Pure functions, no I/O: fuzzable, and tested without sockets.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ferry::net {

// Where the head in `bytes` ends: the index just past the blank line (CRLF
// CRLF, or bare LF LF, which RFC 9112 lets a recipient accept), or npos while
// it is incomplete. `from`: bytes before it were scanned already (the caller
// passes what it had before its last read, less 3, so a terminator split
// across reads is still found).
size_t http_head_end(std::string_view bytes, size_t from = 0);

// Whether `bytes` holds a whole request line that parses: used to tell an
// oversized header block (431) from junk (400) when the head limit is hit.
bool http_request_line_complete(std::string_view bytes);

struct HttpRequestHead {
  // 0 when the head is well formed and asks for GET or HEAD; otherwise the
  // status to answer before closing: 400 (malformed), 405 (another method),
  // 505 (not HTTP/1.x).
  int error_status = 0;
  std::string error;       // why, for a log line; empty when error_status is 0
  bool head_only = false;  // HEAD: the response carries headers only
  // The target's path, as sent (not percent-decoded), without "?query" or
  // "#fragment"; an absolute-form target ("http://host/x") gives "/x".
  std::string path;
};

// `head`: the bytes up to http_head_end(), terminator included.
HttpRequestHead parse_http_request_head(std::string_view head);

}  // namespace ferry::net
