#!/usr/bin/env node
// vesta.v1 over gRPC from Node (@grpc/grpc-js + @grpc/proto-loader), for
// tests/tests/it/grpc_clients.rs.
//
// Usage: node client.js HOST:PORT [--token TOKEN]
//
// Loads the repository's proto/vesta/v1/vesta.proto with `longs: String`, as docs/grpc.md tells
// JavaScript users to: uint64 IDs arrive as exact decimal strings (a JavaScript number would
// round every ID above 2^53, i.e. every Vesta ID a REST server issues). Runs a fixed script of
// calls and prints one JSON object per call on stdout: {"step": NAME, "ok": {...}} or
// {"step": NAME, "error": {"code", "message", "trailing"}}. It asserts nothing: the Rust test
// reads the lines and checks them.
//
// Without --token: the open script (IDs, a batch, a stream, explain, make, trans_time, an ID
// above 2^53 sent as text, errors, health, reflection v1). With --token: the guarded script
// for a server with a token file and `make = false`.
"use strict";

const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const health = require("grpc-health-check");

const REPO = path.resolve(__dirname, "..", "..");
// Every call's deadline (ms): a stuck server fails the call, never hangs the test.
const TIMEOUT_MS = 30000;
// Never through a proxy from the environment: the server is on loopback.
const OPTIONS = { "grpc.enable_http_proxy": 0 };
const LOAD = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

function emit(step, outcome) {
  process.stdout.write(JSON.stringify({ step, ...outcome }) + "\n");
}

function errorOf(e) {
  const trailing = {};
  for (const [k, v] of Object.entries(e.metadata ? e.metadata.getMap() : {})) {
    if (typeof v === "string") trailing[k] = v;
  }
  return { code: grpc.status[e.code], message: e.details, trailing };
}

function deadline() {
  return { deadline: Date.now() + TIMEOUT_MS };
}

// A unary call as a promise of its answer (null on a gRPC error); prints the outcome.
function call(step, client, method, request, ok, metadata = new grpc.Metadata()) {
  return new Promise((resolve) => {
    client[method](request, metadata, deadline(), (err, answer) => {
      if (err) {
        emit(step, { error: errorOf(err) });
        resolve(null);
      } else {
        emit(step, { ok: ok(answer) });
        resolve(answer);
      }
    });
  });
}

// A StreamIds call read to its end: the chunks' sizes and every ID (as strings).
function stream(step, client, count) {
  return new Promise((resolve) => {
    const chunks = [];
    const ids = [];
    const answer = client.StreamIds({ count: String(count) }, new grpc.Metadata(), deadline());
    answer.on("data", (chunk) => {
      chunks.push(chunk.ids.length);
      ids.push(...chunk.ids);
    });
    answer.on("error", (e) => {
      emit(step, { error: errorOf(e), chunks, ids });
      resolve();
    });
    answer.on("end", () => {
      emit(step, { ok: { chunks, ids } });
      resolve();
    });
  });
}

function explained(r) {
  return {
    id: r.id,
    id_text: r.id_text,
    layout: r.layout,
    fields: r.fields.map((f) => [f.name, f.value]),
    unix_ms: r.unix_ms,
    timestamp: r.timestamp,
    warning: r.warning,
  };
}

async function checkHealth(address, prefix) {
  const Health = grpc.makeGenericClientConstructor(health.service, "Health");
  const client = new Health(address, grpc.credentials.createInsecure(), OPTIONS);
  for (const [step, service] of [["server", ""], ["vesta", "vesta.v1.Vesta"], ["nope", "nope"]]) {
    await call(prefix + step, client, "Check", { service }, (r) => ({ status: r.status }));
  }
  client.close();
}

// The services server reflection (v1) lists. Its .proto ships with @grpc/reflection.
function listServices(address) {
  const file = path.join(
    path.dirname(require.resolve("@grpc/reflection/package.json")),
    "build/proto/grpc/reflection/v1/reflection.proto",
  );
  const { ServerReflection } = grpc.loadPackageDefinition(protoLoader.loadSync(file, LOAD)).grpc
    .reflection.v1;
  const client = new ServerReflection(address, grpc.credentials.createInsecure(), OPTIONS);
  return new Promise((resolve) => {
    const names = [];
    const info = client.ServerReflectionInfo(new grpc.Metadata(), deadline());
    info.on("data", (r) => {
      for (const s of r.list_services_response.service) names.push(s.name);
    });
    info.on("error", (e) => {
      client.close();
      resolve({ error: errorOf(e) });
    });
    info.on("end", () => {
      client.close();
      resolve({ ok: { services: names } });
    });
    info.write({ host: "", list_services: "" });
    info.end();
  });
}

async function openScript(vesta, address) {
  const first = await call("next_id", vesta, "NextId", {}, (r) => ({ id: r.id, id_text: r.id_text }));
  if (first) {
    // The ID goes back as the string it arrived as.
    await call("explain", vesta, "Explain", { id: first.id }, explained);
  }
  const made = await call(
    "make",
    vesta,
    "Make",
    { fields: { time: "1000", seq: "7" } },
    (r) => ({ id: r.id, id_text: r.id_text }),
  );
  if (made) {
    await call("explain_made", vesta, "Explain", { id: made.id }, explained);
  }
  await call("trans_time", vesta, "TransTime", { time: "1000" }, (r) => ({
    unix_ms: r.unix_ms,
    timestamp: r.timestamp,
  }));
  // 2^64 - 1: every bit set, far above 2^53, exactly there and back.
  await call("explain_max", vesta, "Explain", { id: "18446744073709551615" }, explained);
  await call("next_ids", vesta, "NextIds", { count: "1000" }, (r) => ({ ids: r.ids }));
  await stream("stream_ids", vesta, 20000);
  await call("next_ids_zero", vesta, "NextIds", { count: "0" }, (r) => ({ ids: r.ids }));
  await checkHealth(address, "health_");
  emit("reflection_services", await listServices(address));
}

async function guardedScript(vesta, address, token) {
  const bearer = new grpc.Metadata();
  bearer.add("authorization", `Bearer ${token}`);
  await call("next_id_without_token", vesta, "NextId", {}, (r) => ({ id: r.id }));
  await call("next_id_with_token", vesta, "NextId", {}, (r) => ({ id: r.id, id_text: r.id_text }), bearer);
  await call(
    "make_with_token",
    vesta,
    "Make",
    { fields: { time: "1000", seq: "7" } },
    (r) => ({ id: r.id }),
    bearer,
  );
  // Open without a token, as /healthz is.
  await checkHealth(address, "health_without_token_");
}

async function main() {
  const args = process.argv.slice(2);
  const address = args[0];
  const tokenAt = args.indexOf("--token");
  const token = tokenAt >= 0 ? args[tokenAt + 1] : undefined;
  if (!address || address.startsWith("--") || (tokenAt >= 0 && !token)) {
    process.stderr.write("usage: node client.js HOST:PORT [--token TOKEN]\n");
    process.exit(2);
  }
  const file = path.join(REPO, "proto", "vesta", "v1", "vesta.proto");
  const { Vesta } = grpc.loadPackageDefinition(protoLoader.loadSync(file, LOAD)).vesta.v1;
  const vesta = new Vesta(address, grpc.credentials.createInsecure(), OPTIONS);
  if (token === undefined) {
    await openScript(vesta, address);
  } else {
    await guardedScript(vesta, address, token);
  }
  vesta.close();
}

main().catch((e) => {
  process.stderr.write(`${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
