#!/usr/bin/python3
"""Runs ferry-bench and checks what it produced.

  check_bench.py json FILE -- COMMAND...        COMMAND must exit 0 and write FILE: a complete
                                                JSON record, every run bit-identical and correct.
  check_bench.py sync FILE -- COMMAND...        --workload sync: COMMAND must exit 0 and write FILE with
                                                every key, a correct ferry-sync run per size (every byte
                                                fetched, compressed when asked) and, with --baseline tcp,
                                                correct tcp runs and their ratios.
  check_bench.py slow-pair FILE A B -- COMMAND... As json, on an emulated WAN topology whose pair A-B is
                                                capped far below the hosts' links: the ring uses it (3 peers
                                                on 3 hosts always do), and the link matrix shows it.
  check_bench.py connections FILE exactly|above N -- COMMAND...
                                                As json, and every ring link's connection count, as last
                                                measured, is exactly N or above N.
  check_bench.py ring-avoids FILE [A B ...] -- COMMAND...
                                                As json, and every ferry run's ring (each peer once)
                                                never has host A send to host B (nor C to D, ...).
  check_bench.py relayed FILE N -- COMMAND...   As json, and every ferry run's ring holds each peer once
                                                with exactly N hops relayed by a third member of it.
  check_bench.py master-load FILE -- COMMAND... ferry-master-load: COMMAND must exit 0 and write FILE with
                                                every key, every fake peer welcomed and admitted, and
                                                every collective of every round committed (never timings).
  check_bench.py rows-stream FILE -- COMMAND... As json, for a run of several sizes, the last one large: the
                                                first table row reaches our end of the pipe while the run is
                                                still on (at that moment ferry-bench still has child
                                                processes: its master lives until every peer is done with
                                                every size), and the table has one row per size.
  check_bench.py fails RC PATTERN -- COMMAND... COMMAND must exit RC, with PATTERN in its stderr.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

TIMEOUT_S = 240

RUN_KEYS = {
    "impl": str, "peers": int, "bytes": int, "dtype": str, "op": str, "quant": str,
    "connections": int, "concurrent": int, "time_s_median": float, "time_s_min": float,
    "algbw_GBps": float, "busbw_GBps": float, "wire_bytes_per_peer": (float, type(None)),
    "bit_identical": bool, "correct": bool, "cpu_s_per_GB": (float, type(None)), "times_s": list, "links": str,
    "ring": list, "ring_order": str, "relayed_hops": list, "relayed_bytes": int,
}
ARGS_KEYS = ["peers", "sizes", "dtype", "op", "connections", "concurrent", "iters", "warmup", "baseline",
             "shared_memory", "wan", "wan_topology", "link_rate"]
LINK_KEYS = {
    "from": dict, "to": dict, "goodput_bytes_per_s": float, "delivery_rate_bytes_per_s": float, "rtt_ms": float,
    "retransmit_ratio": float, "bytes": int, "shared_memory": bool, "age_s": float, "connections": int,
}
LINK_END_KEYS = {"rank": int, "peer_index": int, "peer_id": int, "host": (str, type(None))}
# ferry measures goodput over the all-reduces of at least this many bytes (ferry_link_info).
GOODPUT_MIN_BYTES = 1 << 20
MACHINE_KEYS = ["nproc", "kernel"]


# How long the checked command ran: a figure it reports was measured within that time.
RUN_SECONDS = 0.0


def run(command):
    global RUN_SECONDS
    print("running:", " ".join(command), flush=True)
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S)
    RUN_SECONDS = time.monotonic() - began
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr)
    return done


# A table row: " SIZE COUNT type redop ..."; the title and header lines start with '#'.
TABLE_ROW = re.compile(r"^ +\d+ +\d+ ")


def children_of(pid):
    """Every process whose parent is pid (zombies included: not reaped yet)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # it ended while we looked
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            found.append(int(entry))
    return found


def run_streaming(command):
    """Runs command as run() does, and also returns how many child processes it had when its
    first table row arrived (None: no row), and how many rows it printed."""
    print("running:", " ".join(command), flush=True)
    with tempfile.TemporaryFile(mode="w+") as err:
        bench = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True, stdin=subprocess.DEVNULL)
        lines, first_row_children = [], None
        for line in bench.stdout:
            lines.append(line)
            if TABLE_ROW.match(line) and first_row_children is None:
                first_row_children = len(children_of(bench.pid))
        bench.wait(timeout=TIMEOUT_S)
        err.seek(0)
        done = subprocess.CompletedProcess(command, bench.returncode, "".join(lines), err.read())
    sys.stdout.write(done.stdout)
    sys.stdout.write(done.stderr)
    return done, first_row_children, sum(1 for line in lines if TABLE_ROW.match(line))


