"""pyproject.toml installs every package of the source tree (an editable install
hides a missing one; `pip install .` would not)."""
import os

import pytest

tomllib = pytest.importorskip("tomllib")      # Python 3.11+

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_package_is_listed_in_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = set()
    for top in ("compiler", "runtime", "module_api"):
        for folder, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if "__init__.py" in files:
                found.add(os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert found <= listed, f"not installed: {sorted(found - listed)}"
