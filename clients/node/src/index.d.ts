// Types of the vesta-client package. IDs and every number that can pass 2^53 are `bigint`.

/** An ID: a bigint, its text (unsigned or negative decimal, `0x` hex), or a safe integer. */
export type IdLike = bigint | string | number;
/** A count, a time value or a field value: a safe integer `number` or a bigint. */
export type Count = number | bigint;

/** The preset layouts' names. */
export declare const PRESETS: readonly ["vesta", "leaf", "twitter", "sonyflake", "sonyflake-v2", "uid-generator"];
export type PresetName = (typeof PRESETS)[number];
export type VestaType = "max-peak" | "min-granularity";
export type FieldKind = "time" | "seq" | "node" | "fixed" | "method";

/** One field or node part of an explained ID. */
export interface FieldValue {
  name: string;
  value: bigint;
}

/** An ID read in its layout, as `vesta explain` and the server's `Explain` read it. */
export declare class Explanation {
  readonly id: bigint;
  readonly idText: string;
  /** The layout's name (`vesta`, `leaf`, a custom name). */
  readonly layout: string;
  /** Every field and node part from the top bit down (parts after their node). */
  readonly fields: FieldValue[];
  /** The start of the ID's time unit, ms since 1970. */
  readonly unixMs: bigint;
  /** The same as RFC 3339 UTC text with milliseconds. */
  readonly timestamp: string;
  /** Why the ID looks foreign to the layout; `null` when it does not. */
  readonly warning: string | null;
  /** The value of the field or node part `name` (throws a RangeError when absent). */
  get(name: string): bigint;
  /** The instant as a `Date`. */
  readonly date: Date;
  /** Plain data, every 64-bit value as decimal text. */
  toJSON(): {
    id: string;
    layout: string;
    fields: { name: string; value: string }[];
    unixMs: string;
    timestamp: string;
    warning: string | null;
  };
}

/** The JSON `vesta layout --json` prints (docs/layout-json.md). */
export interface LayoutDescription {
  format: number;
  name: string;
  preset: string | null;
  type: VestaType | null;
  unit_ms: number;
  epoch_ms: number;
  epoch: string;
  signed: boolean;
  fields: FieldDescription[];
  types?: { type: VestaType; code: number; unit_ms: number; fields: FieldDescription[] }[];
}

export interface FieldDescription {
  name: string;
  kind: FieldKind;
  bits: number;
  low_bit: number;
  value?: number;
  parts?: { name: string; bits: number; low_bit: number }[];
}

export interface PresetOptions {
  /** The epoch, ms since 1970 [default: the preset's own]. */
  epochMs?: number;
  /** Vesta's layout in force [default: max-peak]. */
  type?: VestaType;
  /** Vesta's version bit [default: 0]. */
  version?: 0 | 1;
}

/** A layout read from JSON or a preset; `explain` reads any 64-bit value with it. */
export declare class Layout {
  constructor(description: LayoutDescription);
  /** A layout from the text `vesta layout --json` prints. */
  static fromJSON(text: string): Layout;
  /** A preset by name, counting from its own epoch unless `epochMs` is given. */
  static preset(name: PresetName, options?: PresetOptions): Layout;
  readonly name: string;
  readonly preset: string | null;
  readonly type: VestaType | null;
  readonly epochMs: bigint;
  readonly unitMs: number;
  readonly signed: boolean;
  readonly description: LayoutDescription;
  /** Reads `id` in this layout (Vesta's by the ID's own type bit). */
  explain(id: IdLike): Explanation;
}

/** A layout that cannot be read: the message names the key or field at fault. */
export declare class LayoutError extends Error {}

/** A call the server refused or that did not reach it. */
export declare class VestaError extends Error {
  /** The gRPC status code. */
  readonly code: number;
  /** Its name: `INVALID_ARGUMENT`, `UNAVAILABLE`, ... */
  readonly status: string;
  /** The server's sentence naming what is at fault. */
  readonly details: string;
  /** The request field at fault (metadata `vesta-field`). */
  readonly field: string | null;
  /** Seconds to wait before retrying (metadata `retry-after`). */
  readonly retryAfter: number | null;
  /** The gRPC address of the member serving a per-key sequence (`vesta-seq-owner`). */
  readonly seqOwner: string | null;
  /** Every text trailer. */
  readonly metadata: Record<string, string>;
}

export interface ClientOptions {
  /** Sent as `authorization: Bearer TOKEN` on every vesta.v1 call. */
  token?: string;
  /** TLS (also with an `https://` target or `rootCerts`). */
  tls?: boolean;
  /** PEM of the CAs to trust [default: the system's]. */
  rootCerts?: string | Uint8Array;
  /** Each call's deadline in ms; 0: none [default: 30000]. */
  timeoutMs?: number;
  /** grpc-js channel options. */
  channelOptions?: Record<string, string | number>;
}

/** One channel to a vesta REST server's gRPC (`HOST:PORT`, `http://...` or `https://...`). */
export declare class Client {
  constructor(target: string, options?: ClientOptions);
  readonly target: string;
  close(): void;
  nextId(): Promise<bigint>;
  nextIds(count: Count): Promise<bigint[]>;
  /** `count` IDs, issued as they are read: `for await (const id of client.streamIds(n))`. */
  streamIds(count: Count): AsyncGenerator<bigint, void, undefined>;
  explain(id: IdLike): Promise<Explanation>;
  make(fields: Record<string, Count>): Promise<bigint>;
  transTime(time: Count): Promise<{ unixMs: bigint; timestamp: string }>;
  segment(tag: string): Promise<bigint>;
  segments(tag: string, count: Count): Promise<bigint[]>;
  seqNext(key: string | bigint): Promise<bigint>;
  seqNextN(key: string | bigint, count: Count): Promise<{ first: bigint; last: bigint }>;
  seqCurrent(key: string | bigint): Promise<bigint>;
  /** `SERVING` or `NOT_SERVING` for `""` (the server) or `vesta.v1.Vesta`. */
  health(service?: string): Promise<string>;
}

/** An ID from a bigint, a safe integer or its text (unsigned or negative decimal, `0x` hex). */
export declare function parseId(id: IdLike): bigint;
/** ms since 1970 as RFC 3339 UTC text with milliseconds, as vesta writes it. */
export declare function rfc3339(unixMs: bigint | number): string;
