// IDs explained offline: a layout as data (a preset, or the JSON `vesta layout --json` prints)
// and the rules `vesta explain` follows, so an ID is read with no server. Every value is a
// BigInt: an ID, a time or a field above 2^53 would be another number as a JavaScript
// `number`. The format and the rules: docs/layout-json.md.
"use strict";

const U64_MAX = (1n << 64n) - 1n;
/** The JSON format this module reads (`"format"` in `vesta layout --json`). */
const FORMAT = 1;
/** The presets by name. */
const PRESETS = Object.freeze(["vesta", "leaf", "twitter", "sonyflake", "sonyflake-v2", "uid-generator"]);
/** Vesta's two types, by the value of the ID's type bit (bit 62). */
const VESTA_TYPES = Object.freeze(["max-peak", "min-granularity"]);
// The last instant a timestamp can show (+262142-12-31T23:59:59.999Z): later ones are shown
// as it, as vesta does.
const MAX_TIMESTAMP_MS = 8210266876799999n;
const KINDS = ["time", "seq", "node", "fixed", "method"];

/** A layout that cannot be read: the message names the key or field at fault. */
class LayoutError extends Error {
  constructor(message) {
    super(message);
    this.name = "LayoutError";
  }
}

/**
 * An ID from a bigint (0..=2^64-1), a safe integer `number`, or text: unsigned decimal,
 * negative decimal (a Java `long`, read as its 64 bits) or `0x` hex. A `number` above 2^53 is
 * refused: it has already been rounded to another ID.
 */
function parseId(id) {
  if (typeof id === "bigint") {
    if (id < 0n || id > U64_MAX) throw new RangeError(`id ${id} is out of range: allowed 0..=${U64_MAX}`);
    return id;
  }
  if (typeof id === "number") {
    if (!Number.isSafeInteger(id) || id < 0) {
      throw new RangeError(
        `id ${id} is not exact as a JavaScript number (above 2^53 it is already another ID): pass a bigint or a string`,
      );
    }
    return BigInt(id);
  }
  if (typeof id !== "string") throw new TypeError(`id must be a bigint or a string, not ${typeof id}`);
  const text = id.trim();
  const bad = () =>
    new RangeError(
      `id \`${text}\` is not valid: expected an unsigned decimal up to ${U64_MAX}, a negative decimal down to -9223372036854775808 (Java long) or 0x hex up to 16 digits`,
    );
  if (text.startsWith("0x")) {
    if (!/^0x[0-9a-fA-F]{1,16}$/.test(text)) throw bad();
    return BigInt(text);
  }
  if (text.startsWith("-")) {
    if (!/^-[0-9]+$/.test(text)) throw bad();
    const v = BigInt(text);
    if (v < -(1n << 63n)) throw bad();
    return v & U64_MAX;
  }
  if (!/^[0-9]+$/.test(text)) throw bad();
  const v = BigInt(text);
  if (v > U64_MAX) throw bad();
  return v;
}

/** An ID read in its layout, as `vesta explain` and the server's `Explain` read it. */
class Explanation {
  constructor({ id, layout, fields, unixMs, timestamp, warning }) {
    /** The ID. */
    this.id = id;
    /** Its decimal text. */
    this.idText = id.toString();
    /** The layout's name (`vesta`, `leaf`, a custom name). */
    this.layout = layout;
    /** Every field and node part from the top bit down (parts after their node). */
    this.fields = fields;
    /** The start of the ID's time unit, ms since 1970. */
    this.unixMs = unixMs;
    /** The same as RFC 3339 UTC text with milliseconds. */
    this.timestamp = timestamp;
    /** Why the ID looks foreign to the layout; `null` when it does not. */
    this.warning = warning;
  }

  /** The value of the field or node part `name`. */
  get(name) {
    const f = this.fields.find((x) => x.name === name);
    if (f === undefined) throw new RangeError(`no field ${JSON.stringify(name)} in the ${this.layout} layout`);
    return f.value;
  }

  /** The instant as a `Date` (exact: within the range a `Date` holds). */
  get date() {
    return new Date(Number(this.unixMs));
  }

  /** Plain data, every 64-bit value as decimal text. */
  toJSON() {
    return {
      id: this.idText,
      layout: this.layout,
      fields: this.fields.map((f) => ({ name: f.name, value: f.value.toString() })),
      unixMs: this.unixMs.toString(),
      timestamp: this.timestamp,
      warning: this.warning,
    };
  }
}

function field(f) {
  const mask = ((1n << BigInt(f.bits)) - 1n) << BigInt(f.lowBit);
  return { ...f, mask, get: (id) => (id & mask) >> BigInt(f.lowBit) };
}

