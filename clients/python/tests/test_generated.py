"""The stubs in ``src/vesta_client/pb/`` are what the repository's .proto makes now (with the
pinned grpcio-tools of the test venv); ``tools/generate.py`` rewrites them."""

from __future__ import annotations

import importlib.util
import unittest
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "generate.py"


class GeneratedStubs(unittest.TestCase):
    def test_stubs_are_fresh(self) -> None:
        spec = importlib.util.spec_from_file_location("generate", TOOL)
        assert spec is not None and spec.loader is not None
        generate = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(generate)
        self.assertEqual(generate.stale(), [], "run clients/python/tools/generate.py")


if __name__ == "__main__":
    unittest.main()
