// A typed use of the package: `tsc --strict` must accept it (test/package.test.js). The
// `@ts-expect-error` lines must be errors: IDs are never `number`s.
import { Client, Explanation, Layout, LayoutError, VestaError, parseId, PRESETS } from "../src/index";

async function use(): Promise<void> {
  const client = new Client("127.0.0.1:8080", { token: "t", timeoutMs: 1000 });
  const id: bigint = await client.nextId();
  const ids: bigint[] = await client.nextIds(3);
  for await (const streamed of client.streamIds(10n)) {
    const s: bigint = streamed;
    void s;
  }
  const x: Explanation = await client.explain(id);
  const machine: bigint = x.get("machine");
  const warning: string | null = x.warning;
  const made: bigint = await client.make({ time: 1000, seq: 7n });
  const at: { unixMs: bigint; timestamp: string } = await client.transTime(1000);
  const seq: { first: bigint; last: bigint } = await client.seqNextN("chat:4711", 3);
  const current: bigint = await client.seqCurrent(42n);
  const status: string = await client.health("vesta.v1.Vesta");
  // @ts-expect-error an ID is a bigint, never a number
  const rounded: number = await client.nextId();
  try {
    await client.segment("orders");
  } catch (e) {
    if (e instanceof VestaError) {
      const field: string | null = e.field;
      const code: number = e.code;
      void field, code;
    }
  }
  const offline: Explanation = Layout.preset("leaf").explain("1280834012576002048");
  const custom = Layout.fromJSON("{}").explain(parseId("0x10"));
  // @ts-expect-error not a preset
  Layout.preset("snowflake");
  const e: Error = new LayoutError("x");
  const names: readonly string[] = PRESETS;
  void ids, machine, warning, made, at, seq, current, status, rounded, offline, custom, e, names;
  client.close();
}
void use;
