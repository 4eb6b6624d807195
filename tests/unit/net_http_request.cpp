// The HTTP request head parser (net/http_request.h), without sockets: what
// reaches the handler from a well-formed head, and the status each kind of
// malformed head is answered with.
#include <catch2/catch.hpp>

#include <string>

#include "net/http_request.h"

using namespace ferry::net;
using namespace std::string_literals;

TEST_CASE("http request: the head ends at the first blank line, CRLF or bare LF, found across reads",
          "[net][http]") {
  CHECK(http_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody") == 27);
  CHECK(http_head_end("GET / HTTP/1.0\n\nmore") == 16);
  CHECK(http_head_end("GET / HTTP/1.1\r\nHost: a\r\n") == std::string::npos);
  CHECK(http_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r") == std::string::npos);
  // A caller that scanned 24 bytes before its last read resumes 3 bytes earlier and still finds it.
  CHECK(http_head_end("GET / HTTP/1.1\r\nHost: a\r\n\r\n", 21) == 27);
}

TEST_CASE("http request: GET and HEAD give the path without query or fragment", "[net][http]") {
  struct Case {
    std::string head;
    const char* path;
    bool head_only;
  };
  for (const Case& c : {Case{"GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n", "/metrics", false},
                        Case{"HEAD /status?x=1&y HTTP/1.1\r\nhost: a:9100\r\nAccept: */*\r\n\r\n", "/status", true},
                        Case{"GET /a%20b#frag HTTP/1.0\r\n\r\n", "/a%20b", false},
                        Case{"GET http://h:1/x/y?q HTTP/1.1\r\nHost: h:1\r\n\r\n", "/x/y", false},
                        Case{"GET HTTPS://h?q HTTP/1.1\r\nHost: h\r\n\r\n", "/", false},
                        Case{"GET / HTTP/1.1\nHost: a\nX-Utf8: \xc3\xa9\t ok\n\n", "/", false}}) {
    INFO(c.head);
    HttpRequestHead head = parse_http_request_head(c.head);
    CHECK(head.error_status == 0);
    CHECK(head.error.empty());
    CHECK(head.path == c.path);
    CHECK(head.head_only == c.head_only);
  }
}

TEST_CASE("http request: malformed heads are 400s, other methods 405, other major versions 505", "[net][http]") {
  struct Case {
    std::string head;
    int status;
  };
  for (const Case& c : {Case{"POST / HTTP/1.1\r\nHost: a\r\n\r\n", 405}, Case{"get / HTTP/1.1\r\nHost: a\r\n\r\n", 405},
                        Case{"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 400}, Case{"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
                        Case{"GET / HTTP/1.1\r\n\r\n", 400}, Case{"GET / HTTP/1.1\r\nHost: a\r\nHOST: b\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400}, Case{"GET /\r\n\r\n", 400},
                        Case{"GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400}, Case{"GET / http/1.1\r\nHost: a\r\n\r\n", 400},
                        Case{"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400}, Case{"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", 400},
                        Case{"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400}, Case{"GET / HTTP/1.1\r\nHost a\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\n: a\r\nHost: a\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nHost: a\r\n\tfolded\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nHost: a\x1b[31m\r\n\r\n", 400},
                        Case{"GET / HTTP/1.1\r\nHost: a\0\r\n\r\n"s, 400}, Case{"\r\n\r\n", 400}}) {
    INFO(c.head);
    HttpRequestHead head = parse_http_request_head(c.head);
    CHECK(head.error_status == c.status);
    CHECK_FALSE(head.error.empty());
    CHECK(head.path.empty());
  }
}

TEST_CASE("http request: a complete request line tells an oversized header block from junk", "[net][http]") {
  CHECK(http_request_line_complete("GET /metrics HTTP/1.1\r\nX-Pad: aaaa"));
  CHECK_FALSE(http_request_line_complete("GET /metrics HTTP/1.1"));
  CHECK_FALSE(http_request_line_complete("\x16\x03\x01\x02\x00\r\n"s));
}
