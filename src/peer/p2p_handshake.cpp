#include "peer/p2p_handshake.h"

#include "core/auth_labels.h"
#include "net/frame_io.h"
#include "wire/frame.h"

namespace ferry::peer {
namespace {

std::string& nonce_of(P2pHello& h) {
  return std::visit([](auto& m) -> std::string& { return m.nonce; }, h);
}
std::string& proof_of(P2pHello& h) {
  return std::visit([](auto& m) -> std::string& { return m.proof; }, h);
}
std::string context_of(const P2pHello& h) {
  return std::visit([](const auto& m) { return m.context(); }, h);
}
wire::Message as_message(const P2pHello& h) {
  return std::visit([](const auto& m) { return wire::Message(m); }, h);
}

}  // namespace

void dialer_handshake(std::shared_ptr<net::Stream> stream, P2pHello hello, std::shared_ptr<const RunSecret> secret,
                      std::chrono::milliseconds timeout, DialerDone finish) {
  auto done = [finish](Status st) { finish(std::move(st), false); };
  struct State {
    P2pHello hello;
    std::string acceptor_nonce;
  };
  auto state = std::make_shared<State>(State{std::move(hello), {}});
  net::read_one_message(stream, timeout, wire::kMaxHandshakePayload, [=](Status st, std::optional<wire::Message> m) {
    if (!st.ok()) return done(st);
    auto* challenge = std::get_if<wire::LinkChallenge>(&*m);
    if (!challenge) return done(Status::failure(Errc::protocol, "expected link_challenge"));
    if (secret && !challenge->required)
      return done(Status::failure(Errc::auth, "the peer does not check the run secret"));
    state->acceptor_nonce = challenge->nonce;
    nonce_of(state->hello) = random_nonce();
    if (secret)
      proof_of(state->hello) =
          secret->proof(auth_label::kDialer, challenge->nonce, nonce_of(state->hello), context_of(state->hello));
    net::write_one_message(stream, as_message(state->hello), [=](Status wst) {
      if (!wst.ok()) return done(wst);
      net::read_one_message(stream, timeout, wire::kMaxHandshakePayload, [=](Status rst, std::optional<wire::Message> r) {
        if (!rst.ok()) return done(rst);
        auto* welcome = std::get_if<wire::LinkWelcome>(&*r);
        if (!welcome) return done(Status::failure(Errc::protocol, "expected link_welcome"));
        if (welcome->code != 0)
          return done(Status::failure(welcome->code == static_cast<uint32_t>(Errc::auth) ? Errc::auth : Errc::connect,
                                      "refused: " + welcome->reason));
        if (secret && !secret->verify(welcome->proof, auth_label::kAcceptor, nonce_of(state->hello),
                                      state->acceptor_nonce, context_of(state->hello)))
          return done(Status::failure(Errc::auth, "the peer could not prove the run secret"));
        finish(Status::success(), welcome->shm != 0 && !std::holds_alternative<wire::FetchHello>(state->hello));
      });
    });
  });
}

void acceptor_handshake(std::shared_ptr<net::Stream> stream, std::shared_ptr<const RunSecret> secret,
                        std::chrono::milliseconds timeout,
                        std::function<void(Status, std::optional<AcceptedHello>)> done) {
  std::string nonce = random_nonce();
  net::write_one_message(stream, wire::LinkChallenge{.nonce = nonce, .required = secret != nullptr}, [=](Status wst) {
    if (!wst.ok()) return done(wst, std::nullopt);
    net::read_one_message(stream, timeout, wire::kMaxHandshakePayload, [=](Status st, std::optional<wire::Message> m) {
      if (!st.ok()) return done(st, std::nullopt);
      std::optional<P2pHello> hello;
      if (auto* link = std::get_if<wire::LinkHello>(&*m)) hello = *link;
      if (auto* fetch = std::get_if<wire::FetchHello>(&*m)) hello = *fetch;
      if (auto* probe = std::get_if<wire::ProbeHello>(&*m)) hello = *probe;
      if (auto* relay = std::get_if<wire::RelayHello>(&*m)) hello = *relay;
      if (!hello) {
        stream->close();
        return done(Status::failure(Errc::protocol, "expected link_hello, fetch_hello, probe_hello or relay_hello"),
                    std::nullopt);
      }
      AcceptedHello accepted{*hello, {}};
      if (secret) {
        if (!secret->verify(proof_of(*hello), auth_label::kDialer, nonce, nonce_of(*hello), context_of(*hello))) {
          Status refused = Status::failure(Errc::auth, "authentication failed: no valid proof of the run secret");
          return net::write_one_message(
              stream, wire::LinkWelcome{.code = static_cast<uint32_t>(Errc::auth), .reason = "authentication failed"},
              [stream, done, refused](Status) {
                stream->close();
                done(refused, std::nullopt);
              });
        }
        accepted.welcome_proof = secret->proof(auth_label::kAcceptor, nonce_of(*hello), nonce, context_of(*hello));
      }
      done(Status::success(), std::move(accepted));
    });
  });
}

}  // namespace ferry::peer
