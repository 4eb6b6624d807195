#!/usr/bin/python3
"""ferry-chaos says how a run goes while it runs (stress/chaos/chaos_progress.h).

  check_progress.py JSON -- COMMAND...

COMMAND is a ferry-chaos run longer than its --progress-every. It must exit 0,
print at least one progress line on stderr, each in the documented shape and
its counts never above the final summary's (--json JSON), with some op already
done by the first; its stdout must still be the summary alone.
"""
import json
import re
import subprocess
import sys

TIMEOUT_S = 400
PROGRESS = re.compile(r"^ferry-chaos: (\d+) s(?: of \d+|, quiescing for \d+ s): ops (\d+) ok, (\d+) failed; "
                      r"(\d+) peers live; kills (\d+), joins (\d+), faults (\d+)(?:, master restarts (\d+))?; "
                      r"violations (\d+)$")


def problems_of(done, json_path):
    """What is wrong with the finished run `done`; its --json summary is at json_path."""
    problems = [] if done.returncode == 0 else [f"ferry-chaos exited {done.returncode}"]
    progress = [line for line in done.stderr.splitlines() if line.startswith("ferry-chaos: ") and " ops " in line]
    matches = [PROGRESS.match(line) for line in progress]
    problems += [f"a progress line out of shape: {line!r}" for line, m in zip(progress, matches) if not m]
    if not progress:
        problems.append("no progress line on stderr")
    if not done.stdout.startswith("ferry-chaos: ") or " ops ok " not in done.stdout:
        problems.append("stdout does not start with the summary")
    if done.returncode == 0 and progress and all(matches):
        with open(json_path) as f:
            summary = json.load(f)
        for m in matches:
            ok, failed, kills, joins = (int(m.group(i)) for i in (2, 3, 5, 6))
            if ok > summary["ops_ok"] or failed > summary["ops_failed"] or kills > summary["kills"] or \
                    joins > summary["joins"]:
                problems.append(f"{m.group(0)!r} counts more than the summary's {summary['ops_ok']} ok, "
                                f"{summary['ops_failed']} failed, {summary['kills']} kills, {summary['joins']} joins")
        if int(matches[0].group(2)) == 0:
            problems.append(f"no op done by the first progress line: {matches[0].group(0)!r}")
    return problems


def main(argv):
    if "--" not in argv or argv.index("--") != 2:
        sys.exit(__doc__)
    json_path, command = argv[1], argv[3:]
    print("running:", " ".join(command), flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    sys.stdout.write(done.stdout + done.stderr)
    problems = problems_of(done, json_path)
    if problems:
        sys.exit("FAIL:\n  " + "\n  ".join(problems))
    print("OK: progress lines on stderr, their counts within the summary's")


if __name__ == "__main__":
    main(sys.argv)
