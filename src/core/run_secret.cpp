#include "core/run_secret.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace ferry {

std::string random_nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1)
    throw Error(Errc::system, "no randomness for an authentication nonce");
  return nonce;
}

RunSecret RunSecret::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::invalid_argument, "cannot read the run secret file '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string bytes = buffer.str();
  if (!bytes.empty() && bytes.back() == '\n') bytes.pop_back();
  if (!bytes.empty() && bytes.back() == '\r') bytes.pop_back();
  if (bytes.size() < kMinSecretBytes)
    throw Error(Errc::invalid_argument, "the run secret in '" + path + "' is shorter than " +
                                            std::to_string(kMinSecretBytes) + " bytes");
  return RunSecret(std::move(bytes));
}

RunSecret RunSecret::from_bytes(std::string bytes) { return RunSecret(std::move(bytes)); }

std::string RunSecret::proof(std::string_view label, std::string_view first_nonce, std::string_view second_nonce,
                             std::string_view context) const {
  // Length-prefixed fields: no two different inputs concatenate to the same message.
  std::string message;
  for (std::string_view part : {label, first_nonce, second_nonce, context}) {
    uint32_t n = static_cast<uint32_t>(part.size());
    message.append(reinterpret_cast<const char*>(&n), sizeof n);
    message.append(part);
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), bytes_.data(), static_cast<int>(bytes_.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac, &len))
    throw Error(Errc::system, "HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(mac), len);
}

bool RunSecret::verify(std::string_view given, std::string_view label, std::string_view first_nonce,
                       std::string_view second_nonce, std::string_view context) const {
  std::string expected = proof(label, first_nonce, second_nonce, context);
  return given.size() == expected.size() && CRYPTO_memcmp(given.data(), expected.data(), expected.size()) == 0;
}

std::optional<RunSecret> load_run_secret(const char* path) {
  if (path && *path) return RunSecret::load(path);
  if (const char* env = std::getenv("FERRY_SECRET_FILE"); env && *env) return RunSecret::load(env);
  return std::nullopt;
}

}  // namespace ferry
