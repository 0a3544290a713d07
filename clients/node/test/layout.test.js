// Offline explanations against `vesta explain`: the cases (layouts and 10,000 IDs each, as the
// `vesta` CLI explained them) are made by the repository's test
// (tests/tests/it/client_packages.rs) in the directory $VESTA_EXPLAIN_CASES.
"use strict";

const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const { test } = require("node:test");

const { Layout, LayoutError, PRESETS, parseId, rfc3339 } = require("..");

const CASES = process.env.VESTA_EXPLAIN_CASES;
const VESTA_KEYS = ["version", "type", "genMethod", "time", "seq", "machine"];

// A line of `vesta explain --json` with every number kept as exact text (JSON.parse would
// round one above 2^53).
function exactJson(line) {
  return JSON.parse(line.replace(/:(\d+)([,}])/g, ':"$1"$2'));
}

test("explains every case as the CLI does", { skip: !CASES && "VESTA_EXPLAIN_CASES not set" }, () => {
  const read = (file) => fs.readFileSync(path.join(CASES, file), "utf8");
  const manifest = JSON.parse(read("cases.json"));
  assert.ok(manifest.length >= 9);
  const covered = new Set();
  for (const c of manifest) {
    const description = JSON.parse(read(c.layout));
    const layout = new Layout(description);
    let built = null;
    if (c.preset !== null) {
      built = Layout.preset(c.preset.name, {
        epochMs: c.preset.epoch_ms,
        type: c.preset.type,
        version: c.preset.version,
      });
      assert.deepEqual(built.description, description, `${c.name}: the package's preset`);
    }
    covered.add(c.preset === null ? "custom" : c.preset.name);
    const ids = read(c.ids).split(/\s+/).filter(Boolean);
    const explained = read(c.explained).split("\n").filter(Boolean);
    assert.equal(ids.length, explained.length);
    assert.ok(ids.length >= 10000, `${c.name}: ${ids.length} IDs`);
    for (let i = 0; i < ids.length; i++) {
      const want = exactJson(explained[i]);
      const got = layout.explain(ids[i]);
      const at = `${c.name} ${ids[i]}`;
      assert.equal(got.idText, want.id, at);
      assert.equal(got.timestamp, want.timestamp, at);
      const values = Object.fromEntries(got.fields.map((f) => [f.name, f.value.toString()]));
      if ("typeName" in want) {
        assert.equal(got.layout, "vesta", at);
        assert.deepEqual(values, Object.fromEntries(VESTA_KEYS.map((k) => [k, want[k]])), at);
        assert.equal(got.warning, null, at);
      } else {
        assert.equal(got.layout, want.layout, at);
        const others = Object.keys(want).filter((k) => !["id", "layout", "timestamp", "warning"].includes(k));
        assert.deepEqual(got.fields.map((f) => f.name), others, at);
        assert.deepEqual(values, Object.fromEntries(others.map((k) => [k, want[k]])), at);
        assert.equal(got.warning, want.warning ?? null, at);
      }
      if (built !== null) assert.deepEqual(built.explain(got.id), got, at);
    }
  }
  for (const p of [...PRESETS, "custom"]) assert.ok(covered.has(p), `no case for ${p}`);
});

test("reads IDs in every form, and exactly", () => {
  assert.equal(parseId("18446744073709551615"), 2n ** 64n - 1n);
  assert.equal(parseId("-1"), 2n ** 64n - 1n);
  assert.equal(parseId(" 0x10 "), 16n);
  assert.equal(parseId(42), 42n);
  for (const bad of ["", "1e3", "0x", "0x11111111111111111", "18446744073709551616", "-9223372036854775809", "١٢", 2 ** 53, -1, 1.5, -1n]) {
    assert.throws(() => parseId(bad), RangeError, String(bad));
  }
  assert.throws(() => parseId(null), TypeError);
  // An ID above 2^53 read as text stays itself.
  const x = Layout.preset("vesta").explain("9007199254740993");
  assert.equal(x.id, 9007199254740993n);
});

test("a Vesta ID is read by its type bit", () => {
  const x = Layout.preset("vesta").explain((1n << 62n) | (5n << 20n));
  assert.equal(x.get("type"), 1n);
  assert.equal(x.get("time"), 5n);
  assert.equal(x.unixMs, 1420041600005n);
  assert.equal(x.timestamp, "2014-12-31T16:00:00.005Z");
  assert.equal(x.date.toISOString(), "2014-12-31T16:00:00.005Z");
  assert.throws(() => x.get("workerId"), RangeError);
});

test("a layout that does not add up is refused naming it", () => {
  const good = Layout.preset("leaf").description;
  const bad = structuredClone(good);
  bad.fields[1].low_bit = 11;
  assert.throws(() => new Layout(bad), (e) => e instanceof LayoutError && /workerId sits at bit 11/.test(e.message));
  assert.throws(() => new Layout({ ...good, format: 2 }), /format 2/);
  assert.throws(() => new Layout({ ...good, unit_ms: "1" }), /unit_ms/);
  assert.throws(() => new Layout({ ...good, epoch_ms: 2 ** 60 }), /epoch_ms.* is above 2\^53/);
  assert.throws(() => Layout.preset("snowflake"), /snowflake/);
  assert.throws(() => Layout.fromJSON("{"), LayoutError);
});

test("timestamps past 9999 and at the end", () => {
  assert.equal(rfc3339(0n), "1970-01-01T00:00:00.000Z");
  assert.equal(rfc3339(253402300800000n), "+10000-01-01T00:00:00.000Z");
  assert.equal(rfc3339(2n ** 64n - 1n), "+262142-12-31T23:59:59.999Z");
});