def check_rows_stream(record, first_row_children, rows):
    if first_row_children is None:
        return ["no table row on stdout"]
    problems = [] if first_row_children else ["the first row came after every child process had ended: held back"]
    if rows != len(record["args"]["sizes"]):
        problems.append(f"{rows} table rows for {len(record['args']['sizes'])} sizes")
    return problems


def is_a(value, kinds):
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        return True  # JSON writes 2.0 as 2
    if bool not in kinds and isinstance(value, bool):
        return False
    return isinstance(value, kinds)


def wrong_types(run_, where, keys):
    missing = [f"{where}: missing '{key}'" for key in keys if key not in run_]
    return missing + [f"{where}: '{key}' is {run_[key]!r}" for key, kinds in keys.items()
                      if key in run_ and not is_a(run_[key], kinds)]


def missing_keys(record, top_keys, args_keys):
    missing = [f"top level: missing '{key}'" for key in top_keys if key not in record]
    if missing:
        return missing
    missing += [f"args: missing '{key}'" for key in args_keys if key not in record["args"]]
    return missing + [f"machine: missing '{key}'" for key in MACHINE_KEYS if key not in record["machine"]]


def check_record(record):
    problems = []

    def expect(condition, message):
        if not condition:
            problems.append(message)

    problems += missing_keys(record, ("runs", "link_matrix", "machine", "args"), ARGS_KEYS)
    if problems:
        return problems
    args, runs = record["args"], record["runs"]

    peers, sizes, iters = args["peers"], sorted(args["sizes"]), args["iters"]
    on_wan = bool(args["wan"] or args["wan_topology"])
    # Peers on loopback share memory when asked; across the emulated WAN each has its own namespace.
    ferry_links = "shared_memory" if args["shared_memory"] and not on_wan else "tcp"
    problems += check_link_matrix(record["link_matrix"], args, ferry_links)
    kinds = [("ferry", "best")] + {"gloo": [("gloo", "rank")], "arrival": [("ferry", "arrival")]}.get(args["baseline"], [])
    for impl, order in kinds:
        got = sorted(r.get("bytes") for r in runs if r.get("impl") == impl and r.get("ring_order") == order)
        expect(got == sizes, f"{impl} ({order} order): runs for sizes {got}, expected {sizes}")
    for i, run_ in enumerate(runs):
        where = f"runs[{i}] ({run_.get('impl')}, {run_.get('bytes')} B)"
        wrong = wrong_types(run_, where, RUN_KEYS)
        if wrong:
            problems += wrong
            continue
        expect(run_["impl"] in ("ferry", "gloo"), f"{where}: impl {run_['impl']!r}")
        ring = run_["ring"]
        expect(len(ring) == peers and len(set(ring)) == peers and all(isinstance(m, str) and m for m in ring),
               f"{where}: ring {ring!r} is not every peer once")
        expect(run_["bit_identical"] is True, f"{where}: not bit-identical across peers")
        expect(run_["correct"] is True, f"{where}: not the exact expected result")
        expect(run_["peers"] == peers, f"{where}: peers {run_['peers']}")
        expect(run_["dtype"] == args["dtype"] and run_["op"] == args["op"], f"{where}: dtype/op")
        expect(run_["quant"] == "none", f"{where}: quant {run_['quant']!r}")
        expect(len(run_["times_s"]) == iters and all(t > 0 for t in run_["times_s"]),
               f"{where}: times_s {run_['times_s']}")
        expect(0 < run_["time_s_min"] <= run_["time_s_median"], f"{where}: min/median times")
        # Both report CPU per byte: the comparison the loopback target asks for.
        expect(run_["cpu_s_per_GB"] is not None and run_["cpu_s_per_GB"] >= 0, f"{where}: cpu_s_per_GB")
        busbw = run_["algbw_GBps"] * 2 * (peers - 1) / peers
        expect(abs(run_["busbw_GBps"] - busbw) <= 1e-6 * max(1.0, busbw), f"{where}: busbw != algbw*2(N-1)/N")
        algbw = run_["concurrent"] * run_["bytes"] / run_["time_s_median"] / 1e9
        expect(abs(run_["algbw_GBps"] - algbw) <= 1e-6 * max(1.0, algbw), f"{where}: algbw != C*S/median")
        if run_["impl"] == "ferry":
            expect(run_["concurrent"] == args["concurrent"], f"{where}: concurrent {run_['concurrent']}")
            expect(run_["connections"] == args["connections"], f"{where}: connections {run_['connections']}")
            ideal = 2 * (peers - 1) / peers * run_["concurrent"] * run_["bytes"]
            wire = run_["wire_bytes_per_peer"]
            expect(wire is not None and abs(wire - ideal) <= 0.01 * ideal,
                   f"{where}: wire_bytes_per_peer {wire}, a ring sends {ideal}")
            expect(run_["links"] == ferry_links, f"{where}: links {run_['links']!r}, expected {ferry_links!r}")
        else:
            expect(run_["concurrent"] == 1 and run_["connections"] == 1, f"{where}: gloo runs are 1 x 1")
            expect(run_["links"] == "tcp", f"{where}: gloo's links {run_['links']!r}")
    return problems


