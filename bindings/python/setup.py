"""Build hook: bundles libferry.so into the package when one is available at install time.

Which library is bundled (first match):
  1. $FERRY_LIBRARY (path to libferry.so), or
  2. the repository's CMake build, ../../build/capi/libferry.so (relative to this file).
Set FERRY_BUNDLE_LIBRARY=0 to install without one: the package then finds
libferry at run time ($FERRY_LIBRARY, the repository build, the system).
A wheel with a bundled library is tagged for this platform; without, it is pure.
All metadata lives in pyproject.toml.
"""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent


def library_to_bundle():
    if os.environ.get("FERRY_BUNDLE_LIBRARY", "1") == "0":
        return None
    env = os.environ.get("FERRY_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise SystemExit(f"FERRY_LIBRARY={env} does not exist; build libferry or unset it")
        return Path(env)
    built = HERE.parent.parent / "build" / "capi" / "libferry.so"
    return built if built.is_file() else None


LIBRARY = library_to_bundle()


class BuildPyBundlingLibrary(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "ferry" / "_bundled"
        if LIBRARY is None:
            shutil.rmtree(target, ignore_errors=True)  # never ship a stale copy from an earlier build
            print("ferry: no libferry bundled; it will be looked up at run time")
            return
        target.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(LIBRARY.resolve(), target / "libferry.so")  # the real file, not the symlink
        print(f"ferry: bundled {LIBRARY} as ferry/_bundled/libferry.so")


class PlatformDistribution(Distribution):
    def has_ext_modules(self):
        return LIBRARY is not None  # a bundled .so makes the wheel platform-specific


setup(cmdclass={"build_py": BuildPyBundlingLibrary}, distclass=PlatformDistribution)
