"""The package is typed (``py.typed``): mypy ``--strict`` (the settings of pyproject.toml)
accepts its sources and these tests, which use its API as a caller would."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


class Typed(unittest.TestCase):
    @unittest.skipUnless(importlib.util.find_spec("mypy"), "mypy is not installed")
    def test_mypy_strict_accepts_the_package(self) -> None:
        with tempfile.TemporaryDirectory(prefix="vesta-mypy") as cache:
            run = subprocess.run(
                [sys.executable, "-m", "mypy", "--cache-dir", cache, "src/vesta_client", "tests"],
                cwd=PACKAGE,
                capture_output=True,
                text=True,
            )
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertTrue((PACKAGE / "src" / "vesta_client" / "py.typed").exists())


if __name__ == "__main__":
    unittest.main()
