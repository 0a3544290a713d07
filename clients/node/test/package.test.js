// The package as npm would ship it: its copy of the .proto is the repository's, its TypeScript
// declarations compile against a typed use of the API (test/types.ts, `tsc --strict`), and
// `npm pack` takes the sources, the declarations and the .proto.
"use strict";

const assert = require("node:assert/strict");
const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");
const { test } = require("node:test");

const PACKAGE = path.resolve(__dirname, "..");
const REPO = path.resolve(PACKAGE, "..", "..");

test("the proto copy is fresh", () => {
  const ours = fs.readFileSync(path.join(PACKAGE, "proto/vesta/v1/vesta.proto"), "utf8");
  const repo = fs.readFileSync(path.join(REPO, "proto/vesta/v1/vesta.proto"), "utf8");
  assert.ok(ours === repo, "clients/node/proto/vesta/v1/vesta.proto differs: cp proto/vesta/v1/vesta.proto clients/node/proto/vesta/v1/");
});

test("the TypeScript declarations compile", () => {
  const tsc = require.resolve("typescript/bin/tsc");
  const args = [
    tsc, "--noEmit", "--strict", "--target", "es2020", "--module", "commonjs",
    "--moduleResolution", "node", "--lib", "es2020",
    path.join(PACKAGE, "test/types.ts"),
  ];
  try {
    execFileSync(process.execPath, args, { encoding: "utf8", stdio: "pipe" });
  } catch (e) {
    assert.fail(`tsc: ${e.stdout}${e.stderr}`);
  }
});

test("npm pack ships the sources, declarations and proto", () => {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: PACKAGE,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  const files = JSON.parse(out)[0].files.map((f) => f.path).sort();
  for (const f of ["package.json", "README.md", "proto/vesta/v1/vesta.proto", "src/index.js", "src/index.d.ts", "src/client.js", "src/layout.js", "src/presets.js", "src/errors.js"]) {
    assert.ok(files.includes(f), `${f} not in ${files}`);
  }
  assert.ok(!files.some((f) => f.startsWith("test/")), `${files}`);
});
