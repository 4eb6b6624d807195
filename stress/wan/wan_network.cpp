#include "wan_network.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "command.h"
#include "wan_shared.h"

#ifndef FERRY_WAN_FORWARDER_BUILD_PATH
#define FERRY_WAN_FORWARDER_BUILD_PATH ""
#endif

extern char** environ;

namespace ferry::wan {
namespace {

std::atomic<int> g_network_counter{0};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool cc_available(const std::string& cc) {
  std::istringstream in(read_file("/proc/sys/net/ipv4/tcp_available_congestion_control"));
  std::string name;
  while (in >> name)
    if (name == cc) return true;
  return false;
}

void ensure_cc(const std::string& cc) {
  if (cc_available(cc)) return;
  run_command({"modprobe", "tcp_" + cc});
  if (cc_available(cc)) return;
  throw std::runtime_error("wan: congestion control '" + cc + "' is not available (modprobe tcp_" + cc +
                           " did not help); the kernel offers: " +
                           read_file("/proc/sys/net/ipv4/tcp_available_congestion_control"));
}

// open_tun_in_netns() switched IPv6 off on the TUN; a host the topology gives IPv6 needs it.
void enable_ipv6(const std::string& netns, const std::string& tun) {
  ScopedNetns inside(netns);  // /proc/sys/net is the calling thread's namespace's
  const std::string path = "/proc/sys/net/ipv6/conf/" + tun + "/disable_ipv6";
  std::ofstream out(path);
  out << "0";
  out.flush();
  if (!out) throw std::runtime_error("wan: cannot switch IPv6 on for " + tun + " in " + netns + " (" + path + ")");
}

std::string host_ip4(int i) { return "10.77.0." + std::to_string(i + 1); }
std::string host_ip6(int i) {
  char text[16];
  std::snprintf(text, sizeof text, "fd77::%x", i + 1);
  return text;
}

// Seconds of CPU a process has used, from /proc/<pid>/stat (utime, stime: fields 14, 15).
std::pair<double, double> process_cpu(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return {0, 0};
  std::istringstream in(stat.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && (in >> field); ++i) {
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return {static_cast<double>(utime) / hz, static_cast<double>(stime) / hz};
}

}  // namespace

struct WanNetwork::Impl {
  Topology topology;
  bool from_spec = false;       // started from a WanConfig: FERRY_WAN_SPEC describes it
  std::vector<Host> hosts;
  WanShared* shared = nullptr;  // mapped for the network's lifetime (shared_bytes(hosts))
  pid_t forwarder = -1;
  bool forwarder_exited = false;
  WanStats final_stats;
  bool stopped = false;

  WanStats snapshot() const;
  void spawn_forwarder();
  void write_tables() const;
  void configure_host(const Host& h) const;
  void teardown() noexcept;
};

WanStats WanNetwork::Impl::snapshot() const {
  WanStats s;
  if (!shared) return final_stats;
  constexpr auto r = std::memory_order_relaxed;
  s.rx_frames = shared->rx_frames.load(r);
  s.tx_frames = shared->tx_frames.load(r);
  s.rx_packets = shared->rx_packets.load(r);
  s.rx_bytes = shared->rx_bytes.load(r);
  s.tx_packets = shared->tx_packets.load(r);
  s.tx_bytes = shared->tx_bytes.load(r);
  s.drop_loss = shared->drop_loss.load(r);
  s.drop_isolated = shared->drop_isolated.load(r);
  s.drop_blocked = shared->drop_blocked.load(r);
  s.drop_closed = shared->drop_closed.load(r);
  s.drop_stateful = shared->drop_stateful.load(r);
  s.flows_evicted = shared->flows_evicted.load(r);
  s.drop_queue = shared->drop_queue.load(r);
  s.drop_full = shared->drop_full.load(r);
  s.drop_no_route = shared->drop_no_route.load(r);
  s.write_errors = shared->write_errors.load(r);
  s.split_frames = shared->split_frames.load(r);
  s.queue_peak_bytes = shared->queue_peak_bytes.load(r);
  if (forwarder > 0 && !forwarder_exited) {
    auto [user, sys] = process_cpu(forwarder);
    s.forwarder_user_s = user;
    s.forwarder_sys_s = sys;
  } else {
    s.forwarder_user_s = final_stats.forwarder_user_s;
    s.forwarder_sys_s = final_stats.forwarder_sys_s;
  }
  return s;
}

void WanNetwork::Impl::spawn_forwarder() {
  const std::string path = forwarder_path();
  if (path.empty() || ::access(path.c_str(), X_OK) != 0)
    throw std::runtime_error("wan: ferry-wan-forwarder not found (set FERRY_WAN_FORWARDER to its path)");

  const int memfd = ::memfd_create("ferry-wan-shared", MFD_CLOEXEC);
  if (memfd < 0) throw std::runtime_error(std::string("wan: memfd_create: ") + std::strerror(errno));
  const size_t bytes = shared_bytes(hosts.size());
  if (::ftruncate(memfd, static_cast<off_t>(bytes)) != 0) {
    ::close(memfd);
    throw std::runtime_error(std::string("wan: ftruncate: ") + std::strerror(errno));
  }
  void* page = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (page == MAP_FAILED) {
    ::close(memfd);
    throw std::runtime_error(std::string("wan: mmap: ") + std::strerror(errno));
  }
  shared = static_cast<WanShared*>(page);  // zero-filled by ftruncate: every counter is 0
  shared->magic = kSharedMagic;
  shared->hosts = static_cast<uint32_t>(hosts.size());
  write_tables();

  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) {
    ::close(memfd);
    throw std::runtime_error(std::string("wan: pipe: ") + std::strerror(errno));
  }
  // The child gets the page as fd 3 and the ready pipe as fd 4. dup2 onto a different number
  // clears close-on-exec in the child only, so no other thread's spawn can inherit them.
  const int high_mem = ::fcntl(memfd, F_DUPFD_CLOEXEC, 10);
  const int high_ready = ::fcntl(ready[1], F_DUPFD_CLOEXEC, 10);
  ::close(memfd);
  ::close(ready[1]);

