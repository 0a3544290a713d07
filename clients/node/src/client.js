// A client of `vesta serve rest`'s gRPC (service `vesta.v1.Vesta` on the REST port,
// docs/grpc.md): every method of the service, health, a bearer token and TLS. Every ID and
// number comes back as a BigInt (read as exact text from the wire, never as a `number`, which
// rounds above 2^53); refusals are thrown as `VestaError`.
"use strict";

const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");
const health = require("grpc-health-check");

const { VestaError } = require("./errors");
const { Explanation, parseId } = require("./layout");

// uint64 as decimal strings (then BigInt), enums by name, zero values present.
const LOAD = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
const PROTO = path.join(__dirname, "..", "proto", "vesta", "v1", "vesta.proto");

let services = null;
function loadServices() {
  if (services === null) {
    const vesta = grpc.loadPackageDefinition(protoLoader.loadSync(PROTO, LOAD)).vesta.v1.Vesta;
    const Health = grpc.makeGenericClientConstructor(health.service, "Health");
    services = { Vesta: vesta, Health };
  }
  return services;
}

// A count or other small number: a safe integer or a bigint, as decimal text for the wire.
function count(n, name) {
  if (typeof n === "bigint" ? n < 0n : !Number.isSafeInteger(n) || n < 0) {
    throw new RangeError(`${name} must be a non-negative integer (a number below 2^53 or a bigint), not ${n}`);
  }
  return n.toString();
}

function key(k) {
  if (typeof k === "bigint") return count(k, "key");
  if (typeof k === "string") return k;
  throw new TypeError(`key must be a string or a bigint, not ${typeof k}`);
}

class Client {
  /**
   * One channel to a vesta REST server's gRPC. `target` is `HOST:PORT`, `http://HOST:PORT` or
   * `https://HOST:PORT` (TLS). Options: `token` (sent as `authorization: Bearer TOKEN` on every
   * vesta.v1 call), `tls` (or `https://`), `rootCerts` (PEM, a Buffer or string; the system's
   * CAs when absent), `timeoutMs` (each call's deadline, default 30000; 0: none),
   * `channelOptions` (grpc-js channel options).
   */
  constructor(target, options = {}) {
    let tls = options.tls === true || options.rootCerts !== undefined;
    if (target.startsWith("https://")) {
      target = target.slice("https://".length);
      tls = true;
    } else if (target.startsWith("http://")) {
      target = target.slice("http://".length);
    }
    target = target.replace(/\/+$/, "");
    const roots = options.rootCerts === undefined ? undefined : Buffer.from(options.rootCerts);
    const credentials = tls ? grpc.credentials.createSsl(roots) : grpc.credentials.createInsecure();
    const { Vesta, Health } = loadServices();
    const channelOptions = options.channelOptions || {};
    this.target = target;
    this.timeoutMs = options.timeoutMs === undefined ? 30000 : options.timeoutMs;
    this.vesta = new Vesta(target, credentials, channelOptions);
    this.healthClient = new Health(target, credentials, { ...channelOptions, channelOverride: this.vesta.getChannel() });
    this.token = options.token === undefined ? null : options.token;
  }

  metadata() {
    const md = new grpc.Metadata();
    if (this.token !== null) md.set("authorization", `Bearer ${this.token}`);
    return md;
  }

  callOptions() {
    return this.timeoutMs ? { deadline: Date.now() + this.timeoutMs } : {};
  }

  unary(client, method, request) {
    return new Promise((resolve, reject) => {
      client[method](request, this.metadata(), this.callOptions(), (err, answer) => {
        if (err) reject(VestaError.of(err));
        else resolve(answer);
      });
    });
  }

  /** Closes the channel. */
  close() {
    this.vesta.close();
  }

  /** One ID. */
  async nextId() {
    return BigInt((await this.unary(this.vesta, "NextId", {})).id);
  }

  /** `count` IDs (1..=the server's `max_batch`), increasing. */
  async nextIds(n) {
    const r = await this.unary(this.vesta, "NextIds", { count: count(n, "count") });
    return r.ids.map(BigInt);
  }

  /**
   * `count` IDs (1..=1,000,000,000), increasing, issued as they are read (chunks of at most
   * 2,048): `for await (const id of client.streamIds(n))`. The deadline bounds the whole
   * stream; leaving the loop early cancels the rest.
   */
  async *streamIds(n) {
    const call = this.vesta.StreamIds({ count: count(n, "count") }, this.metadata(), this.callOptions());
    try {
      for await (const chunk of call) {
        for (const id of chunk.ids) yield BigInt(id);
      }
    } catch (e) {
      throw VestaError.of(e);
    } finally {
      call.cancel();
    }
  }

  /** The server's explanation of `id` in its layout and epoch (offline: `Layout.explain`). */
  async explain(id) {
    const r = await this.unary(this.vesta, "Explain", { id: parseId(id).toString() });
    return new Explanation({
      id: BigInt(r.id),
      layout: r.layout,
      fields: r.fields.map((f) => ({ name: f.name, value: BigInt(f.value) })),
      unixMs: BigInt(r.unix_ms),
      timestamp: r.timestamp,
      warning: r.warning === "" ? null : r.warning,
    });
  }

  /** An ID of the server's layout from field values by name (`time` and `seq` required). */
  async make(fields) {
    const wire = {};
    for (const [name, value] of Object.entries(fields)) wire[name] = count(value, name);
    return BigInt((await this.unary(this.vesta, "Make", { fields: wire })).id);
  }

  /** The instant a time value (units since the layout's epoch) starts. */
  async transTime(time) {
    const r = await this.unary(this.vesta, "TransTime", { time: count(time, "time") });
    return { unixMs: BigInt(r.unix_ms), timestamp: r.timestamp };
  }

  /** A segment tag's next number (Leaf's segment mode; the server's `[segment] db`). */
  async segment(tag) {
    return BigInt((await this.unary(this.vesta, "Segment", { tag })).number);
  }

  /** `count` numbers of a tag (1..=`max_batch`), increasing. */
  async segments(tag, n) {
    const r = await this.unary(this.vesta, "Segments", { tag, count: count(n, "count") });
    return r.numbers.map(BigInt);
  }

  /** A key's next number: above every number it was handed before (docs/seq.md). */
  async seqNext(k) {
    return (await this.seqNextN(k, 1)).last;
  }

  /** `count` numbers of a key (1..=the server's `seq.step`): `first..=last`. */
  async seqNextN(k, n) {
    const r = await this.unary(this.vesta, "SeqNext", { key: key(k), count: count(n, "count") });
    return { first: BigInt(r.first), last: BigInt(r.last) };
  }

  /** A key's current number, not moved. */
  async seqCurrent(k) {
    return BigInt((await this.unary(this.vesta, "SeqCurrent", { key: key(k) })).current);
  }

  /**
   * The standard health check (`grpc.health.v1`; no token needed): `SERVING` or
   * `NOT_SERVING` for `""` (the server) and `vesta.v1.Vesta`.
   */
  async health(service = "") {
    return (await this.unary(this.healthClient, "Check", { service })).status;
  }
}

module.exports = { Client };