def ring_bytes(args):
    """What the run's all-reduces sent over each ring link: 2(N-1)/N of every op, warmup included."""
    peers = args["peers"]
    return sum((args["iters"] + args["warmup"]) * args["concurrent"] * 2 * (peers - 1) / peers * size
               for size in args["sizes"])


def is_ring_link(link, peers):
    """Whether the entry is a ring link (rank r to r + 1), which the all-reduces ran over;
    the others were probed when their peers were admitted (src/peer/link_probe.h)."""
    return link["to"]["rank"] == (link["from"]["rank"] + 1) % peers


def ring_links(links, args):
    """The entries of the links the all-reduces ran over."""
    return [link for link in links if is_ring_link(link, args["peers"])]


def check_link_matrix(links, args, ferry_links):
    """Every ring link measured, by its sender, with figures a link can have."""
    problems = []

    def expect(condition, message):
        if not condition:
            problems.append(message)

    peers = args["peers"]
    on_wan = bool(args["wan"] or args["wan_topology"])
    expect(isinstance(links, list) and peers <= len(links) <= peers * (peers - 1),
           f"link_matrix: {len(links) if isinstance(links, list) else links!r} entries for {peers} peers")
    if not isinstance(links, list):
        return problems
    for i, link in enumerate(links):
        where = f"link_matrix[{i}]"
        wrong = wrong_types(link, where, LINK_KEYS)
        for end in ("from", "to"):
            if isinstance(link.get(end), dict):
                wrong += wrong_types(link[end], f"{where}.{end}", LINK_END_KEYS)
        if wrong:
            problems += wrong
            continue
        where += f" (rank {link['from']['rank']} -> {link['to']['rank']})"
        for end in (link["from"], link["to"]):
            expect(0 <= end["rank"] < peers and 0 <= end["peer_index"] < peers and end["peer_id"] > 0,
                   f"{where}: end {end}")
            expect((end["host"] is not None) == on_wan, f"{where}: host {end['host']!r}")
        expect(link["from"]["rank"] != link["to"]["rank"], f"{where}: a link to itself")
        expect(link["shared_memory"] == (ferry_links == "shared_memory"),
               f"{where}: shared_memory {link['shared_memory']}, the runs' links are {ferry_links!r}")
        expect(0 <= link["retransmit_ratio"] <= 1, f"{where}: retransmit_ratio {link['retransmit_ratio']}")
        # Measured during this run (a loaded machine's run of the lossy link lasts over a minute).
        expect(0 <= link["age_s"] < max(60, RUN_SECONDS), f"{where}: age_s {link['age_s']}, the run {RUN_SECONDS:.0f} s")
        if not link["shared_memory"]:
            expect(link["delivery_rate_bytes_per_s"] > 0 and link["rtt_ms"] > 0,
                   f"{where}: no TCP figures (delivery rate {link['delivery_rate_bytes_per_s']}, rtt {link['rtt_ms']})")
        if not is_ring_link(link, peers):
            # A probe: its own 8 connections over TCP; none to a peer on this host (shared memory).
            probe_lanes = 0 if link["shared_memory"] else 8
            expect(link["connections"] == probe_lanes, f"{where}: probed over {link['connections']} connections")
            if not link["shared_memory"]:
                expect(0 < link["goodput_bytes_per_s"] < 1e11, f"{where}: probed goodput {link['goodput_bytes_per_s']}")
            continue
        # The ring's bytes plus its barriers' at most.
        expect(link["bytes"] <= ring_bytes(args) * 1.01 + 4096,
               f"{where}: {link['bytes']} bytes, the ring sent {ring_bytes(args):.0f} over each link")
        if max(args["sizes"]) * args["concurrent"] >= GOODPUT_MIN_BYTES:
            expect(0 < link["goodput_bytes_per_s"] < 1e11, f"{where}: goodput {link['goodput_bytes_per_s']}")
        # Pinned counts stay pinned; adapted ones stay within 1..64 (shared memory writes on one lane).
        pinned = args["connections"]
        if link["shared_memory"]:
            expect(link["connections"] == 1, f"{where}: {link['connections']} connections over shared memory")
        elif pinned:
            expect(link["connections"] == pinned, f"{where}: {link['connections']} connections, pinned at {pinned}")
        else:
            expect(1 <= link["connections"] <= 64, f"{where}: {link['connections']} connections")
    if problems:
        return problems
    ring = ring_links(links, args)
    senders = sorted(link["from"]["rank"] for link in ring)
    receivers = sorted(link["to"]["rank"] for link in ring)
    expect(senders == list(range(peers)) and receivers == list(range(peers)),
           f"link_matrix: the links that carried {ring_bytes(args):.0f} bytes go from ranks {senders} to {receivers}; "
           f"a ring's go from every rank to every rank once")
    pairs = [(link["from"]["rank"], link["to"]["rank"]) for link in links]
    expect(len(set(pairs)) == len(pairs), f"link_matrix: an ordered pair twice: {sorted(pairs)}")
    return problems


