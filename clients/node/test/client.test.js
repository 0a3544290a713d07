// The gRPC client against real `vesta serve rest` servers, whose addresses the repository's
// test (tests/tests/it/client_packages.rs) puts in the environment: VESTA_GRPC (open, with
// per-key sequences and the segment tag `orders`; machine VESTA_GRPC_MACHINE),
// VESTA_GRPC_GUARDED (token VESTA_GRPC_TOKEN, `make = false`) and VESTA_GRPC_TLS (its CA in the
// file VESTA_GRPC_TLS_CA). Issued IDs are checked with the package's own offline explanation,
// and the server's explanations against it.
"use strict";

const assert = require("node:assert/strict");
const fs = require("node:fs");
const { describe, test, before, after } = require("node:test");

const { Client, Layout, VestaError } = require("..");

const { VESTA_GRPC: OPEN, VESTA_GRPC_GUARDED: GUARDED, VESTA_GRPC_TLS: TLS } = process.env;
const VESTA = Layout.preset("vesta");
// Never through a proxy from the environment: the servers are on loopback.
const channelOptions = { "grpc.enable_http_proxy": 0 };

// Asserts `id` is a max-peak ID a REST server (genMethod 2) with `machine` issued.
function restIdOf(machine, id) {
  assert.equal(typeof id, "bigint");
  const x = VESTA.explain(id);
  assert.deepEqual(
    ["machine", "genMethod", "type", "version"].map((f) => x.get(f)),
    [BigInt(machine), 2n, 0n, 0n],
    `${id}`,
  );
}

function increasing(ids) {
  return ids.every((id, i) => i === 0 || ids[i - 1] < id);
}

async function refused(promise, status, field) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof VestaError, String(e));
    assert.equal(e.status, status, e.message);
    assert.equal(e.field, field, e.message);
    return true;
  });
}

async function collect(iterable) {
  const out = [];
  for await (const x of iterable) out.push(x);
  return out;
}

describe("the client", { skip: !(OPEN && GUARDED && TLS) && "VESTA_GRPC* not set" }, () => {
  let client;
  let machine;
  before(() => {
    machine = Number(process.env.VESTA_GRPC_MACHINE);
    client = new Client(OPEN, { channelOptions });
  });
  after(() => client.close());

  test("ids, batches and a stream", async () => {
    const first = await client.nextId();
    restIdOf(machine, first);
    const batch = await client.nextIds(1000);
    assert.equal(batch.length, 1000);
    assert.ok(increasing([first, ...batch]));
    const streamed = await collect(client.streamIds(20000));
    assert.equal(streamed.length, 20000);
    assert.ok(increasing([batch[999], ...streamed]));
    for (const id of [batch[999], streamed[0], streamed[19999]]) restIdOf(machine, id);
    // Leaving a stream early cancels it.
    let taken = 0;
    for await (const id of client.streamIds(1000000)) {
      restIdOf(machine, id);
      if (++taken === 3) break;
    }
    await refused(client.nextIds(0), "INVALID_ARGUMENT", "count");
    await refused(collect(client.streamIds(0)), "INVALID_ARGUMENT", "count");
  });

  test("explain, make and trans time", async () => {
    for (const id of [await client.nextId(), 0n, 2n ** 53n + 1n, 2n ** 64n - 1n]) {
      assert.deepEqual(await client.explain(id), VESTA.explain(id), `${id}`);
    }
    const made = await client.make({ time: 1000, seq: 7n });
    const x = VESTA.explain(made);
    assert.deepEqual([x.get("time"), x.get("seq"), x.get("machine")], [1000n, 7n, BigInt(machine)]);
    assert.deepEqual(await client.transTime(1000), { unixMs: x.unixMs, timestamp: x.timestamp });
    await refused(client.make({ time: 1, seq: 1, colour: 3 }), "INVALID_ARGUMENT", "fields");
    await assert.rejects(client.explain(2 ** 60), RangeError);
  });

  test("segments and sequences", async () => {
    assert.equal(await client.segment("orders"), 1n);
    assert.deepEqual(await client.segments("orders", 5), [2n, 3n, 4n, 5n, 6n]);
    await refused(client.segment("no-such-tag"), "NOT_FOUND", null);
    assert.deepEqual(await client.seqNextN("chat:4711", 3), { first: 1n, last: 3n });
    assert.equal(await client.seqNext("chat:4711"), 4n);
    assert.equal(await client.seqCurrent("chat:4711"), 4n);
    assert.equal(await client.seqNext(42n), 1n);
    assert.equal(await client.seqCurrent("42"), 1n);
    await refused(client.seqNextN("chat:4711", 0), "INVALID_ARGUMENT", "count");
  });

  test("health", async () => {
    assert.equal(await client.health(), "SERVING");
    assert.equal(await client.health("vesta.v1.Vesta"), "SERVING");
    await refused(client.health("nope"), "NOT_FOUND", null);
  });

  test("a token and make off", async () => {
    const token = process.env.VESTA_GRPC_TOKEN;
    const anonymous = new Client(GUARDED, { channelOptions });
    await assert.rejects(anonymous.nextId(), (e) => e.status === "UNAUTHENTICATED" && /auth_token_file/.test(e.details));
    assert.equal(await anonymous.health(), "SERVING");
    anonymous.close();
    const wrong = new Client(GUARDED, { token: "nope", channelOptions });
    await refused(wrong.nextId(), "UNAUTHENTICATED", null);
    wrong.close();
    const c = new Client(GUARDED, { token, channelOptions });
    restIdOf(machine + 1, await c.nextId());
    assert.equal((await c.nextIds(10)).length, 10);
    await assert.rejects(c.make({ time: 1000, seq: 7 }), (e) => e.status === "PERMISSION_DENIED" && /make = false/.test(e.details));
    c.close();
  });

  test("TLS", async () => {
    const rootCerts = fs.readFileSync(process.env.VESTA_GRPC_TLS_CA);
    for (const target of [TLS, `https://${TLS}`]) {
      const c = new Client(target, { rootCerts, channelOptions });
      restIdOf(machine + 2, await c.nextId());
      assert.ok(increasing(await collect(c.streamIds(5000))));
      assert.equal(await c.health(), "SERVING");
      c.close();
    }
    // Plaintext to the TLS port: no ID, only UNAVAILABLE.
    const plain = new Client(TLS, { channelOptions, timeoutMs: 10000 });
    await refused(plain.nextId(), "UNAVAILABLE", null);
    plain.close();
  });
});
