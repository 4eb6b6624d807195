// The run secret: proof of membership without the secret crossing the wire.
// Each side of a connection sends a fresh random nonce; each proves it holds
// the secret with HMAC-SHA256(secret, role label || both nonces || context).
// Different labels for each direction and connection kind keep a proof from
// being replayed anywhere else.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ferry {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;
inline constexpr size_t kMinSecretBytes = 16;

// kNonceBytes from the system's CSPRNG (OpenSSL RAND_bytes). Throws Error(system) on failure.
std::string random_nonce();

class RunSecret {
 public:
  // Reads the file whole (one trailing newline dropped). Throws Error:
  // invalid_argument when it cannot be read or holds fewer than kMinSecretBytes.
  static RunSecret load(const std::string& path);
  static RunSecret from_bytes(std::string bytes);  // for tests

  std::string proof(std::string_view label, std::string_view first_nonce, std::string_view second_nonce,
                    std::string_view context = {}) const;
  // Constant-time comparison with the expected proof.
  bool verify(std::string_view proof, std::string_view label, std::string_view first_nonce,
              std::string_view second_nonce, std::string_view context = {}) const;

 private:
  explicit RunSecret(std::string bytes) : bytes_(std::move(bytes)) {}
  std::string bytes_;
};

// The secret a process should use: `path` when given, else $FERRY_SECRET_FILE, else none.
std::optional<RunSecret> load_run_secret(const char* path);

}  // namespace ferry
