#include "net/tls_fd_bio.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace ferry::net {
namespace {

FdBioState& state_of(BIO* bio) { return *static_cast<FdBioState*>(BIO_get_data(bio)); }

bool send_all(FdBioState& s, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t sent = ::send(s.fd, p, n, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      s.write_errno = errno;
      return false;
    }
    p += sent;
    n -= static_cast<size_t>(sent);
  }
  return true;
}

int fd_write(BIO* bio, const char* data, size_t len, size_t* written) {
  FdBioState& s = state_of(bio);
  BIO_clear_retry_flags(bio);
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  if (s.write_errno != 0) return 0;
  if (!s.out) s.out = std::make_unique<uint8_t[]>(kFdBioBufferBytes);
  if (s.out_len + len > kFdBioBufferBytes && !flush_fd_bio(s)) return 0;
  if (len >= kFdBioBufferBytes) {
    if (!send_all(s, p, len)) return 0;
  } else {
    std::memcpy(s.out.get() + s.out_len, p, len);
    s.out_len += len;
  }
  *written = len;
  return 1;
}

int fd_read(BIO* bio, char* data, size_t len, size_t* read_bytes) {
  FdBioState& s = state_of(bio);
  BIO_clear_retry_flags(bio);
  *read_bytes = 0;
  if (len == 0) return 0;
  if (s.carried_pos < s.carried_in.size()) {
    size_t n = std::min(len, s.carried_in.size() - s.carried_pos);
    std::memcpy(data, s.carried_in.data() + s.carried_pos, n);
    s.carried_pos += n;
    *read_bytes = n;
    return 1;
  }
  if (s.in_pos == s.in_end) {
    if (s.eof || s.read_errno != 0) return 0;
    if (!s.in) s.in = std::make_unique<uint8_t[]>(kFdBioBufferBytes);
    for (;;) {
      ssize_t got = ::recv(s.fd, s.in.get(), kFdBioBufferBytes, 0);
      if (got > 0) {
        s.in_pos = 0;
        s.in_end = static_cast<size_t>(got);
        break;
      }
      if (got == 0) {
        s.eof = true;
        return 0;
      }
      if (errno != EINTR) {
        s.read_errno = errno;
        return 0;
      }
    }
  }
  size_t n = std::min(len, s.in_end - s.in_pos);
  std::memcpy(data, s.in.get() + s.in_pos, n);
  s.in_pos += n;
  *read_bytes = n;
  return 1;
}

long fd_ctrl(BIO* bio, int cmd, long, void*) {
  FdBioState& s = state_of(bio);
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return flush_fd_bio(s) ? 1 : 0;
    case BIO_CTRL_PENDING:
      return static_cast<long>((s.carried_in.size() - s.carried_pos) + (s.in_end - s.in_pos));
    case BIO_CTRL_WPENDING:
      return static_cast<long>(s.out_len);
    case BIO_CTRL_EOF:
      return s.eof ? 1 : 0;
    default:
      return 0;  // no kTLS, no fd queries, no push/pop
  }
}

int fd_create(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

int fd_destroy(BIO*) { return 1; }  // the state belongs to the stream

const BIO_METHOD* fd_bio_method() {
  static const BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "ferry blocking fd");
    if (!m) return static_cast<BIO_METHOD*>(nullptr);
    BIO_meth_set_write_ex(m, fd_write);
    BIO_meth_set_read_ex(m, fd_read);
    BIO_meth_set_ctrl(m, fd_ctrl);
    BIO_meth_set_create(m, fd_create);
    BIO_meth_set_destroy(m, fd_destroy);
    return m;
  }();
  return method;
}

}  // namespace

BIO* make_fd_bio(FdBioState* state) {
  const BIO_METHOD* method = fd_bio_method();
  if (!method) return nullptr;
  BIO* bio = BIO_new(method);
  if (bio) BIO_set_data(bio, state);
  return bio;
}

bool flush_fd_bio(FdBioState& s) {
  if (s.write_errno != 0) return false;
  bool ok = send_all(s, s.out.get(), s.out_len);
  s.out_len = 0;
  return ok;
}

}  // namespace ferry::net
