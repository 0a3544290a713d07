"""vesta-rs from Python: a gRPC client of ``vesta serve rest`` (:class:`Client`) and IDs
explained offline in any vesta layout (:class:`Layout`).

>>> from vesta_client import Layout
>>> Layout.preset("leaf").explain(1280834012576002048)["workerId"]
331
"""

from .client import Client, Instant
from .errors import VestaError
from .layout import PRESETS, Explanation, Field, Layout, LayoutError, Part, parse_id, rfc3339

__all__ = [
    "PRESETS",
    "Client",
    "Explanation",
    "Field",
    "Instant",
    "Layout",
    "LayoutError",
    "Part",
    "VestaError",
    "parse_id",
    "rfc3339",
]
__version__ = "0.1.0"
