// The preset layouts as `vesta layout --json --layout NAME` describes them, written from the
// same sources as vesta-core's presets (the tests compare the two, key for key).
"use strict";

const { LayoutError, PRESETS, VESTA_TYPES, rfc3339 } = require("./layout");

/**
 * Each preset's epoch, ms since 1970: Vesta's 2015-01-01T00:00:00+08:00, Twitter's (which Leaf
 * keeps), Sonyflake v1's 2014-09-01, v2's 2025-01-01, UidGenerator's 2016-05-20T00:00:00+08:00.
 */
const EPOCHS = Object.freeze({
  vesta: 1420041600000,
  leaf: 1288834974657,
  twitter: 1288834974657,
  sonyflake: 1409529600000,
  "sonyflake-v2": 1735689600000,
  "uid-generator": 1463673600000,
});

// [name, kind, bits, value or parts] from the top bit down.
const PEERS = {
  leaf: [1, [["time", "time", 41], ["workerId", "node", 10], ["sequence", "seq", 12]]],
  twitter: [
    1,
    [
      ["time", "time", 41],
      ["node", "node", 10, [["datacenterId", 5], ["workerId", 5]]],
      ["sequence", "seq", 12],
    ],
  ],
  sonyflake: [10, [["time", "time", 39], ["sequence", "seq", 8], ["machine-id", "node", 16]]],
  "sonyflake-v2": [10, [["time", "time", 39], ["sequence", "seq", 8], ["machine", "node", 16]]],
  "uid-generator": [1000, [["time", "time", 28], ["workerId", "node", 22], ["sequence", "seq", 13]]],
};

function vestaFields(code, version) {
  const [timeBits, seqBits, unitMs] = code === 0 ? [30, 20, 1000] : [40, 10, 1];
  return [
    unitMs,
    [
      ["version", "fixed", 1, version],
      ["type", "fixed", 1, code],
      ["genMethod", "method", 2],
      ["time", "time", timeBits],
      ["seq", "seq", seqBits],
      ["machine", "node", 10],
    ],
  ];
}

// The fields with their low bits: the last ends at bit 0.
function place(specs) {
  let low = specs.reduce((a, s) => a + s[2], 0);
  return specs.map(([name, kind, bits, extra]) => {
    low -= bits;
    const f = { name, kind, bits, low_bit: low };
    if (kind === "fixed") f.value = extra;
    else if (extra !== undefined) {
      let partLow = low + bits;
      f.parts = extra.map(([part, partBits]) => {
        partLow -= partBits;
        return { name: part, bits: partBits, low_bit: partLow };
      });
    }
    return f;
  });
}

/** The JSON object of preset `name`. */
function description(name, { epochMs, type = "max-peak", version = 0 } = {}) {
  if (!PRESETS.includes(name)) throw new LayoutError(`layout \`${name}\` is not valid: expected one of ${PRESETS.join(", ")}`);
  const epoch = epochMs === undefined || epochMs === null ? EPOCHS[name] : Number(epochMs);
  if (!Number.isSafeInteger(epoch) || epoch < 0) throw new LayoutError(`epochMs ${epochMs} is not valid: ms since 1970, below 2^53`);
  const d = { format: 1, name, preset: name, type: null, epoch_ms: epoch, epoch: rfc3339(epoch) };
  if (name === "vesta") {
    if (!VESTA_TYPES.includes(type)) throw new LayoutError(`type \`${type}\` is not valid: expected max-peak or min-granularity`);
    if (version !== 0 && version !== 1) throw new LayoutError(`version ${version} is out of range: allowed 0..=1`);
    const code = VESTA_TYPES.indexOf(type);
    const [unitMs, specs] = vestaFields(code, version);
    const types = VESTA_TYPES.map((t, c) => {
      const [u, s] = vestaFields(c, version);
      return { type: t, code: c, unit_ms: u, fields: place(s) };
    });
    return { ...d, type, unit_ms: unitMs, signed: false, fields: place(specs), types };
  }
  const [unitMs, specs] = PEERS[name];
  return { ...d, unit_ms: unitMs, signed: true, fields: place(specs) };
}

module.exports = { EPOCHS, description };