def check_slow_pair(record, a, b):
    """The capped pair's direction on the ring: TCP delivers at most a fraction of what the others do.

    Goodput cannot show it: a ring moves at its slowest link, so every link's goodput is about the cap."""
    problems = []
    links = ring_links(record["link_matrix"], record["args"])
    slow = [link for link in links if {link["from"]["host"], link["to"]["host"]} == {a, b}]
    others = [link for link in links if link not in slow]
    if len(slow) != 1 or not others:
        return [f"link_matrix: {len(slow)} entries between {a} and {b}, {len(others)} others; expected 1 and some"]
    rate = record["args"]["link_rate"]
    if rate is None or not rate["from"].startswith("cap "):
        problems.append(f"args.link_rate {rate!r}: the pair's cap is the smallest figure")
        return problems
    cap_Bps = rate["bits_per_s"] / 8
    fastest = max(link["delivery_rate_bytes_per_s"] for link in others)
    print(f"{a}-{b}: delivery {slow[0]['delivery_rate_bytes_per_s']:.3g} B/s, goodput "
          f"{slow[0]['goodput_bytes_per_s']:.3g} B/s (cap {cap_Bps:.3g}); fastest other delivery {fastest:.3g} B/s")
    if not slow[0]["delivery_rate_bytes_per_s"] < fastest / 2:
        problems.append(f"{a}-{b} delivers {slow[0]['delivery_rate_bytes_per_s']} B/s, "
                        f"not well below the others' {fastest}")
    # The token bucket lets a burst through, hence the slack.
    if not slow[0]["goodput_bytes_per_s"] < 2 * cap_Bps:
        problems.append(f"{a}-{b}: goodput {slow[0]['goodput_bytes_per_s']} B/s through a cap of {cap_Bps}")
    return problems


def check_ring_avoids(record, blocked):
    """Every ferry run's ring has every peer once and never sends from host A to host B for
    any (A, B) in `blocked`."""
    problems = []
    for run_ in record["runs"]:
        if run_["impl"] != "ferry":
            continue
        ring = run_["ring"]
        print(f"ferry ({run_['ring_order']} order), {run_['bytes']} B: ring {' -> '.join(ring)}")
        if len(ring) != record["args"]["peers"] or len(set(ring)) != len(ring):
            problems.append(f"ring {ring} does not hold each of the {record['args']['peers']} peers once")
        for a, b in blocked:
            if any(ring[i] == a and ring[(i + 1) % len(ring)] == b for i in range(len(ring))):
                problems.append(f"ring {ring} sends from {a} to {b}, which cannot connect")
    return problems


