"""Finding and loading libferry, the C struct layouts, and installing the package with pip."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

import ferry
from ferry import _lib
from harness import PACKAGE_ROOT, REPO_ROOT, child_env


def run_python(code: str, env: dict, cwd=None, python=sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_loads_the_library_named_by_ferry_library():
    wanted = os.environ.get("FERRY_LIBRARY")
    if wanted:
        assert ferry.library_path() == os.path.abspath(wanted)
    assert os.path.exists(ferry.library_path())


def test_the_package_the_header_and_the_library_have_one_version():
    header = (REPO_ROOT / "include" / "ferry" / "ferry.h").read_text()
    parts = [re.search(rf"#define FERRY_VERSION_{p} (\d+)", header).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    assert ferry.library_version() == ".".join(parts)
    assert ferry.__version__ == ".".join(parts)
    # pyproject.toml writes no version of its own: it reads the package's.
    pyproject = tomllib.loads((PACKAGE_ROOT / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"] and "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ferry._version.__version__"}


@pytest.mark.parametrize("library, binding", [
    ("0.2.0", "0.2.0"), ("0.2.9", "0.2.0"), ("0.3.0", "0.2.0"), ("1.4.2", "1.2.0"), ("0.2.0", "0.2.5"),
])
def test_a_library_of_the_same_major_and_at_least_the_minor_is_accepted(library, binding):
    assert _lib.version_problem(library, binding) is None


@pytest.mark.parametrize("library, binding", [
    ("0.1.9", "0.2.0"), ("1.2.0", "0.2.0"), ("0.2.0", "1.2.0"), ("1.1.0", "1.2.0"),
])
def test_an_older_minor_or_another_major_is_refused_naming_both_versions(library, binding):
    problem = _lib.version_problem(library, binding)
    assert problem is not None and library in problem and binding in problem


def test_a_garbled_library_version_is_refused():
    assert "not MAJOR.MINOR.PATCH" in _lib.version_problem("dev", "0.2.0")


def test_loading_a_library_older_than_the_package_fails_naming_both_versions_and_the_path():
    # The real library, but a package that claims to need a later minor version.
    done = run_python("from ferry import _lib\n_lib.BINDING_VERSION = '0.99.0'\nimport ferry\nferry.library_path()",
                      child_env())
    assert done.returncode != 0
    assert "LibraryNotFoundError" in done.stderr
    message = done.stderr[done.stderr.index("LibraryNotFoundError"):]
    for needed in (ferry.library_path(), f"libferry {ferry.library_version()}", "ferry package (0.99.0)"):
        assert needed in message, message


@pytest.mark.parametrize("cls, init", [
    (_lib.MasterParams, "ferry_master_params_init"),
    (_lib.CommParams, "ferry_comm_params_init"),
    (_lib.AllreduceDesc, "ferry_allreduce_desc_init"),
    (_lib.AllreduceJob, "ferry_allreduce_job_init"),
    (_lib.Tensor, "ferry_tensor_init"),
    (_lib.SharedState, "ferry_shared_state_init"),
])
def test_ctypes_structs_have_the_size_of_the_c_structs(cls, init):
    # An *_init_sized call sets a larger block's struct_size to the library's sizeof: a
    # field added to ferry.h and not here (or the reverse) fails this test.
    assert _lib.library_struct_size(init) == ctypes.sizeof(cls)


def test_defaults_come_from_the_library():
    params = _lib.defaults(_lib.CommParams, "ferry_comm_params_init")
    # p2p_connections 0: each link adapts its count (docs/design.md, "Connections per link").
    assert (params.p2p_connections, params.timeout_ms, params.io_threads) == (0, 60000, 2)
    assert params.p2p_listen_host == b"::"  # dual-stack (docs/operating.md, "Addresses and IPv6")
    assert params.struct_size == ctypes.sizeof(_lib.CommParams)


def test_a_bad_ferry_library_is_an_error_naming_it():
    env = child_env()
    env["FERRY_LIBRARY"] = "/nonexistent/libferry.so"
    done = run_python("import ferry; ferry.library_path()", env)
    assert done.returncode != 0
    assert "LibraryNotFoundError" in done.stderr
    assert "$FERRY_LIBRARY: /nonexistent/libferry.so: no such file" in done.stderr


def test_without_any_library_the_error_lists_every_place_tried(tmp_path):
    # A copy of the package outside the repository, with no bundled library.
    shutil.copytree(PACKAGE_ROOT / "ferry", tmp_path / "ferry", ignore=shutil.ignore_patterns("_bundled"))
    env = {k: v for k, v in os.environ.items() if k not in ("FERRY_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
    done = run_python("import ferry\ntry:\n ferry.Master('127.0.0.1:0')\nexcept ferry.LibraryNotFoundError as e:\n"
                      " print(e)\n raise SystemExit(3)", env, cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "bundled with the package" in done.stdout
    assert "system library search" in done.stdout
    assert "FERRY_LIBRARY" in done.stdout  # the message says how to fix it


def test_import_does_not_load_torch_or_the_library():
    env = child_env()
    env["FERRY_LIBRARY"] = "/nonexistent/libferry.so"  # import must still work
    done = run_python("import sys, ferry; print('torch' in sys.modules, 'numpy' in sys.modules, ferry.__version__)",
                      env)
    assert done.stdout.split() == ["False", "False", ferry.__version__], done.stderr


def test_from_the_source_tree_the_repository_build_is_a_candidate():
    env = child_env()
    del env["FERRY_LIBRARY"]
    done = run_python("from ferry import _lib; print(_lib.candidates())", env, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    where = [w for w, _ in eval(done.stdout)]
    paths = [p for _, p in eval(done.stdout)]
    assert where == ["bundled with the package", "repository build", "system library search"]
    assert paths[1] == str(REPO_ROOT / "build" / "capi" / "libferry.so")


@pytest.mark.deadline(120)
def test_pip_install_into_a_venv_bundles_the_library(tmp_path):
    # What README.md tells users: a venv over Debian's packages, pip without build isolation, offline.
    source = tmp_path / "src"
    shutil.copytree(PACKAGE_ROOT, source, ignore=shutil.ignore_patterns(
        "tests", "build", "*.egg-info", "__pycache__", "_bundled", ".pytest_cache"))
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True, timeout=60)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}
    env["FERRY_LIBRARY"] = ferry.library_path()  # the library to bundle
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-build-isolation",
                              "--no-index", "--quiet", str(source)], env=env, capture_output=True, text=True,
                             timeout=120)
    assert install.returncode == 0, install.stdout + install.stderr
    del env["FERRY_LIBRARY"]  # the installed package must find its own copy
    done = run_python(
        "import ferry, numpy as np\n"
        "with ferry.Master('127.0.0.1:0') as m:\n"
        "  with ferry.Communicator(f'127.0.0.1:{m.port}', listen_host='127.0.0.1') as c:\n"
        "    c.connect(); a = np.arange(4, dtype=np.float32); c.all_reduce(a, op='sum')\n"
        "    print(ferry.library_path()); print(a.tolist())\n"
        "import importlib.metadata; print(importlib.metadata.version('ferry'))\n"
        "meta = importlib.metadata.metadata('ferry')\n"
        "print(meta['Requires-Python']); print(sorted(c for c in meta.get_all('Classifier') if '3.' in c))",
        env, cwd=tmp_path, python=str(venv / "bin" / "python"))
    assert done.returncode == 0, done.stderr
    path, values, installed_version, requires_python, classifiers = done.stdout.splitlines()
    assert path.startswith(str(venv)) and path.endswith("ferry/_bundled/libferry.so")
    assert values == "[0.0, 1.0, 2.0, 3.0]"
    assert installed_version == ferry.__version__  # the wheel's metadata has the package's one version
    # The Python versions it claims: those test_python_versions.py runs a run under.
    assert requires_python == ">=3.9"
    assert classifiers == str([f"Programming Language :: Python :: 3.{m}" for m in (10, 11, 12, 13, 9)])
