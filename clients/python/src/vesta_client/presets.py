"""The preset layouts as ``vesta layout --json --layout NAME`` describes them, written from the
same sources as vesta-core's presets (the tests compare the two, key for key)."""

from __future__ import annotations

from typing import Any

from .layout import PRESETS, VESTA_TYPES, LayoutError, rfc3339

#: Each preset's epoch, ms since 1970: Vesta's 2015-01-01T00:00:00+08:00, Twitter's (which
#: Leaf keeps), Sonyflake v1's 2014-09-01, v2's 2025-01-01, UidGenerator's
#: 2016-05-20T00:00:00+08:00.
EPOCHS = {
    "vesta": 1_420_041_600_000,
    "leaf": 1_288_834_974_657,
    "twitter": 1_288_834_974_657,
    "sonyflake": 1_409_529_600_000,
    "sonyflake-v2": 1_735_689_600_000,
    "uid-generator": 1_463_673_600_000,
}

# (name, kind, bits[, value or parts]) from the top bit down.
_Spec = tuple[Any, ...]

_PEERS: dict[str, tuple[int, list[_Spec]]] = {
    "leaf": (1, [("time", "time", 41), ("workerId", "node", 10), ("sequence", "seq", 12)]),
    "twitter": (
        1,
        [
            ("time", "time", 41),
            ("node", "node", 10, [("datacenterId", 5), ("workerId", 5)]),
            ("sequence", "seq", 12),
        ],
    ),
    "sonyflake": (
        10,
        [("time", "time", 39), ("sequence", "seq", 8), ("machine-id", "node", 16)],
    ),
    "sonyflake-v2": (
        10,
        [("time", "time", 39), ("sequence", "seq", 8), ("machine", "node", 16)],
    ),
    "uid-generator": (
        1000,
        [("time", "time", 28), ("workerId", "node", 22), ("sequence", "seq", 13)],
    ),
}


def _vesta_fields(code: int, version: int) -> tuple[int, list[_Spec]]:
    time_bits, seq_bits, unit_ms = (30, 20, 1000) if code == 0 else (40, 10, 1)
    return unit_ms, [
        ("version", "fixed", 1, version),
        ("type", "fixed", 1, code),
        ("genMethod", "method", 2),
        ("time", "time", time_bits),
        ("seq", "seq", seq_bits),
        ("machine", "node", 10),
    ]


def _place(specs: list[_Spec]) -> list[dict[str, Any]]:
    """The fields with their low bits: the last ends at bit 0."""
    low = sum(s[2] for s in specs)
    out = []
    for s in specs:
        name, kind, bits = s[0], s[1], s[2]
        low -= bits
        field: dict[str, Any] = {"name": name, "kind": kind, "bits": bits, "low_bit": low}
        if kind == "fixed":
            field["value"] = s[3]
        elif len(s) > 3:
            part_low = low + bits
            parts = []
            for part, part_bits in s[3]:
                part_low -= part_bits
                parts.append({"name": part, "bits": part_bits, "low_bit": part_low})
            field["parts"] = parts
        out.append(field)
    return out


def description(
    name: str, *, epoch_ms: int | None = None, id_type: str = "max-peak", version: int = 0
) -> dict[str, Any]:
    """The JSON object of preset ``name``."""
    if name not in PRESETS:
        raise LayoutError(f"layout `{name}` is not valid: expected one of {', '.join(PRESETS)}")
    epoch = EPOCHS[name] if epoch_ms is None else epoch_ms
    d: dict[str, Any] = {
        "format": 1,
        "name": name,
        "preset": name,
        "type": None,
        "epoch_ms": epoch,
        "epoch": rfc3339(epoch),
    }
    if name == "vesta":
        if id_type not in VESTA_TYPES:
            raise LayoutError(f"type `{id_type}` is not valid: expected max-peak or min-granularity")
        if version not in (0, 1):
            raise LayoutError(f"version {version} is out of range: allowed 0..=1")
        code = VESTA_TYPES.index(id_type)
        unit_ms, specs = _vesta_fields(code, version)
        types = []
        for c, t in enumerate(VESTA_TYPES):
            u, s = _vesta_fields(c, version)
            types.append({"type": t, "code": c, "unit_ms": u, "fields": _place(s)})
        d.update(type=id_type, unit_ms=unit_ms, signed=False, fields=_place(specs), types=types)
    else:
        unit_ms, specs = _PEERS[name]
        d.update(unit_ms=unit_ms, signed=True, fields=_place(specs))
    return d