  std::string names;
  for (const Host& h : hosts) names += (names.empty() ? "" : ",") + h.netns;
  std::vector<std::string> argv = {path,
                                   "--netns", names,
                                   "--seed", std::to_string(topology.base.seed),
                                   "--store-bytes", std::to_string(topology.packet_store_bytes()),
                                   "--shared-fd", "3",
                                   "--ready-fd", "4",
                                   "--offload", topology.base.gso ? "1" : "0",
                                   "--parent-pid", std::to_string(::getpid())};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, high_mem, 3);
  posix_spawn_file_actions_adddup2(&actions, high_ready, 4);
  // Own process group: a Ctrl-C at the terminal must not take the links down before the
  // caller has stopped what runs on them. Clean signal state whatever the caller blocks.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const int rc = ::posix_spawn(&forwarder, path.c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(high_mem);
  ::close(high_ready);
  if (rc != 0) {
    ::close(ready[0]);
    forwarder = -1;
    throw std::runtime_error("wan: cannot start " + path + ": " + std::strerror(rc));
  }

  // Wait for "ok" (all TUNs open) or "error: ...", at most 10 s.
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{ready[0], POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    char buf[512];
    const ssize_t got = ::read(ready[0], buf, sizeof buf);
    if (got <= 0) break;
    reply.append(buf, static_cast<size_t>(got));
    if (reply.find('\n') != std::string::npos) break;
  }
  ::close(ready[0]);
  while (!reply.empty() && reply.back() == '\n') reply.pop_back();
  if (reply != "ok")
    throw std::runtime_error("wan: ferry-wan-forwarder did not start: " + (reply.empty() ? "no answer in 10 s" : reply));
}

// Before the forwarder exists: it copies the fixed figures once, at start.
void WanNetwork::Impl::write_tables() const {
  const int n = topology.size();
  LinkParams* links = shared_links(shared);
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d) {
      if (s == d) continue;
      const TopologyLink& l = topology.link(s, d);
      LinkParams& p = links[static_cast<size_t>(s * n + d)];
      p.delay_ns = static_cast<uint64_t>(l.delay_ms * 1e6);
      p.cap_bps = l.rate_bps;
      p.cap_burst_bytes = topology.cap_burst_bytes(s, d);
      p.cap_limit_bytes = topology.cap_limit_bytes(s, d);
      p.loss_threshold53.store(loss_to_threshold53(l.loss), std::memory_order_relaxed);
      p.blocked = l.blocked ? 1 : 0;
    }
  HostParams* host_params = shared_hosts(shared);
  for (int h = 0; h < n; ++h)
    host_params[h] = HostParams{topology.hosts[h].downlink_bps, topology.downlink_burst_bytes(h),
                                topology.downlink_limit_bytes(h), static_cast<uint64_t>(topology.hosts[h].inbound)};
}

