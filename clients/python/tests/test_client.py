"""The gRPC client against real ``vesta serve rest`` servers, whose addresses the repository's
test (tests/tests/it/client_packages.rs) puts in the environment: ``VESTA_GRPC`` (open, with
per-key sequences and the segment tag ``orders``; machine ``VESTA_GRPC_MACHINE``),
``VESTA_GRPC_GUARDED`` (token ``VESTA_GRPC_TOKEN``, ``make = false``) and ``VESTA_GRPC_TLS``
(its CA in the file ``VESTA_GRPC_TLS_CA``). Issued IDs are checked with the package's own
offline explanation, and the server's explanations against it."""

from __future__ import annotations

import os
import unittest
from pathlib import Path

import grpc

from vesta_client import Client, Layout, VestaError

OPEN = os.environ.get("VESTA_GRPC", "")
GUARDED = os.environ.get("VESTA_GRPC_GUARDED", "")
TLS = os.environ.get("VESTA_GRPC_TLS", "")
VESTA = Layout.preset("vesta")
SERVERS = "VESTA_GRPC* not set (tests/tests/it/client_packages.rs starts the servers)"
# Never through a proxy from the environment: the servers are on loopback.
OPTIONS = [("grpc.enable_http_proxy", 0)]


def rest_id_of(machine: int, id: int) -> None:
    """Asserts ``id`` is a max-peak ID a REST server (genMethod 2) with ``machine`` issued."""
    x = VESTA.explain(id)
    got = (x["machine"], x["genMethod"], x["type"], x["version"])
    if got != (machine, 2, 0, 0):
        raise AssertionError(f"{id} reads as machine, genMethod, type, version {got}")


def increasing(ids: list[int]) -> bool:
    return all(a < b for a, b in zip(ids, ids[1:]))


@unittest.skipUnless(OPEN and GUARDED and TLS, SERVERS)
class CallsEveryMethod(unittest.TestCase):
    def setUp(self) -> None:
        self.machine = int(os.environ["VESTA_GRPC_MACHINE"])
        self.client = Client(OPEN, options=OPTIONS)

    def tearDown(self) -> None:
        self.client.close()

    def refused(self, code: grpc.StatusCode, field: str | None, call: object) -> VestaError:
        with self.assertRaises(VestaError) as caught:
            if callable(call):
                call()
        e = caught.exception
        self.assertEqual((e.code, e.field), (code, field), str(e))
        self.assertEqual(e.status, code.name)
        return e

    def test_ids_batches_and_a_stream(self) -> None:
        c = self.client
        first = c.next_id()
        rest_id_of(self.machine, first)
        batch = c.next_ids(1000)
        self.assertEqual(len(batch), 1000)
        self.assertTrue(increasing([first] + batch))
        streamed = list(c.stream_ids(20_000))
        self.assertEqual(len(streamed), 20_000)
        self.assertTrue(increasing(batch[-1:] + streamed))
        for id in [first, batch[-1], streamed[0], streamed[-1]]:
            rest_id_of(self.machine, id)
        e = self.refused(grpc.StatusCode.INVALID_ARGUMENT, "count", lambda: c.next_ids(0))
        self.assertIn("count", e.message)
        self.refused(
            grpc.StatusCode.INVALID_ARGUMENT, "count", lambda: list(c.stream_ids(0))
        )

    def test_explain_make_and_trans_time(self) -> None:
        c = self.client
        for id in [c.next_id(), 0, 2**53 + 1, 2**64 - 1]:
            self.assertEqual(c.explain(id), VESTA.explain(id), id)
        made = c.make({"time": 1000, "seq": 7})
        x = VESTA.explain(made)
        self.assertEqual((x["time"], x["seq"], x["machine"]), (1000, 7, self.machine))
        at = c.trans_time(1000)
        self.assertEqual((at.unix_ms, at.timestamp), (x.unix_ms, x.timestamp))
        e = self.refused(
            grpc.StatusCode.INVALID_ARGUMENT,
            "fields",
            lambda: c.make({"time": 1, "seq": 1, "colour": 3}),
        )
        self.assertIn("colour", e.message)

    def test_segments_and_sequences(self) -> None:
        c = self.client
        self.assertEqual(c.segment("orders"), 1)
        self.assertEqual(c.segments("orders", 5), [2, 3, 4, 5, 6])
        self.refused(grpc.StatusCode.NOT_FOUND, None, lambda: c.segment("no-such-tag"))
        self.assertEqual(c.seq_next_n("chat:4711", 3), range(1, 4))
        self.assertEqual(c.seq_next("chat:4711"), 4)
        self.assertEqual(c.seq_current("chat:4711"), 4)
        self.assertEqual(c.seq_next(42), 1)
        self.assertEqual(c.seq_current("42"), 1)
        self.refused(
            grpc.StatusCode.INVALID_ARGUMENT, "count", lambda: c.seq_next_n("chat:4711", 0)
        )

    def test_health(self) -> None:
        c = self.client
        self.assertEqual(c.health(), "SERVING")
        self.assertEqual(c.health("vesta.v1.Vesta"), "SERVING")
        self.refused(grpc.StatusCode.NOT_FOUND, None, lambda: c.health("nope"))

    def test_token_and_make_off(self) -> None:
        token = os.environ["VESTA_GRPC_TOKEN"]
        with Client(GUARDED, options=OPTIONS) as anonymous:
            e = self.refused(grpc.StatusCode.UNAUTHENTICATED, None, anonymous.next_id)
            self.assertIn("auth_token_file", e.message)
            self.assertEqual(anonymous.health(), "SERVING")
        with Client(GUARDED, token="nope", options=OPTIONS) as wrong:
            self.refused(grpc.StatusCode.UNAUTHENTICATED, None, wrong.next_id)
        with Client(GUARDED, token=token, options=OPTIONS) as c:
            rest_id_of(self.machine + 1, c.next_id())
            self.assertEqual(len(c.next_ids(10)), 10)
            e = self.refused(
                grpc.StatusCode.PERMISSION_DENIED,
                None,
                lambda: c.make({"time": 1000, "seq": 7}),
            )
            self.assertIn("make = false", e.message)

    def test_tls(self) -> None:
        ca = Path(os.environ["VESTA_GRPC_TLS_CA"]).read_bytes()
        for target in [TLS, f"https://{TLS}"]:
            with Client(target, root_certificates=ca, options=OPTIONS) as c:
                rest_id_of(self.machine + 2, c.next_id())
                self.assertTrue(increasing(list(c.stream_ids(5000))))
                self.assertEqual(c.health(), "SERVING")
        # Plaintext to the TLS port: no ID, only UNAVAILABLE.
        with Client(TLS, options=OPTIONS, timeout=10) as plain:
            self.refused(grpc.StatusCode.UNAVAILABLE, None, plain.next_id)


if __name__ == "__main__":
    unittest.main()
