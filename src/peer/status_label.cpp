#include "peer/status_label.h"

namespace ferry::peer {

void StatusLabel::set(std::string label) {
  if (std::string problem = wire::label_problem(label); !problem.empty()) throw Error(Errc::invalid_argument, problem);
  std::lock_guard lock(mu_);
  if (label == label_) return;
  label_ = std::move(label);
  if (welcomed_) session_.send(wire::PeerLabel{.label = label_});
}

void StatusLabel::on_welcome() {
  std::lock_guard lock(mu_);
  welcomed_ = true;
  if (!label_.empty()) session_.send(wire::PeerLabel{.label = label_});
}

void StatusLabel::on_session_lost() {
  std::lock_guard lock(mu_);
  welcomed_ = false;
}

}  // namespace ferry::peer