def check_relayed(record, count):
    """Every ferry run's ring holds every peer once, with exactly `count` hops relayed, each
    by a third member of the ring; with any, the relays forwarded bytes."""
    problems = []
    for run_ in record["runs"]:
        if run_["impl"] != "ferry":
            continue
        ring, hops = run_["ring"], run_["relayed_hops"]
        print(f"ferry, {run_['bytes']} B: ring {' -> '.join(ring)}; relayed: "
              f"{[(h['from'], h['to'], h['relay']) for h in hops]}, {run_['relayed_bytes']} B relayed")
        if len(ring) != record["args"]["peers"] or len(set(ring)) != len(ring):
            problems.append(f"ring {ring} does not hold each of the {record['args']['peers']} peers once")
        if len(hops) != count:
            problems.append(f"{len(hops)} relayed hops, expected {count}")
        for h in hops:
            if h["relay"] in (h["from"], h["to"]) or h["relay"] not in ring:
                problems.append(f"hop {h} is not relayed by a third member of the ring")
        if count and run_["relayed_bytes"] <= 0:
            problems.append("relays forwarded no bytes")
    return problems


def check_connections(record, relation, count):
    """Every ring link's connection count (as last measured) is `exactly` or `above` count."""
    links = ring_links(record["link_matrix"], record["args"])
    counts = [link["connections"] for link in links]
    print(f"ring links' connections: {counts}")
    ok = all(c == count for c in counts) if relation == "exactly" else all(c > count for c in counts)
    return [] if ok and counts else [f"connections {counts}, expected every one {relation} {count}"]


SYNC_RUN_KEYS = {
    "impl": str, "bytes": int, "holders": int, "tensors": int, "compression": int, "connections": int,
    "total_connections": int, "iters": int, "time_s_median": float, "time_s_min": float,
    "throughput_GBps": float, "throughput_Mbps": float, "wire_bytes_received": (float, type(None)),
    "compression_ratio": (float, type(None)), "sync_duration_s_median": (float, type(None)),
    "newcomer_cpu_s_per_GB": (float, type(None)), "holder_cpu_s_per_GB": (float, type(None)),
    "correct": bool, "content_hash": str, "times_s": list,
}
SYNC_ARGS_KEYS = ["workload", "holders", "compression", "state_file", "tensors", "sizes", "iters", "baseline"]


def check_sync_record(record):
    problems = []

    def expect(condition, message):
        if not condition:
            problems.append(message)

    problems += missing_keys(record, ("workload", "runs", "ratios", "machine", "args"), SYNC_ARGS_KEYS)
    if problems:
        return problems
    args, runs = record["args"], record["runs"]
    sizes, iters = sorted(args["sizes"]), args["iters"]
    got = sorted(r.get("bytes") for r in runs if r.get("impl") == "ferry-sync")
    expect(got == sizes, f"ferry-sync: runs for sizes {got}, expected {sizes}")
    tcp_runs = [r for r in runs if r.get("impl") == "tcp"]
    if args["baseline"] == "tcp":
        expect(len(tcp_runs) >= len(sizes), f"tcp: {len(tcp_runs)} runs for {len(sizes)} sizes")
        expect(len(record["ratios"]) == len(tcp_runs), f"ratios: {len(record['ratios'])} for {len(tcp_runs)} tcp runs")
    for i, run_ in enumerate(runs):
        where = f"runs[{i}] ({run_.get('impl')}, {run_.get('bytes')} B)"
        wrong = wrong_types(run_, where, SYNC_RUN_KEYS)
        if wrong:
            problems += wrong
            continue
        expect(run_["correct"] is True, f"{where}: not correct")
        expect(len(run_["content_hash"]) == 16, f"{where}: content_hash {run_['content_hash']!r}")
        expect(len(run_["times_s"]) == iters and all(t > 0 for t in run_["times_s"]), f"{where}: times_s")
        expect(0 < run_["time_s_min"] <= run_["time_s_median"], f"{where}: min/median times")
        throughput = run_["bytes"] / run_["time_s_median"] / 1e9
        expect(abs(run_["throughput_GBps"] - throughput) <= 1e-6 * max(1.0, throughput), f"{where}: throughput")
        if run_["impl"] == "ferry-sync":
            expect(run_["holders"] == args["holders"] and run_["compression"] == args["compression"],
                   f"{where}: holders/compression")
            wire = run_["wire_bytes_received"]
            if args["compression"] == 0:
                # Every byte once, plus a small header per chunk.
                expect(wire is not None and run_["bytes"] <= wire <= run_["bytes"] * 1.01 + 4096,
                       f"{where}: received {wire} wire bytes for {run_['bytes']}")
            else:
                expect(wire is not None and 0 < wire < run_["bytes"],
                       f"{where}: received {wire} wire bytes, compressed, for {run_['bytes']}")
            expect(run_["compression_ratio"] is not None and abs(run_["compression_ratio"] * wire - run_["bytes"]) < 1,
                   f"{where}: compression_ratio")
        else:
            expect(run_["impl"] == "tcp" and run_["wire_bytes_received"] is None, f"{where}: impl")
    hashes = {r["bytes"]: r["content_hash"] for r in runs if r.get("impl") == "ferry-sync"}
    for run_ in tcp_runs:
        expect(run_.get("content_hash") == hashes.get(run_.get("bytes")), "tcp: not the holders' content")
    return problems