/** A layout read from JSON or a preset; `explain` reads any 64-bit value with it. */
class Layout {
  /**
   * A layout from the parsed JSON of `vesta layout --json` (docs/layout-json.md); every key
   * is checked, and one that is not consistent throws a `LayoutError`.
   */
  constructor(description) {
    const d = description;
    if (d === null || typeof d !== "object" || Array.isArray(d)) throw new LayoutError("the layout JSON must be an object");
    const format = get(d, "format", "integer");
    if (format !== FORMAT) throw new LayoutError(`format ${format} is not known: this package reads format ${FORMAT}`);
    this.name = get(d, "name", "string");
    this.preset = get(d, "preset", "string", true);
    this.type = get(d, "type", "string", true);
    this.epochMs = BigInt(get(d, "epoch_ms", "integer"));
    this.signed = get(d, "signed", "boolean");
    this.unitMs = unit(get(d, "unit_ms", "integer"), "unit_ms");
    this.fields = checkFields(get(d, "fields", "array"), this.signed, "fields");
    this.types = d.types === undefined || d.types === null ? null : checkTypes(d.types, this.signed);
    this.description = d;
  }

  /** A layout from the text `vesta layout --json` prints. */
  static fromJSON(text) {
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new LayoutError(`not JSON: ${e.message}`);
    }
    return new Layout(parsed);
  }

  /**
   * A preset by name (`PRESETS`), counting from its own epoch unless `epochMs` is given;
   * `type` and `version` are Vesta's (its layout in force and version bit).
   */
  static preset(name, options = {}) {
    return new Layout(require("./presets").description(name, options));
  }

  /** Reads `id` (a bigint or its text, see `parseId`) in this layout: Vesta's by its type bit. */
  explain(id) {
    const value = parseId(id);
    const { unitMs, fields } = this.readWith(value);
    const values = [];
    let time = 0n;
    for (const f of fields) {
      const v = f.get(value);
      values.push({ name: f.name, value: v });
      for (const p of f.parts) values.push({ name: p.name, value: p.get(value) });
      if (f.kind === "time") time = v;
    }
    let unixMs = this.epochMs + time * BigInt(unitMs);
    if (unixMs > U64_MAX) unixMs = U64_MAX;
    return new Explanation({
      id: value,
      layout: this.name,
      fields: values,
      unixMs,
      timestamp: rfc3339(unixMs),
      warning: this.warning(value, fields),
    });
  }

  readWith(id) {
    if (this.types !== null) return this.types[Number((id >> 62n) & 1n)];
    return { unitMs: this.unitMs, fields: this.fields };
  }

  warning(id, fields) {
    // Vesta's fields cover all 64 bits, and its version bit may be either.
    if (this.types !== null) return null;
    const used = fields.reduce((acc, f) => acc | f.mask, 0n);
    const stray = id & ~used & U64_MAX;
    if (stray !== 0n) {
      return `bits outside the ${this.name} layout are set (0x${stray.toString(16).padStart(16, "0")}): not an ID of this layout`;
    }
    for (const f of fields) {
      if (f.kind === "fixed" && f.get(id) !== f.value) {
        return `fixed field ${f.name} is ${f.get(id)}, but the ${this.name} layout's IDs carry ${f.value}`;
      }
    }
    return null;
  }
}

/**
 * `unixMs` as RFC 3339 UTC text with milliseconds, as vesta writes it: years past 9999 with a
 * `+`, instants past +262142-12-31T23:59:59.999Z shown as it.
 */
function rfc3339(unixMs) {
  const big = BigInt(unixMs);
  const ms = Number(big > MAX_TIMESTAMP_MS ? MAX_TIMESTAMP_MS : big);
  const days = Math.floor(ms / 86400000);
  let rest = ms - days * 86400000;
  const [year, month, day] = civilFromDays(days);
  const hour = Math.floor(rest / 3600000);
  rest -= hour * 3600000;
  const minute = Math.floor(rest / 60000);
  rest -= minute * 60000;
  const second = Math.floor(rest / 1000);
  const milli = rest - second * 1000;
  const pad = (n, w) => String(n).padStart(w, "0");
  const y = year <= 9999 ? pad(year, 4) : `+${year}`;
  return `${y}-${pad(month, 2)}-${pad(day, 2)}T${pad(hour, 2)}:${pad(minute, 2)}:${pad(second, 2)}.${pad(milli, 3)}Z`;
}

