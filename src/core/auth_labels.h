// The role labels of every proof (core/run_secret.h). One per direction and
// connection kind, so a proof made for one can never pass as another.
#pragma once

namespace ferry::auth_label {

inline constexpr const char* kPeerToMaster = "ferry/1/peer-to-master";
inline constexpr const char* kMasterToPeer = "ferry/1/master-to-peer";
inline constexpr const char* kDialer = "ferry/1/p2p-dialer";
inline constexpr const char* kAcceptor = "ferry/1/p2p-acceptor";

}  // namespace ferry::auth_label
