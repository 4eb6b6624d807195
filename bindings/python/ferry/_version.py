"""The package's version: the one place it is written.

pyproject.toml reads it (``dynamic = ["version"]``), ``ferry.__version__`` is
it, and the loader refuses a libferry whose version cannot serve it (see
:func:`ferry._lib.version_problem`). The binding follows the library's
versions: 0.4.x of the package speaks the C API of libferry 0.4.

Pure Python, no imports: setuptools reads this file without running it.
"""

__version__ = "0.4.0"
