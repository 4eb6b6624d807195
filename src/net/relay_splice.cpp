#include "net/relay_splice.h"

#include <asio/bind_executor.hpp>
#include <asio/dispatch.hpp>
#include <asio/write.hpp>

namespace ferry::net {

RelaySplice::RelaySplice(asio::ip::tcp::socket a, asio::ip::tcp::socket b, Ended ended, Tap tap)
    : strand_(asio::make_strand(a.get_executor())), a_(std::move(a)), b_(std::move(b)),
      forward_{&a_, &b_, true}, backward_{&b_, &a_, false}, ended_(std::move(ended)), tap_(std::move(tap)) {}

std::shared_ptr<RelaySplice> RelaySplice::start(asio::ip::tcp::socket a, asio::ip::tcp::socket b, Ended ended,
                                                Tap tap) {
  auto splice = std::make_shared<RelaySplice>(std::move(a), std::move(b), std::move(ended), std::move(tap));
  asio::dispatch(splice->strand_, [splice] {
    splice->pump(splice->forward_);
    splice->pump(splice->backward_);
  });
  return splice;
}

void RelaySplice::stop() {
  asio::dispatch(strand_, [self = shared_from_this()] { self->finish(); });
}

void RelaySplice::pump(Direction& d) {
  d.from->async_read_some(
      asio::buffer(d.buffer), asio::bind_executor(strand_, [self = shared_from_this(), &d](std::error_code ec, size_t n) {
        if (ec || self->done_) return self->finish();
        if (self->tap_) self->tap_(d.a_to_b, d.buffer.data(), n);
        asio::async_write(*d.to, asio::buffer(d.buffer.data(), n),
                          asio::bind_executor(self->strand_, [self, &d](std::error_code wec, size_t written) {
                            if (wec || self->done_) return self->finish();
                            d.bytes += written;
                            self->pump(d);
                          }));
      }));
}

void RelaySplice::finish() {
  if (done_) return;
  done_ = true;
  std::error_code ignored;
  for (auto* s : {&a_, &b_}) {
    s->shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
    s->close(ignored);
  }
  if (auto ended = std::move(ended_)) ended(counts());
}

}  // namespace ferry::net