void WanNetwork::Impl::configure_host(const Host& h) const {
  const std::string& ns = h.netns;
  const WanConfig& config = topology.base;
  const uint64_t uplink = topology.hosts[h.index].uplink_bps;
  run_checked({"ip", "-n", ns, "link", "set", "lo", "up"});
  // 1000 packets of TUN queue (~60 ms at 200 Mbit/s): the forwarder drains it far faster,
  // but a scheduling hiccup of a few ms must not turn into drops that are not `loss`.
  std::vector<std::string> link = {"ip", "-n", ns, "link", "set", h.tun, "mtu", "1500", "txqueuelen", "1000"};
  // GSO frames of at most 32 KiB: tbf charges a frame its wire size (payload plus every
  // segment's headers) and cuts any frame larger than its bucket back into MTU packets, so
  // frames must stay well under the 64 KiB bucket or the offload silently stops (it did, in
  // runs where cubic's cwnd grew until TCP built 64 KiB frames). 32 KiB is also ~1.3 ms at
  // 200 Mbit/s: line-rate bursts no longer than a real TSO NIC's.
  if (config.gso && uplink) link.insert(link.end(), {"gso_max_size", "32768"});
  link.push_back("up");
  run_checked(link);
  // The namespace-wide default (net.ipv4.tcp_congestion_control) refuses cubic here, so the
  // choice rides on the route every host-to-host socket uses.
  if (!h.ip4.empty()) {
    run_checked({"ip", "-n", ns, "addr", "add", h.ip4 + "/24", "dev", h.tun});
    run_checked({"ip", "-n", ns, "route", "replace", kSubnetText, "dev", h.tun, "proto", "kernel", "scope", "link",
                 "src", h.ip4, "congctl", config.cc});
  }
  // No duplicate address detection: nothing else is on the link, and DAD would hold the
  // address back for a second.
  if (!h.ip6.empty()) {
    enable_ipv6(ns, h.tun);
    run_checked({"ip", "-n", ns, "-6", "addr", "add", h.ip6 + "/64", "dev", h.tun, "nodad"});
    run_checked({"ip", "-n", ns, "-6", "route", "replace", kSubnet6Text, "dev", h.tun, "proto", "kernel", "src",
                 h.ip6, "congctl", config.cc});
  }
  if (uplink) {
    run_checked({"tc", "-n", ns, "qdisc", "replace", "dev", h.tun, "root", "tbf",
                 "rate", std::to_string(uplink) + "bit",
                 "burst", std::to_string(topology.uplink_burst_bytes(h.index)),
                 "limit", std::to_string(topology.uplink_limit_bytes(h.index))});
  }
}

