"""A client of ``vesta serve rest``'s gRPC (service ``vesta.v1.Vesta`` on the REST port,
docs/grpc.md): every method of the service, health, a bearer token and TLS; IDs as Python
ints (exact: Python's ints have no 2**53 limit); refusals as :class:`VestaError`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar, Union

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from .errors import VestaError
from .layout import Explanation, IdLike, parse_id
from .pb import vesta_pb2 as pb
from .pb import vesta_pb2_grpc

# The generated stub is untyped: its calls answer the messages of vesta_pb2.
pb_grpc: Any = vesta_pb2_grpc

__all__ = ["Client", "Instant"]

T = TypeVar("T")
Key = Union[str, int]


@dataclass(frozen=True)
class Instant:
    """When a time value starts: ms since 1970 and RFC 3339 UTC text."""

    unix_ms: int
    timestamp: str


class Client:
    """One channel to a vesta REST server's gRPC.

    ``target`` is ``HOST:PORT``, ``http://HOST:PORT`` or ``https://HOST:PORT`` (TLS). With
    ``tls=True`` (or ``https://``) the server's certificate is checked against
    ``root_certificates`` (PEM bytes; the system's CAs when ``None``). ``token`` is sent as
    ``authorization: Bearer TOKEN`` on every vesta.v1 call (the server's
    ``[server] auth_token_file``). ``timeout`` is each call's deadline in seconds (``None``:
    no deadline). Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        tls: bool = False,
        root_certificates: bytes | None = None,
        timeout: float | None = 30.0,
        options: Sequence[tuple[str, Any]] = (),
    ) -> None:
        if target.startswith("https://"):
            target, tls = target[len("https://") :], True
        elif target.startswith("http://"):
            target = target[len("http://") :]
        target = target.rstrip("/")
        if root_certificates is not None:
            tls = True
        if tls:
            credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(target, credentials, options=list(options))
        else:
            self._channel = grpc.insecure_channel(target, options=list(options))
        self._stub = pb_grpc.VestaStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)
        self._metadata: tuple[tuple[str, str], ...] = (
            (("authorization", f"Bearer {token}"),) if token is not None else ()
        )
        self.timeout = timeout
        self.target = target

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel; calls under way are cancelled."""
        self._channel.close()

    def _call(self, method: Callable[..., T], request: Any, timeout: float | None) -> T:
        try:
            return method(
                request,
                timeout=self.timeout if timeout is None else timeout,
                metadata=self._metadata,
            )
        except grpc.RpcError as e:
            raise VestaError.of(e) from None

    def next_id(self, *, timeout: float | None = None) -> int:
        """One ID."""
        return int(self._call(self._stub.NextId, pb.NextIdRequest(), timeout).id)

    def next_ids(self, count: int, *, timeout: float | None = None) -> list[int]:
        """``count`` IDs (1..=the server's ``max_batch``), increasing."""
        answer = self._call(self._stub.NextIds, pb.NextIdsRequest(count=count), timeout)
        return list(answer.ids)

    def stream_ids(self, count: int, *, timeout: float | None = None) -> Iterator[int]:
        """``count`` IDs (1..=1,000,000,000), increasing, issued as they are read (the
        server sends chunks of at most 2,048). ``timeout`` bounds the whole stream."""
        chunks = self._call(self._stub.StreamIds, pb.StreamIdsRequest(count=count), timeout)
        try:
            for chunk in chunks:
                yield from chunk.ids
        except grpc.RpcError as e:
            raise VestaError.of(e) from None
        finally:
            chunks.cancel()

    def explain(self, id: IdLike, *, timeout: float | None = None) -> Explanation:
        """The server's explanation of ``id`` in its layout and epoch (for one without a
        server, :meth:`Layout.explain <vesta_client.Layout.explain>`)."""
        request = pb.ExplainRequest(id=parse_id(id))
        r = self._call(self._stub.Explain, request, timeout)
        return Explanation(
            id=r.id,
            layout=r.layout,
            fields=tuple((f.name, f.value) for f in r.fields),
            unix_ms=r.unix_ms,
            timestamp=r.timestamp,
            warning=r.warning or None,
        )

    def make(self, fields: Mapping[str, int], *, timeout: float | None = None) -> int:
        """An ID of the server's layout from field values by name (``time`` and ``seq``
        required; the others default to the server's own)."""
        request = pb.MakeRequest(fields=dict(fields))
        return int(self._call(self._stub.Make, request, timeout).id)

    def trans_time(self, time: int, *, timeout: float | None = None) -> Instant:
        """The instant a time value (units since the layout's epoch) starts."""
        r = self._call(self._stub.TransTime, pb.TransTimeRequest(time=time), timeout)
        return Instant(unix_ms=r.unix_ms, timestamp=r.timestamp)

    def segment(self, tag: str, *, timeout: float | None = None) -> int:
        """A segment tag's next number (Leaf's segment mode; the server's ``[segment] db``)."""
        return int(self._call(self._stub.Segment, pb.SegmentRequest(tag=tag), timeout).number)

    def segments(self, tag: str, count: int, *, timeout: float | None = None) -> list[int]:
        """``count`` numbers of a tag (1..=``max_batch``), increasing."""
        request = pb.SegmentsRequest(tag=tag, count=count)
        return list(self._call(self._stub.Segments, request, timeout).numbers)

    def seq_next(self, key: Key, *, timeout: float | None = None) -> int:
        """A key's next number: above every number the key was handed before (the server's
        ``[seq] db``; docs/seq.md)."""
        return self.seq_next_n(key, 1, timeout=timeout)[-1]

    def seq_next_n(self, key: Key, count: int, *, timeout: float | None = None) -> range:
        """``count`` numbers of a key (1..=the server's ``seq.step``): ``range(first,
        last + 1)``."""
        request = pb.SeqNextRequest(key=_key(key), count=count)
        r = self._call(self._stub.SeqNext, request, timeout)
        return range(r.first, r.last + 1)

    def seq_current(self, key: Key, *, timeout: float | None = None) -> int:
        """A key's current number, not moved."""
        request = pb.SeqCurrentRequest(key=_key(key))
        return int(self._call(self._stub.SeqCurrent, request, timeout).current)

    def health(self, service: str = "", *, timeout: float | None = None) -> str:
        """The standard health check (``grpc.health.v1``; no token needed): ``SERVING`` or
        ``NOT_SERVING`` for ``""`` (the server) and ``vesta.v1.Vesta``."""
        request = health_pb2.HealthCheckRequest(service=service)
        r = self._call(self._health.Check, request, timeout)
        return str(health_pb2.HealthCheckResponse.ServingStatus.Name(r.status))


def _key(key: Key) -> str:
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise TypeError(f"key must be a str or an int, not {key!r}")
    if isinstance(key, int) and not 0 <= key < 1 << 64:
        raise ValueError(f"key {key} is out of range: a numeric key is 0..=2**64-1")
    return str(key)
