#include "net/http_request.h"

#include <cstring>

namespace ferry::net {
namespace {

bool is_tchar(char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return true;
  return c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_tchar(c)) return false;
  return true;
}

// A field value may hold visible ASCII, spaces, tabs and obs-text (bytes >= 0x80), nothing else.
bool is_field_value(std::string_view s) {
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\t') return false;
    if (u == 0x7f) return false;
  }
  return true;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// The next line of `text` from `pos`, without its LF or CRLF; nullopt-like
// false when no LF follows, or a CR stands anywhere but just before the LF.
bool next_line(std::string_view text, size_t& pos, std::string_view& line, bool& bare_cr) {
  size_t lf = text.find('\n', pos);
  if (lf == std::string_view::npos) return false;
  line = text.substr(pos, lf - pos);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  bare_cr = line.find('\r') != std::string_view::npos;
  pos = lf + 1;
  return true;
}

struct RequestLine {
  std::string_view method, target;
  int major = 0, minor = 0;
};

// "METHOD SP TARGET SP HTTP/D.D", single spaces (RFC 9112 section 3): an empty
// string when it parses, else why not.
std::string parse_request_line(std::string_view line, RequestLine& out) {
  size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return "request line without spaces";
  size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return "request line is not METHOD TARGET VERSION";
  out.method = line.substr(0, sp1);
  out.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!is_token(out.method)) return "bad method";
  if (out.target.empty()) return "empty target";
  for (char c : out.target)
    if (static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) >= 0x7f) return "bad byte in target";
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9')
    return "bad HTTP version";
  out.major = version[5] - '0';
  out.minor = version[7] - '0';
  return {};
}

// The path of an origin-form ("/x?y") or absolute-form ("http://h/x?y")
// target, without query or fragment; empty for any other form.
std::string_view target_path(std::string_view target) {
  for (std::string_view scheme : {std::string_view("http://"), std::string_view("https://")}) {
    if (target.size() >= scheme.size() && iequals(target.substr(0, scheme.size()), scheme)) {
      size_t slash = target.find_first_of("/?#", scheme.size());
      if (slash == std::string_view::npos || target[slash] != '/') return "/";
      target = target.substr(slash);
      break;
    }
  }
  if (target.empty() || target.front() != '/') return {};
  return target.substr(0, target.find_first_of("?#"));
}

}  // namespace

size_t http_head_end(std::string_view bytes, size_t from) {
  for (size_t i = bytes.find('\n', from); i != std::string_view::npos; i = bytes.find('\n', i + 1)) {
    if (i + 1 < bytes.size() && bytes[i + 1] == '\n') return i + 2;
    if (i + 2 < bytes.size() && bytes[i + 1] == '\r' && bytes[i + 2] == '\n') return i + 3;
  }
  return std::string_view::npos;
}

bool http_request_line_complete(std::string_view bytes) {
  size_t pos = 0;
  std::string_view line;
  bool bare_cr = false;
  RequestLine request;
  return next_line(bytes, pos, line, bare_cr) && !bare_cr && parse_request_line(line, request).empty();
}

HttpRequestHead parse_http_request_head(std::string_view head) {
  HttpRequestHead out;
  auto fail = [&](int status, std::string why) {
    out.error_status = status;
    out.error = std::move(why);
    out.path.clear();
    return out;
  };
  if (head.find('\0') != std::string_view::npos) return fail(400, "NUL byte in head");
  size_t pos = 0;
  std::string_view line;
  bool bare_cr = false;
  if (!next_line(head, pos, line, bare_cr)) return fail(400, "no request line");
  if (bare_cr) return fail(400, "bare CR in request line");
  RequestLine request;
  if (std::string why = parse_request_line(line, request); !why.empty()) return fail(400, why);
  if (request.major != 1) return fail(505, "HTTP version " + std::to_string(request.major) + " not supported");
  std::string_view path = target_path(request.target);
  if (path.empty()) return fail(400, "target is not a path");

  int hosts = 0;
  while (true) {
    if (!next_line(head, pos, line, bare_cr)) return fail(400, "head does not end with a blank line");
    if (bare_cr) return fail(400, "bare CR in a header");
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') return fail(400, "folded header line");
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return fail(400, "header line without ':'");
    std::string_view name = line.substr(0, colon);
    if (!is_token(name)) return fail(400, "bad header name");
    if (!is_field_value(line.substr(colon + 1))) return fail(400, "control byte in a header value");
    if (iequals(name, "host")) ++hosts;
  }
  if (pos != head.size()) return fail(400, "bytes after the head's blank line");
  // RFC 9112 section 3.2: an HTTP/1.1 request without exactly one Host is a 400.
  if (request.minor >= 1 && hosts != 1) return fail(400, "HTTP/1.1 request needs exactly one Host header");
  if (request.method != "GET" && request.method != "HEAD")
    return fail(405, "method " + std::string(request.method) + " not allowed");
  out.head_only = request.method == "HEAD";
  out.path = std::string(path);
  return out;
}

}  // namespace ferry::net
