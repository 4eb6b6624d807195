// The opening of every p2p connection, ring link or shared-state fetch:
//   acceptor -> link_challenge(nonce)
//   dialer   -> link_hello | fetch_hello | probe_hello | relay_hello (its nonce, proof over both + what it asks for)
//   acceptor -> link_welcome (code, its proof)   [written by whoever takes the connection]
// With a run secret each side checks the other's proof; without one the
// proofs stay empty and a peer only checks names against the master's plan.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "core/run_secret.h"
#include "net/stream.h"
#include "wire/messages.h"

namespace ferry::peer {

using P2pHello = std::variant<wire::LinkHello, wire::FetchHello, wire::ProbeHello, wire::RelayHello>;

// Dialer side, on the stream's strand. `done` runs once: ok when the acceptor
// welcomed us and (with a secret) proved it holds the secret too;
// `shm_accepted` when it also mapped the link hello's shared-memory ring (a
// probe_hello's acceptor: when it is on this host).
using DialerDone = std::function<void(Status, bool shm_accepted)>;
void dialer_handshake(std::shared_ptr<net::Stream> stream, P2pHello hello, std::shared_ptr<const RunSecret> secret,
                      std::chrono::milliseconds timeout, DialerDone done);

struct AcceptedHello {
  P2pHello hello;
  std::string welcome_proof;  // put it in the link_welcome
};

// Acceptor side, on the stream's strand. `done` runs once: the dialer's hello
// with its proof checked, or why the connection was refused (the refusal is
// already written and the stream closed).
void acceptor_handshake(std::shared_ptr<net::Stream> stream, std::shared_ptr<const RunSecret> secret,
                        std::chrono::milliseconds timeout,
                        std::function<void(Status, std::optional<AcceptedHello>)> done);

}  // namespace ferry::peer
