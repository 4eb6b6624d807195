#!/usr/bin/python3
"""The command-line contract every ferry tool keeps (tools/common/tool_cli.h).

  check_tool_cli.py contract VERSION -- TOOL...
      Each TOOL: `--version` exits 0 and prints "NAME VERSION" (ferry-master and
      ferry-master-load, which link the wire layer, add " (wire protocol N)");
      `--no-such-option` exits 2 and says why on stderr. ferry-hello's `--help`
      exits 0 with its usage on stdout, without dialing "--help" as a master.
  check_tool_cli.py master-start VERSION -- FERRY_MASTER
      Started on [::1]:0, the master logs its version and wire protocol in one
      line, and prints its address bracketed, as a peer's master_address takes
      it. Exits 77 (skipped) when this host has no IPv6 loopback.
"""
import os
import re
import signal
import socket
import subprocess
import sys

TIMEOUT_S = 30
SKIPPED = 77
# The tools whose --version can name the wire protocol: they link src/wire. The
# others link only the C API, which does not say it.
KNOW_THE_PROTOCOL = {"ferry-master", "ferry-master-load"}


def run(argv):
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)


def check_version(tool, version):
    name = os.path.basename(tool)
    done = run([tool, "--version"])
    protocol = r" \(wire protocol \d+\)" if name in KNOW_THE_PROTOCOL else ""
    want = f"^{re.escape(name)} {re.escape(version)}{protocol}\n$"
    if done.returncode != 0 or not re.match(want, done.stdout):
        return [f"{name} --version: exit {done.returncode}, stdout {done.stdout!r}, want {want!r}"]
    return []


def check_bad_argument(tool):
    name = os.path.basename(tool)
    done = run([tool, "--no-such-option"])
    if done.returncode != 2 or not done.stderr.strip():
        return [f"{name} --no-such-option: exit {done.returncode} (want 2), stderr {done.stderr.strip()!r}"]
    return []


def check_hello_help(tool):
    done = run([tool, "--help"])
    if done.returncode != 0 or "usage:" not in done.stdout or "MASTER_HOST:PORT" not in done.stdout:
        return [f"ferry-hello --help: exit {done.returncode}, stdout {done.stdout!r}, stderr {done.stderr!r}"]
    return []


def contract(version, tools):
    problems = []
    for tool in tools:
        problems += check_version(tool, version) + check_bad_argument(tool)
        if os.path.basename(tool) == "ferry-hello":
            problems += check_hello_help(tool)
    if not any(os.path.basename(tool) == "ferry-hello" for tool in tools):
        problems.append("ferry-hello is not among the tools: its --help goes unchecked")
    return problems, f"{len(tools)} tools keep the contract"


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def master_start(version, master):
    if not has_ipv6_loopback():
        print("SKIPPED: no IPv6 loopback (::1) on this host")
        sys.exit(SKIPPED)
    child = subprocess.Popen([master, "--listen", "[::1]:0", "--log-level", "info"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        first = child.stdout.readline()
    finally:
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=TIMEOUT_S)
    sys.stdout.write(first + err)
    problems = []
    match = re.match(r"^ferry-master listening on \[::1\]:(\d+)\n$", first)
    if not match or int(match.group(1)) == 0:
        problems.append(f"the address line is {first!r}, want 'ferry-master listening on [::1]:PORT'")
    want = f"ferry-master {version} (wire protocol "
    lines = [line for line in err.splitlines() if want in line]
    if len(lines) != 1 or "info" not in lines[0]:
        problems.append(f"want one info line with {want!r} in the master's log, found {lines!r}")
    return problems, "the master logs its version and prints [::1]:PORT"


def main(argv):
    if "--" not in argv or len(argv) < 5:
        sys.exit(__doc__)
    split = argv.index("--")
    mode, version, tools = argv[1], argv[2], argv[split + 1:]
    if mode == "contract":
        problems, ok = contract(version, tools)
    elif mode == "master-start":
        problems, ok = master_start(version, tools[0])
    else:
        sys.exit(__doc__)
    if problems:
        sys.exit("FAIL:\n  " + "\n  ".join(problems))
    print("OK:", ok)


if __name__ == "__main__":
    main(sys.argv)
