"""What a call to the server raises: :class:`VestaError`, a refusal with its gRPC status, the
server's sentence and the request field at fault, so a caller can tell a bad request from a
server that is not issuing (docs/grpc.md, "Errors")."""

from __future__ import annotations

from typing import Mapping

import grpc

__all__ = ["VestaError"]


class VestaError(Exception):
    """A call the server refused or that did not reach it.

    ``code`` is the ``grpc.StatusCode`` (``status`` its name: ``INVALID_ARGUMENT``,
    ``UNAVAILABLE``, ...), ``message`` the server's sentence naming what is at fault,
    ``field`` the request field at fault (metadata ``vesta-field``) or ``None``,
    ``retry_after`` seconds to wait before retrying (``retry-after``) or ``None``,
    ``seq_owner`` the gRPC address of the cluster member that serves a per-key sequence
    (``vesta-seq-owner``) or ``None``, and ``metadata`` every text trailer."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.metadata: dict[str, str] = dict(metadata or {})
        self.field: str | None = self.metadata.get("vesta-field")
        retry = self.metadata.get("retry-after")
        self.retry_after: int | None = int(retry) if retry and retry.isdigit() else None
        self.seq_owner: str | None = self.metadata.get("vesta-seq-owner")
        where = f" (field {self.field})" if self.field else ""
        super().__init__(f"{self.status}: {message}{where}")

    @property
    def status(self) -> str:
        """The status code's name, e.g. ``INVALID_ARGUMENT``."""
        return str(self.code.name)

    @classmethod
    def of(cls, e: grpc.RpcError) -> VestaError:
        """The error of a failed grpcio call."""
        call = e if isinstance(e, grpc.Call) else None
        code = call.code() if call is not None else grpc.StatusCode.UNKNOWN
        message = (call.details() if call is not None else None) or str(e)
        trailers = call.trailing_metadata() if call is not None else None
        metadata = {k: v for k, v in (trailers or ()) if isinstance(v, str)}
        return cls(code, message, metadata)