/** Year, month, day of `days` since 1970-01-01 (proleptic Gregorian; H. Hinnant). */
function civilFromDays(days) {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  return [year, month, day];
}

function get(d, key, kind, optional = false) {
  const v = d[key];
  if (v === undefined || (optional && v === null)) {
    if (optional) return null;
    throw new LayoutError(`the layout JSON has no \`${key}\``);
  }
  const ok =
    kind === "integer" ? Number.isInteger(v) : kind === "array" ? Array.isArray(v) : typeof v === kind;
  if (!ok) throw new LayoutError(`\`${key}\` must be ${kind === "integer" ? "an integer" : `a ${kind}`}, not ${JSON.stringify(v)}`);
  if (kind === "integer" && !Number.isSafeInteger(v)) {
    throw new LayoutError(`\`${key}\` ${v} is above 2^53, where JSON numbers stop being exact in JavaScript`);
  }
  return v;
}

function unit(unitMs, where) {
  if (unitMs < 1 || unitMs > 86400000) throw new LayoutError(`${where} ${unitMs} is out of range: allowed 1..=86400000`);
  return unitMs;
}

// The fields, checked: from the top bit down, each where the widths below it put it, exactly
// one time, seq and node.
function checkFields(raw, signed, where) {
  const fields = raw.map((f, n) => {
    const at = `${where}[${n}]`;
    if (f === null || typeof f !== "object") throw new LayoutError(`${at} must be an object`);
    const kind = get(f, "kind", "string");
    if (!KINDS.includes(kind)) throw new LayoutError(`${at}.kind \`${kind}\` is not one of ${KINDS.join(", ")}`);
    const value = get(f, "value", "integer", true);
    if ((kind === "fixed") !== (value !== null)) throw new LayoutError(`${at}: a fixed field, and only it, has a \`value\``);
    const parts = (f.parts || []).map((p) =>
      field({ name: get(p, "name", "string"), bits: get(p, "bits", "integer"), lowBit: get(p, "low_bit", "integer") }),
    );
    return field({
      name: get(f, "name", "string"),
      kind,
      bits: get(f, "bits", "integer"),
      lowBit: get(f, "low_bit", "integer"),
      value: value === null ? null : BigInt(value),
      parts,
    });
  });
  const total = fields.reduce((a, f) => a + f.bits, 0);
  if (total > (signed ? 63 : 64)) throw new LayoutError(`${where}: the fields take ${total} bits, more than the ID has`);
  let low = total;
  for (const f of fields) {
    low -= f.bits;
    if (f.bits < 1 || f.lowBit !== low) {
      throw new LayoutError(`${where}: field ${f.name} sits at bit ${f.lowBit} with ${f.bits} bits; the widths below it put it at ${low}`);
    }
    if (f.value !== null && f.value >> BigInt(f.bits) !== 0n) {
      throw new LayoutError(`${where}: fixed field ${f.name} value ${f.value} does not fit`);
    }
    let partLow = f.lowBit + f.bits;
    for (const p of f.parts) {
      partLow -= p.bits;
      if (p.bits < 1 || p.lowBit !== partLow) throw new LayoutError(`${where}: part ${p.name} of ${f.name} is misplaced`);
    }
    if (f.parts.length > 0 && partLow !== f.lowBit) throw new LayoutError(`${where}: the parts of ${f.name} do not fill it`);
  }
  for (const kind of ["time", "seq", "node"]) {
    const found = fields.filter((f) => f.kind === kind).length;
    if (found !== 1) throw new LayoutError(`${where}: a layout needs exactly one ${kind} field, found ${found}`);
  }
  return fields;
}

// Vesta's family: one variant per value of the type bit, in code order.
function checkTypes(raw, signed) {
  if (!Array.isArray(raw) || raw.length !== 2) throw new LayoutError("`types` must list Vesta's two types");
  return raw.map((t, code) => {
    const at = `types[${code}]`;
    if (t === null || typeof t !== "object" || get(t, "code", "integer") !== code) {
      throw new LayoutError(`${at} must be the type of code ${code}`);
    }
    const fields = checkFields(get(t, "fields", "array"), signed, `${at}.fields`);
    const type = fields.find((f) => f.name === "type");
    if (type === undefined || type.lowBit !== 62 || type.value !== BigInt(code)) {
      throw new LayoutError(`${at}: Vesta's type bit (62) must hold ${code}`);
    }
    return { unitMs: unit(get(t, "unit_ms", "integer"), `${at}.unit_ms`), fields };
  });
}

module.exports = { Explanation, FORMAT, Layout, LayoutError, PRESETS, VESTA_TYPES, parseId, rfc3339 };
