"""IDs explained offline: a layout as data (a preset, or the JSON ``vesta layout --json``
prints) and the rules ``vesta explain`` follows, so an ID is read with no server.

The JSON format and the rules are docs/layout-json.md; every value here is checked against
``vesta explain`` on 10,000 IDs per layout by the repository's tests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterator, Mapping, Sequence, Union

__all__ = [
    "Explanation",
    "Field",
    "Layout",
    "LayoutError",
    "Part",
    "PRESETS",
    "parse_id",
]

U64_MAX = (1 << 64) - 1
#: The JSON format this module reads (``"format"`` in ``vesta layout --json``).
FORMAT = 1
#: The presets by name (Vesta's, and the peers' from their own source, with their epochs).
PRESETS = ("vesta", "leaf", "twitter", "sonyflake", "sonyflake-v2", "uid-generator")
#: Vesta's two types, by the value of the ID's type bit (bit 62).
VESTA_TYPES = ("max-peak", "min-granularity")
# The last instant a timestamp can show (+262142-12-31T23:59:59.999Z): later ones are shown
# as it, as vesta does.
_MAX_TIMESTAMP_MS = 8_210_266_876_799_999
_KINDS = ("time", "seq", "node", "fixed", "method")

IdLike = Union[int, str]


class LayoutError(ValueError):
    """A layout that cannot be read: the message names the key or field at fault."""


def parse_id(id: IdLike) -> int:
    """An ID from an int (0..=2**64-1) or text: unsigned decimal, negative decimal (a Java
    ``long``, read as its 64 bits) or ``0x`` hex. Anything else is a ``ValueError`` naming it."""
    if isinstance(id, bool):
        raise ValueError(f"id {id!r} is not valid: expected an int or its text")
    if isinstance(id, int):
        if not 0 <= id <= U64_MAX:
            raise ValueError(f"id {id} is out of range: allowed 0..={U64_MAX}")
        return id
    text = id.strip()
    try:
        if text.startswith("0x"):
            digits = text[2:]
            if not 1 <= len(digits) <= 16:
                raise ValueError
            return int(digits, 16)
        if text.startswith("-"):
            value = int(text, 10)
            if value < -(1 << 63):
                raise ValueError
            return value & U64_MAX
        if not text.isdigit() or not text.isascii():
            raise ValueError
        value = int(text, 10)
        if value > U64_MAX:
            raise ValueError
        return value
    except ValueError:
        raise ValueError(
            f"id `{text}` is not valid: expected an unsigned decimal up to {U64_MAX}, a "
            "negative decimal down to -9223372036854775808 (Java long) or 0x hex up to 16 "
            "digits"
        ) from None


@dataclass(frozen=True)
class Part:
    """A named part of the node field (Twitter's ``datacenterId`` and ``workerId``)."""

    name: str
    bits: int
    low_bit: int

    def get(self, id: int) -> int:
        return (id >> self.low_bit) & ((1 << self.bits) - 1)


@dataclass(frozen=True)
class Field:
    """One field of a layout: ``kind`` is time, seq, node, fixed or method; ``value`` is a
    fixed field's value (``None`` otherwise); ``parts`` a node's named parts."""

    name: str
    kind: str
    bits: int
    low_bit: int
    value: int | None = None
    parts: tuple[Part, ...] = ()

    def get(self, id: int) -> int:
        return (id >> self.low_bit) & ((1 << self.bits) - 1)

    @property
    def mask(self) -> int:
        return ((1 << self.bits) - 1) << self.low_bit


@dataclass(frozen=True)
class Explanation:
    """An ID read in its layout, as ``vesta explain`` and the server's ``Explain`` read it.

    ``fields`` holds every field and node part with its value, from the top bit down (parts
    after their node); ``unix_ms`` is the start of the ID's time unit; ``warning`` says why
    the ID looks foreign to the layout (``None`` when it does not)."""

    id: int
    layout: str
    fields: tuple[tuple[str, int], ...]
    unix_ms: int
    timestamp: str
    warning: str | None = None

    @property
    def id_text(self) -> str:
        return str(self.id)

    def __getitem__(self, name: str) -> int:
        """The value of the field or node part called ``name``."""
        for field, value in self.fields:
            if field == name:
                return value
        raise KeyError(f"no field {name!r} in the {self.layout} layout")

    def as_dict(self) -> dict[str, int]:
        return dict(self.fields)

    @property
    def datetime(self) -> datetime:
        """The instant as an aware UTC ``datetime`` (``ValueError`` past the year 9999)."""
        return datetime.fromtimestamp(self.unix_ms / 1000, tz=timezone.utc)


@dataclass(frozen=True)
class _Variant:
    unit_ms: int
    fields: tuple[Field, ...]


class Layout:
    """A layout read from JSON or a preset; :meth:`explain` reads any 64-bit value with it."""

    def __init__(self, description: Mapping[str, Any]) -> None:
        """A layout from the parsed JSON of ``vesta layout --json`` (docs/layout-json.md);
        every key is checked, and a layout that is not consistent raises ``LayoutError``."""
        d = description
        fmt = _get(d, "format", int)
        if fmt != FORMAT:
            raise LayoutError(f"format {fmt} is not known: this package reads format {FORMAT}")
        self.name: str = _get(d, "name", str)
        self.preset_name: str | None = _get(d, "preset", str, optional=True)
        self.type: str | None = _get(d, "type", str, optional=True)
        self.epoch_ms: int = _get(d, "epoch_ms", int)
        if not 0 <= self.epoch_ms <= U64_MAX:
            raise LayoutError(f"epoch_ms {self.epoch_ms} is out of range: allowed 0..={U64_MAX}")
        self.signed: bool = _get(d, "signed", bool)
        self.unit_ms: int = _unit(_get(d, "unit_ms", int), "unit_ms")
        self.fields: tuple[Field, ...] = _fields(_get(d, "fields", list), self.signed, "fields")
        self._types: tuple[_Variant, ...] = ()
        types = d.get("types")
        if types is not None:
            self._types = _types(types, self.signed)
        self.description: dict[str, Any] = dict(d)

    @classmethod
    def from_json(cls, text: str | bytes) -> Layout:
        """A layout from the text ``vesta layout --json`` prints."""
        try:
            parsed = json.loads(text)
        except ValueError as e:
            raise LayoutError(f"not JSON: {e}") from None
        if not isinstance(parsed, dict):
            raise LayoutError("the layout JSON must be an object")
        return cls(parsed)

    @classmethod
    def preset(
        cls,
        name: str,
        *,
        epoch_ms: int | None = None,
        type: str = "max-peak",
        version: int = 0,
    ) -> Layout:
        """A preset by name (:data:`PRESETS`), counting from its own epoch unless ``epoch_ms``
        is given; ``type`` and ``version`` are Vesta's (its layout in force and version bit)."""
        from . import presets

        return cls(presets.description(name, epoch_ms=epoch_ms, id_type=type, version=version))

    def explain(self, id: IdLike) -> Explanation:
        """Reads ``id`` (an int or its text, see :func:`parse_id`) in this layout: Vesta's
        by the ID's own type bit."""
        value = parse_id(id)
        unit_ms, fields = self._read_with(value)
        pairs: list[tuple[str, int]] = []
        time = 0
        for f in fields:
            v = f.get(value)
            pairs.append((f.name, v))
            pairs.extend((p.name, p.get(value)) for p in f.parts)
            if f.kind == "time":
                time = v
        unix_ms = min(self.epoch_ms + time * unit_ms, U64_MAX)
        return Explanation(
            id=value,
            layout=self.name,
            fields=tuple(pairs),
            unix_ms=unix_ms,
            timestamp=rfc3339(unix_ms),
            warning=self._warning(value, fields),
        )

    def _read_with(self, id: int) -> tuple[int, tuple[Field, ...]]:
        if self._types:
            variant = self._types[(id >> 62) & 1]
            return variant.unit_ms, variant.fields
        return self.unit_ms, self.fields

    def _warning(self, id: int, fields: Sequence[Field]) -> str | None:
        if self._types:
            # Vesta's fields cover all 64 bits, and its version bit may be either.
            return None
        used = 0
        for f in fields:
            used |= f.mask
        stray = id & ~used & U64_MAX
        if stray:
            return (
                f"bits outside the {self.name} layout are set (0x{stray:016x}): not an ID of "
                "this layout"
            )
        for f in fields:
            if f.kind == "fixed" and f.get(id) != f.value:
                return (
                    f"fixed field {f.name} is {f.get(id)}, but the {self.name} layout's IDs "
                    f"carry {f.value}"
                )
        return None

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields)

    def __repr__(self) -> str:
        bits = ", ".join(f"{f.name} {f.low_bit}-{f.low_bit + f.bits - 1}" for f in self.fields)
        return f"Layout({self.name}: {bits})"