void WanNetwork::Impl::teardown() noexcept {
  if (stopped) return;
  stopped = true;
  try {
    // Programs first: they may still be sending, and must not outlive their host.
    std::vector<std::thread> killers;
    for (const Host& h : hosts)
      if (netns_exists(h.netns)) killers.emplace_back([name = h.netns] { remove_netns(name, 500); });
    // Deleting a name while the forwarder still holds the TUN is fine: the namespace lives on
    // until its last user (the TUN fd) goes, and then the device goes with it.
    for (auto& t : killers) t.join();
  } catch (...) {
  }
  final_stats = snapshot();
  if (forwarder > 0 && !forwarder_exited) {
    ::kill(forwarder, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (::waitpid(forwarder, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(forwarder, SIGKILL);
        ::waitpid(forwarder, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    forwarder_exited = true;
  }
  if (shared) {
    WanStats last = snapshot();
    last.forwarder_user_s = final_stats.forwarder_user_s;
    last.forwarder_sys_s = final_stats.forwarder_sys_s;
    final_stats = last;
    ::munmap(shared, shared_bytes(hosts.size()));
    shared = nullptr;
  }
}

WanNetwork WanNetwork::start(const WanConfig& config) {
  config.validate();
  WanNetwork net = start(Topology::uniform(config));
  net.impl_->from_spec = true;
  return net;
}

WanNetwork WanNetwork::start(const Topology& topology) {
  topology.validate();
  const WanConfig& config = topology.base;
  if (::geteuid() != 0)
    throw std::runtime_error("wan: needs root: network namespaces, TUN devices and tc qdiscs (run as root)");
  if (::access("/dev/net/tun", R_OK | W_OK) != 0)
    throw std::runtime_error("wan: /dev/net/tun is missing (modprobe tun)");
  ensure_cc(config.cc);
  remove_stale_netns();

  auto impl = std::make_unique<Impl>();
  impl->topology = topology;
  const int network = g_network_counter.fetch_add(1);
  const int pid = static_cast<int>(::getpid());
  for (int i = 0; i < topology.size(); ++i) {
    const TopologyHost& t = topology.hosts[i];
    const std::string ip4 = t.has_v4() ? host_ip4(i) : "", ip6 = t.has_v6() ? host_ip6(i) : "";
    impl->hosts.push_back(Host{i, netns_name(pid, network, i), ip4.empty() ? ip6 : ip4, ip4, ip6, kTunName, t.name,
                               t.region});
  }

  try {
    for (const Host& h : impl->hosts) run_checked({"ip", "netns", "add", h.netns});
    impl->spawn_forwarder();
    for (const Host& h : impl->hosts) impl->configure_host(h);
  } catch (...) {
    impl->teardown();
    throw;
  }
  return WanNetwork(std::move(impl));
}

WanNetwork::WanNetwork(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
WanNetwork::WanNetwork(WanNetwork&&) noexcept = default;
WanNetwork& WanNetwork::operator=(WanNetwork&& other) noexcept {
  if (this != &other) {
    stop();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
WanNetwork::~WanNetwork() { stop(); }

void WanNetwork::stop() {
  if (impl_) impl_->teardown();
}

const WanConfig& WanNetwork::config() const { return impl_->topology.base; }
const Topology& WanNetwork::topology() const { return impl_->topology; }
const std::vector<Host>& WanNetwork::hosts() const { return impl_->hosts; }

std::vector<std::string> WanNetwork::exec_prefix(int host) const {
  return {"ip", "netns", "exec", impl_->hosts.at(static_cast<size_t>(host)).netns};
}

std::vector<std::pair<std::string, std::string>> WanNetwork::environment() const {
  std::vector<std::pair<std::string, std::string>> env;
  std::string all_ns, all_ip;
  for (const Host& h : impl_->hosts) {
    all_ns += (all_ns.empty() ? "" : " ") + h.netns;
    all_ip += (all_ip.empty() ? "" : " ") + h.ip;
  }
  env.emplace_back("FERRY_WAN_HOSTS", std::to_string(impl_->hosts.size()));
  env.emplace_back("FERRY_WAN_NETNS", all_ns);
  env.emplace_back("FERRY_WAN_IPS", all_ip);
  if (impl_->from_spec) env.emplace_back("FERRY_WAN_SPEC", impl_->topology.base.to_string());
  else env.emplace_back("FERRY_WAN_TOPOLOGY", impl_->topology.source);
  for (const Host& h : impl_->hosts) {
    env.emplace_back("FERRY_WAN_NETNS_" + std::to_string(h.index), h.netns);
    env.emplace_back("FERRY_WAN_IP_" + std::to_string(h.index), h.ip);
    env.emplace_back("FERRY_WAN_IP4_" + std::to_string(h.index), h.ip4);
    env.emplace_back("FERRY_WAN_IP6_" + std::to_string(h.index), h.ip6);
    env.emplace_back("FERRY_WAN_NAME_" + std::to_string(h.index), h.name);
    env.emplace_back("FERRY_WAN_REGION_" + std::to_string(h.index), h.region);
    env.emplace_back("FERRY_WAN_INBOUND_" + std::to_string(h.index),
                     inbound_name(impl_->topology.hosts[static_cast<size_t>(h.index)].inbound));
  }
  return env;
}

void WanNetwork::set_loss(double loss) {
  if (!(loss >= 0 && loss <= 1)) throw std::invalid_argument("wan: loss must be in [0, 1]");
  const size_t n = impl_->hosts.size();
  if (!impl_->shared) return;
  LinkParams* links = shared_links(impl_->shared);
  for (size_t i = 0; i < n * n; ++i) links[i].loss_threshold53.store(loss_to_threshold53(loss), std::memory_order_relaxed);
}

void WanNetwork::set_link_loss(int from, int to, double loss) {
  const int n = static_cast<int>(impl_->hosts.size());
  if (from < 0 || from >= n || to < 0 || to >= n || from == to) throw std::out_of_range("wan: no such pair of hosts");
  if (!(loss >= 0 && loss <= 1)) throw std::invalid_argument("wan: loss must be in [0, 1]");
  if (impl_->shared)
    shared_links(impl_->shared)[from * n + to].loss_threshold53.store(loss_to_threshold53(loss),
                                                                       std::memory_order_relaxed);
}

void WanNetwork::isolate(int host, bool isolated) {
  if (host < 0 || host >= static_cast<int>(impl_->hosts.size())) throw std::out_of_range("wan: no such host");
  if (impl_->shared) impl_->shared->isolated[host].store(isolated ? 1 : 0, std::memory_order_relaxed);
}

WanStats WanNetwork::stats() const { return impl_->snapshot(); }
pid_t WanNetwork::forwarder_pid() const { return impl_->forwarder; }

bool WanNetwork::forwarder_running() const {
  if (impl_->forwarder <= 0 || impl_->forwarder_exited) return false;
  int status = 0;
  // Reaping here is fine: stop() then sees forwarder_exited and does not wait for it.
  if (::waitpid(impl_->forwarder, &status, WNOHANG) == impl_->forwarder) {
    impl_->forwarder_exited = true;
    return false;
  }
  return true;
}

std::string WanNetwork::forwarder_path() {
  if (const char* env = ::getenv("FERRY_WAN_FORWARDER"); env && *env) return env;
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/') + 1);
    for (const char* rel : {"ferry-wan-forwarder", "../libexec/ferry/ferry-wan-forwarder"}) {
      const std::string p = dir + rel;
      if (::access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return FERRY_WAN_FORWARDER_BUILD_PATH;
}

}  // namespace ferry::wan
