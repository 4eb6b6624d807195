#!/usr/bin/python3
"""The version is honest: no note promises a feature of a version not yet out.

  check_version_notes.py VERSION SOURCE_DIR

VERSION is project(VERSION) ("MAJOR.MINOR.PATCH"); include/ferry/ferry.h's
FERRY_VERSION_* must say the same. Fails, naming file:line, on
  - an "added in X.Y" (or "changed in", "new in", "since", ...) note newer than
    VERSION, in ferry.h, the Python package's sources, docs/ and every README;
  - a wire-protocol number written by hand in that prose ("wire protocol 9",
    "protocol 6"): it goes stale at the next bump; quote it from the code
    (`ferry-master --version` prints it) or leave it out. CHANGELOG.md is the one
    place that names protocol numbers, since it records history;
  - a CHANGELOG.md without a section ("## MAJOR.MINOR..." heading) for VERSION's
    MAJOR.MINOR, or with one for a later version.
"""
import os
import re
import sys

# "since 1.5 s" is a time, not a version: a number followed by a unit is no note.
_NUMBER = r"v?(\d+)\.(\d+)(?:\.(\d+))?\b(?!\s*(?:s|ms|us|ns|%|x|[KMG]i?B|[KMG]bit)\b)"
NOTE = re.compile(rf"\b(?:added|new|introduced|changed|deprecated|removed)\s+in\s+{_NUMBER}|\bsince\s+{_NUMBER}",
                  re.IGNORECASE)
PROTOCOL_NUMBER = re.compile(r"\bprotocol\s+(?:version\s+)?v?\d+\b", re.IGNORECASE)
CHANGELOG_SECTION = re.compile(r"^##\s+\[?v?(\d+)\.(\d+)(?:\.(\d+))?\b", re.MULTILINE)
SKIPPED_DIRS = {".git", "third_party", "__pycache__", "node_modules", ".venv", "venv"}


def parse_version(text):
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", text)
    if not match:
        sys.exit(f"check_version_notes.py: VERSION {text!r} is not MAJOR.MINOR.PATCH")
    return tuple(int(part) for part in match.groups())


def header_version(root):
    header = open(os.path.join(root, "include", "ferry", "ferry.h"), encoding="utf-8").read()
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        match = re.search(rf"^#define FERRY_VERSION_{part} (\d+)\s*$", header, re.MULTILINE)
        parts.append(int(match.group(1)) if match else None)
    return tuple(parts)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def noted_files(root):
    """ferry.h, the Python package's sources, docs/ and every README (build trees left out)."""
    yield os.path.join(root, "include", "ferry", "ferry.h")
    for top, suffixes in ((os.path.join(root, "bindings", "python", "ferry"), (".py",)),
                          (os.path.join(root, "docs"), (".md",))):
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(files):
                if name.endswith(suffixes):
                    yield os.path.join(folder, name)
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("build"))
        for name in sorted(files):
            if name.startswith("README"):
                yield os.path.join(folder, name)


def check_notes(root, version):
    problems = []
    shown = ".".join(map(str, version))
    for path in noted_files(root):
        text = open(path, encoding="utf-8").read()
        where = os.path.relpath(path, root)
        for match in NOTE.finditer(text):
            groups = [g for g in match.groups() if g is not None]
            noted = tuple(int(g) for g in groups) + (0,) * (3 - len(groups))
            if noted > version:
                problems.append(f"{where}:{line_of(text, match.start())}: {' '.join(match.group(0).split())!r} is newer than "
                                f"version {shown} (project(VERSION), FERRY_VERSION_*)")
        for match in PROTOCOL_NUMBER.finditer(text):
            problems.append(f"{where}:{line_of(text, match.start())}: {match.group(0)!r}: a wire-protocol "
                            "number written by hand; quote it from the code or leave it out "
                            "(only CHANGELOG.md names protocol numbers)")
    return problems


def check_changelog(root, version):
    path = os.path.join(root, "CHANGELOG.md")
    if not os.path.exists(path):
        return ["CHANGELOG.md: missing (it says what each minor version added and which wire protocol it speaks)"]
    text = open(path, encoding="utf-8").read()
    sections = [(tuple(int(g or 0) for g in m.groups()), line_of(text, m.start()))
                for m in CHANGELOG_SECTION.finditer(text)]
    problems = []
    if not any(found[:2] == version[:2] for found, _ in sections):
        problems.append(f"CHANGELOG.md: no section (a '## {version[0]}.{version[1]}...' heading) for version "
                        f"{'.'.join(map(str, version))}")
    for found, line in sections:
        if found > version:
            problems.append(f"CHANGELOG.md:{line}: a section for {'.'.join(map(str, found))}, newer than version "
                            f"{'.'.join(map(str, version))}")
    return problems


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    version, root = parse_version(argv[1]), argv[2]
    problems = []
    header = header_version(root)
    if header != version:
        problems.append(f"include/ferry/ferry.h: FERRY_VERSION_* say {'.'.join(map(str, header))}, "
                        f"project(VERSION) says {argv[1]}: change both together")
    problems += check_notes(root, version)
    problems += check_changelog(root, version)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"version {argv[1]}: no note newer, no protocol number in prose, CHANGELOG.md has its section")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
