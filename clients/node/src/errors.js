// What a call to the server throws: `VestaError`, a refusal with its gRPC status, the server's
// sentence and the request field at fault (docs/grpc.md, "Errors").
"use strict";

const grpc = require("@grpc/grpc-js");

/**
 * A call the server refused or that did not reach it: `code` is the gRPC status number,
 * `status` its name (`INVALID_ARGUMENT`, `UNAVAILABLE`, ...), `details` the server's sentence
 * naming what is at fault, `field` the request field at fault (metadata `vesta-field`) or
 * `null`, `retryAfter` seconds to wait before retrying (`retry-after`) or `null`, `seqOwner`
 * the gRPC address of the cluster member serving a per-key sequence (`vesta-seq-owner`) or
 * `null`, and `metadata` every text trailer.
 */
class VestaError extends Error {
  constructor(code, details, metadata = {}) {
    const status = grpc.status[code] || "UNKNOWN";
    const field = metadata["vesta-field"] ?? null;
    super(`${status}: ${details}${field ? ` (field ${field})` : ""}`);
    this.name = "VestaError";
    this.code = code;
    this.status = status;
    this.details = details;
    this.metadata = metadata;
    this.field = field;
    const retry = metadata["retry-after"];
    this.retryAfter = retry !== undefined && /^[0-9]+$/.test(retry) ? Number(retry) : null;
    this.seqOwner = metadata["vesta-seq-owner"] ?? null;
  }

  /** The error of a failed grpc-js call. */
  static of(e) {
    const metadata = {};
    if (e && e.metadata && typeof e.metadata.getMap === "function") {
      for (const [k, v] of Object.entries(e.metadata.getMap())) {
        if (typeof v === "string") metadata[k] = v;
      }
    }
    const code = e && typeof e.code === "number" ? e.code : grpc.status.UNKNOWN;
    return new VestaError(code, (e && (e.details || e.message)) || String(e), metadata);
  }
}

module.exports = { VestaError };