MASTER_LOAD_KEYS = {
    "tool": str, "args": dict, "machine": dict, "welcomed": int, "admitted": int, "admit_votes": int,
    "admit_s": float, "admit_master_cpu_s": float, "master_cpu_ms_per_join": float, "vote_s": float,
    "vote_master_cpu_ms": float, "round_s": float, "round_master_cpu_ms": float, "collective_master_cpu_ms": float,
    "committed": int, "aborted": int, "expected_commits": int, "abort_log": str,
}
MASTER_LOAD_ARGS_KEYS = ["peers", "groups", "rounds", "votes", "threads", "master_log_level"]


def check_master_load_record(record):
    problems = missing_keys(record, MASTER_LOAD_KEYS, MASTER_LOAD_ARGS_KEYS) or wrong_types(
        record, "record", MASTER_LOAD_KEYS)
    if problems:
        return problems
    args = record["args"]

    def expect(condition, message):
        if not condition:
            problems.append(message)

    peers, rounds = args["peers"], args["rounds"]
    expect(record["tool"] == "ferry-master-load", f"tool {record['tool']!r}")
    expect(record["welcomed"] == peers, f"{record['welcomed']} of {peers} fake peers welcomed")
    expect(record["admitted"] == peers, f"{record['admitted']} of {peers} fake peers admitted")
    expect(record["admit_votes"] >= 1, f"admit_votes {record['admit_votes']}")
    expect(record["expected_commits"] == peers * rounds, f"expected_commits {record['expected_commits']}")
    expect(record["committed"] == peers * rounds, f"{record['committed']} of {peers * rounds} verdicts committed")
    expect(record["aborted"] == 0, f"{record['aborted']} verdicts aborted; the master's log ends:\n"
                                   f"{record['abort_log']}")
    for key in ("admit_s", "admit_master_cpu_s", "vote_s", "round_s"):
        expect(record[key] >= 0, f"{key} {record[key]}")
    return problems


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    split = argv.index("--")
    mode, params, command = argv[1], argv[2:split], argv[split + 1:]
    if mode == "rows-stream":
        done, first_row_children, rows = run_streaming(command)
    else:
        done = run(command)
    if mode in ("json", "sync", "slow-pair", "connections", "ring-avoids", "rows-stream", "relayed"):
        if done.returncode != 0:
            sys.exit(f"FAIL: ferry-bench exited {done.returncode}")
        with open(params[0]) as f:
            record = json.load(f)
        problems = (check_sync_record if mode == "sync" else check_record)(record)
        if mode == "slow-pair" and not problems:
            problems = check_slow_pair(record, params[1], params[2])
        if mode == "ring-avoids" and not problems:
            hosts = params[1:]
            problems = check_ring_avoids(record, list(zip(hosts[0::2], hosts[1::2])))
        if mode == "relayed" and not problems:
            problems = check_relayed(record, int(params[1]))
        if mode == "connections" and not problems:
            problems = check_connections(record, params[1], int(params[2]))
        if mode == "rows-stream" and not problems:
            problems = check_rows_stream(record, first_row_children, rows)
        if problems:
            sys.exit("FAIL:\n  " + "\n  ".join(problems))
        print(f"OK: {len(record['runs'])} runs, every key there, every result correct")
    elif mode == "master-load":
        if done.returncode != 0:
            sys.exit(f"FAIL: ferry-master-load exited {done.returncode}")
        with open(params[0]) as f:
            record = json.load(f)
        problems = check_master_load_record(record)
        if problems:
            sys.exit("FAIL:\n  " + "\n  ".join(problems))
        print(f"OK: {record['admitted']} fake peers admitted, {record['committed']} verdicts committed")
    elif mode == "fails":
        want_rc, pattern = int(params[0]), params[1]
        if done.returncode != want_rc:
            sys.exit(f"FAIL: exit status {done.returncode}, expected {want_rc}")
        if pattern not in done.stderr:
            sys.exit(f"FAIL: stderr does not say {pattern!r}")
        print(f"OK: exit status {want_rc}, and stderr says {pattern!r}")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
