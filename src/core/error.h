// ferry's internal error: a code (numbered as the C API's ferry_result) and a
// precise message. Thrown inside the library; capi/ turns it into a result.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ferry {

enum class Errc : int {
  ok = 0,
  invalid_argument = 1,
  invalid_usage = 2,
  timeout = 3,
  peer_lost = 4,
  master_lost = 5,
  connect = 6,
  mismatch = 7,
  kicked = 8,
  protocol = 9,
  auth = 10,
  system = 11,
  internal = 12,
};
inline constexpr int kErrcMax = 12;

// "The world changed, retry" (after a topology update) as opposed to "you
// called it wrong" or "this communicator is done". The one rule: the C API's
// ferry_result_is_retryable() and the retry loop of allreduce_with_retry() ask it,
// and the Python package's exception classes are tested against the C answer.
constexpr bool is_retryable(Errc code) { return code == Errc::timeout || code == Errc::peer_lost; }

std::string_view errc_name(Errc code);

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const { return code_; }

 private:
  Errc code_;
};

// The outcome of something that may fail without throwing (decoders, ops).
struct Status {
  Errc code = Errc::ok;
  std::string message;

  bool ok() const { return code == Errc::ok; }
  static Status success() { return {}; }
  static Status failure(Errc c, std::string m) { return {c, std::move(m)}; }
};

}  // namespace ferry
