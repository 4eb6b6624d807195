// The label this peer shows beside itself on the master's /status and dashboard
// (ferry_comm_set_label): one short line, wire::PeerLabel. Kept here and sent
// again after every welcome, so that whichever master holds this peer (a
// redial's, one started again) holds its label too. Fire and forget: nothing
// waits for it and nothing decides by it, so it never touches the
// coordination path; a label set before the welcome waits for it (a frame
// before the hello would be a protocol violation).
//
// Threading: set() from any thread; on_welcome() and on_session_lost() from
// the master session's strand. mu_ is held across the queueing of the frame
// (MasterSession::send takes only its own lock), so the master hears the
// labels in the order they were set.
#pragma once

#include <mutex>
#include <string>

#include "peer/master_session.h"

namespace ferry::peer {

class StatusLabel {
 public:
  explicit StatusLabel(MasterSession& session) : session_(session) {}

  // Throws Error(invalid_argument) for a label the master would refuse (wire::label_problem).
  void set(std::string label);
  void on_welcome();       // the session's handshake is done: the label may go out
  void on_session_lost();  // until the next welcome, hold it

 private:
  MasterSession& session_;
  std::mutex mu_;
  std::string label_;     // guarded by mu_
  bool welcomed_ = false;  // guarded by mu_
};

}  // namespace ferry::peer