def rfc3339(unix_ms: int) -> str:
    """``unix_ms`` as RFC 3339 UTC text with milliseconds, as vesta writes it: years past 9999
    with a ``+``, instants past +262142-12-31T23:59:59.999Z shown as it."""
    ms = min(unix_ms, _MAX_TIMESTAMP_MS)
    days, rest = divmod(ms, 86_400_000)
    year, month, day = _civil_from_days(days)
    hour, rest = divmod(rest, 3_600_000)
    minute, rest = divmod(rest, 60_000)
    second, milli = divmod(rest, 1000)
    y = f"{year:04d}" if year <= 9999 else f"+{year}"
    return f"{y}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{milli:03d}Z"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """Year, month, day of ``days`` since 1970-01-01 (proleptic Gregorian; H. Hinnant)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


def _get(d: Mapping[str, Any], key: str, kind: type, *, optional: bool = False) -> Any:
    if key not in d or (optional and d[key] is None):
        if optional:
            return None
        raise LayoutError(f"the layout JSON has no `{key}`")
    value = d[key]
    # bool is an int in Python: neither stands for the other here.
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
        raise LayoutError(f"`{key}` must be {kind.__name__}, not {value!r}")
    return value


def _unit(unit_ms: int, where: str) -> int:
    if not 1 <= unit_ms <= 86_400_000:
        raise LayoutError(f"{where} {unit_ms} is out of range: allowed 1..=86400000")
    return unit_ms


def _fields(raw: list[Any], signed: bool, where: str) -> tuple[Field, ...]:
    """The fields, checked: from the top bit down, each where the widths below it put it,
    exactly one time, seq and node."""
    fields = []
    for n, f in enumerate(raw):
        at = f"{where}[{n}]"
        if not isinstance(f, dict):
            raise LayoutError(f"{at} must be an object")
        kind = _get(f, "kind", str)
        if kind not in _KINDS:
            raise LayoutError(f"{at}.kind `{kind}` is not one of {', '.join(_KINDS)}")
        value = _get(f, "value", int, optional=True)
        if (kind == "fixed") != (value is not None):
            raise LayoutError(f"{at}: a fixed field, and only it, has a `value`")
        parts = tuple(
            Part(_get(p, "name", str), _get(p, "bits", int), _get(p, "low_bit", int))
            for p in f.get("parts") or ()
        )
        fields.append(
            Field(
                name=_get(f, "name", str),
                kind=kind,
                bits=_get(f, "bits", int),
                low_bit=_get(f, "low_bit", int),
                value=value,
                parts=parts,
            )
        )
    total = sum(f.bits for f in fields)
    if total > (63 if signed else 64):
        raise LayoutError(f"{where}: the fields take {total} bits, more than the ID has")
    low = total
    for f in fields:
        low -= f.bits
        if f.bits < 1 or f.low_bit != low:
            raise LayoutError(
                f"{where}: field {f.name} sits at bit {f.low_bit} with {f.bits} bits; the "
                f"widths below it put it at {low}"
            )
        if f.value is not None and f.value >> f.bits:
            raise LayoutError(f"{where}: fixed field {f.name} value {f.value} does not fit")
        part_low = f.low_bit + f.bits
        for p in f.parts:
            part_low -= p.bits
            if p.bits < 1 or p.low_bit != part_low:
                raise LayoutError(f"{where}: part {p.name} of {f.name} is misplaced")
        if f.parts and part_low != f.low_bit:
            raise LayoutError(f"{where}: the parts of {f.name} do not fill it")
    for kind in ("time", "seq", "node"):
        found = sum(1 for f in fields if f.kind == kind)
        if found != 1:
            raise LayoutError(f"{where}: a layout needs exactly one {kind} field, found {found}")
    return tuple(fields)


def _types(raw: Any, signed: bool) -> tuple[_Variant, ...]:
    """Vesta's family: one variant per value of the type bit, in code order."""
    if not isinstance(raw, list) or len(raw) != 2:
        raise LayoutError("`types` must list Vesta's two types")
    variants = []
    for code, t in enumerate(raw):
        at = f"types[{code}]"
        if not isinstance(t, dict) or _get(t, "code", int) != code:
            raise LayoutError(f"{at} must be the type of code {code}")
        fields = _fields(_get(t, "fields", list), signed, f"{at}.fields")
        type_field = [f for f in fields if f.name == "type"]
        if not type_field or (type_field[0].low_bit, type_field[0].value) != (62, code):
            raise LayoutError(f"{at}: Vesta's type bit (62) must hold {code}")
        variants.append(_Variant(_unit(_get(t, "unit_ms", int), f"{at}.unit_ms"), fields))
    return tuple(variants)
