"""Offline explanations against ``vesta explain``: the cases (layouts and 10,000 IDs each, as
the ``vesta`` CLI explained them) are made by the repository's test
(tests/tests/it/client_packages.rs) in the directory ``$VESTA_EXPLAIN_CASES``."""

from __future__ import annotations

import json
import os
import unittest
from pathlib import Path
from typing import Any

from vesta_client import PRESETS, Layout, LayoutError, parse_id, rfc3339

CASES = os.environ.get("VESTA_EXPLAIN_CASES")
VESTA_KEYS = ("version", "type", "genMethod", "time", "seq", "machine")


class ExplainsAsVestaDoes(unittest.TestCase):
    @unittest.skipUnless(CASES, "VESTA_EXPLAIN_CASES not set (tests/tests/it/client_packages.rs)")
    def test_every_case_as_the_cli_explains_it(self) -> None:
        assert CASES is not None
        root = Path(CASES)
        manifest = json.loads((root / "cases.json").read_text())
        self.assertGreaterEqual(len(manifest), 9)
        covered = set()
        for case in manifest:
            with self.subTest(case=case["name"]):
                covered.add(self.check_case(root, case))
        # Every preset, and at least one custom layout.
        self.assertTrue(set(PRESETS) | {None} <= covered, covered)

    def check_case(self, root: Path, case: dict[str, Any]) -> str | None:
        description = json.loads((root / case["layout"]).read_text())
        layout = Layout(description)
        preset = case.get("preset")
        if preset is not None:
            built = Layout.preset(
                preset["name"],
                epoch_ms=preset.get("epoch_ms"),
                type=preset.get("type", "max-peak"),
                version=preset.get("version", 0),
            )
            self.assertEqual(built.description, description, "the package's preset")
        ids = (root / case["ids"]).read_text().split()
        explained = (root / case["explained"]).read_text().splitlines()
        self.assertEqual(len(ids), len(explained))
        self.assertGreaterEqual(len(ids), 10_000)
        for text, line in zip(ids, explained):
            want = json.loads(line)
            got = layout.explain(text)
            self.assertEqual(str(got.id), want["id"])
            self.assertEqual(got.timestamp, want["timestamp"], text)
            if "typeName" in want:
                self.assertEqual(got.layout, "vesta")
                self.assertEqual(got.as_dict(), {k: want[k] for k in VESTA_KEYS}, text)
                self.assertIsNone(got.warning)
            else:
                self.assertEqual(got.layout, want["layout"], text)
                names = [name for name, _ in got.fields]
                others = [k for k in want if k not in ("id", "layout", "timestamp", "warning")]
                self.assertEqual(names, others, text)
                self.assertEqual(got.as_dict(), {k: want[k] for k in others}, text)
                self.assertEqual(got.warning, want.get("warning"), text)
            if preset is not None:
                self.assertEqual(built.explain(got.id), got)
        return None if preset is None else str(preset["name"])


class ReadsIdsAndLayoutsStrictly(unittest.TestCase):
    def test_id_forms(self) -> None:
        self.assertEqual(parse_id("18446744073709551615"), 2**64 - 1)
        self.assertEqual(parse_id("-1"), 2**64 - 1)
        self.assertEqual(parse_id(" 0x10 "), 16)
        for bad in ["", "1e3", "0x", "0x11111111111111111", "18446744073709551616", "-9223372036854775809", "١٢"]:
            with self.assertRaises(ValueError, msg=bad):
                parse_id(bad)
        for bad_int in [-1, 2**64, True]:
            with self.assertRaises(ValueError):
                parse_id(bad_int)

    def test_a_vesta_id_is_read_by_its_type_bit(self) -> None:
        max_peak = Layout.preset("vesta")
        millis = max_peak.explain(1 << 62 | 5 << 20)
        self.assertEqual(millis["type"], 1)
        self.assertEqual(millis["time"], 5)
        self.assertEqual(millis.unix_ms, 1_420_041_600_005)
        self.assertEqual(millis.timestamp, "2014-12-31T16:00:00.005Z")

    def test_a_layout_that_does_not_add_up_is_refused_naming_it(self) -> None:
        good = Layout.preset("leaf").description
        bad = json.loads(json.dumps(good))
        bad["fields"][1]["low_bit"] = 11
        with self.assertRaisesRegex(LayoutError, "workerId sits at bit 11"):
            Layout(bad)
        bad = dict(good, format=2)
        with self.assertRaisesRegex(LayoutError, "format 2"):
            Layout(bad)
        bad = dict(good, unit_ms="1")
        with self.assertRaisesRegex(LayoutError, "unit_ms"):
            Layout(bad)
        with self.assertRaisesRegex(LayoutError, "snowflake"):
            Layout.preset("snowflake")

    def test_timestamps_past_9999_and_at_the_end(self) -> None:
        self.assertEqual(rfc3339(0), "1970-01-01T00:00:00.000Z")
        self.assertEqual(rfc3339(253_402_300_800_000), "+10000-01-01T00:00:00.000Z")
        self.assertEqual(rfc3339(2**64 - 1), "+262142-12-31T23:59:59.999Z")


if __name__ == "__main__":
    unittest.main()
