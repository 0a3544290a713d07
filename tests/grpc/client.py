#!/usr/bin/env python3
"""vesta.v1 over gRPC from Python (grpcio), for tests/tests/it/grpc_clients.rs.

Usage: client.py HOST:PORT [--token TOKEN] [--ca FILE]

Generates the stubs from the repository's proto/vesta/v1/vesta.proto into a temporary
directory (`python -m grpc_tools.protoc`, as a user of the service would), runs a fixed
script of calls and prints one JSON object per call on stdout: {"step": NAME, "ok": {...}}
or {"step": NAME, "error": {"code", "message", "trailing"}}. It asserts nothing: the Rust
test reads the lines and checks them. IDs and other uint64 values are printed as decimal
strings, as the Node client prints them.

Without --token: the open script (IDs, a batch, a stream, explain, make, trans_time, errors,
health, reflection). With --token: the guarded script for a server with a token file and
`make = false`.

With --ca FILE: the same script over TLS (`grpc.ssl_channel_credentials`, trusting only the CA
certificate in FILE, PEM; the server's certificate must name HOST, its IP address or DNS
name), and then one more step, `plaintext_next_id`: a NextId over an insecure channel to the
same address, which a TLS port must refuse (an error, never an ID).
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from google.protobuf import descriptor_pool

# tests/grpc/client.py -> the repository.
REPO = Path(__file__).resolve().parents[2]
# Every call's deadline (seconds): a stuck server fails the call, never hangs the test.
TIMEOUT = 30
# Never through a proxy from the environment: the server is on loopback.
OPTIONS = [("grpc.enable_http_proxy", 0)]


def emit(step, **outcome):
    print(json.dumps({"step": step, **outcome}), flush=True)


def error_of(e):
    trailing = {k: v for k, v in (e.trailing_metadata() or ()) if isinstance(v, str)}
    return {"code": e.code().name, "message": e.details(), "trailing": trailing}


def call(step, fn, ok):
    """Runs fn(); prints ok(its answer), or the gRPC error it raised."""
    try:
        answer = fn()
    except grpc.RpcError as e:
        emit(step, error=error_of(e))
        return None
    emit(step, ok=ok(answer))
    return answer


def ids(values):
    return [str(v) for v in values]


def stubs(out):
    """vesta.v1's messages and stub, generated from the .proto into `out`."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{REPO / 'proto'}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            "vesta/v1/vesta.proto",
        ],
        check=True,
    )
    sys.path.insert(0, str(out))
    from vesta.v1 import vesta_pb2, vesta_pb2_grpc

    return vesta_pb2, vesta_pb2_grpc


def explained(r):
    return {
        "id": str(r.id),
        "id_text": r.id_text,
        "layout": r.layout,
        "fields": [[f.name, str(f.value)] for f in r.fields],
        "unix_ms": str(r.unix_ms),
        "timestamp": r.timestamp,
        "warning": r.warning,
    }


def stream(step, answer):
    """Reads a StreamIds call to its end: the chunks' sizes and every ID."""
    chunks, got = [], []
    try:
        for chunk in answer:
            chunks.append(len(chunk.ids))
            got.extend(chunk.ids)
    except grpc.RpcError as e:
        emit(step, error=error_of(e), chunks=chunks, ids=ids(got))
        return
    emit(step, ok={"chunks": chunks, "ids": ids(got)})


def health(channel, prefix):
    stub = health_pb2_grpc.HealthStub(channel)
    name = health_pb2.HealthCheckResponse.ServingStatus.Name
    for step, service in [("server", ""), ("vesta", "vesta.v1.Vesta"), ("nope", "nope")]:
        call(
            f"{prefix}{step}",
            lambda: stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=TIMEOUT),
            lambda r: {"status": name(r.status)},
        )


def list_services(channel):
    """The services server reflection (v1alpha) lists."""
    stub = reflection_pb2_grpc.ServerReflectionStub(channel)
    request = reflection_pb2.ServerReflectionRequest(list_services="")
    answers = stub.ServerReflectionInfo(iter([request]), timeout=TIMEOUT)
    return [s.name for a in answers for s in a.list_services_response.service]


def reflected_methods(channel):
    """vesta.v1.Vesta's methods as reflection describes them (its file, fetched by symbol)."""
    pool = descriptor_pool.DescriptorPool(ProtoReflectionDescriptorDatabase(channel))
    service = pool.FindServiceByName("vesta.v1.Vesta")
    return [
        {
            "name": m.name,
            "input": m.input_type.full_name,
            "output": m.output_type.full_name,
            "server_streaming": m.server_streaming,
        }
        for m in service.methods
    ]


def open_script(channel, pb, pb_grpc):
    vesta = pb_grpc.VestaStub(channel)
    first = call(
        "next_id",
        lambda: vesta.NextId(pb.NextIdRequest(), timeout=TIMEOUT),
        lambda r: {"id": str(r.id), "id_text": r.id_text},
    )
    if first is not None:
        call(
            "explain",
            lambda: vesta.Explain(pb.ExplainRequest(id=first.id), timeout=TIMEOUT),
            explained,
        )
    made = call(
        "make",
        lambda: vesta.Make(pb.MakeRequest(fields={"time": 1000, "seq": 7}), timeout=TIMEOUT),
        lambda r: {"id": str(r.id), "id_text": r.id_text},
    )
    if made is not None:
        call(
            "explain_made",
            lambda: vesta.Explain(pb.ExplainRequest(id=made.id), timeout=TIMEOUT),
            explained,
        )
    call(
        "trans_time",
        lambda: vesta.TransTime(pb.TransTimeRequest(time=1000), timeout=TIMEOUT),
        lambda r: {"unix_ms": str(r.unix_ms), "timestamp": r.timestamp},
    )
    call(
        "next_ids",
        lambda: vesta.NextIds(pb.NextIdsRequest(count=1000), timeout=TIMEOUT),
        lambda r: {"ids": ids(r.ids)},
    )
    stream("stream_ids", vesta.StreamIds(pb.StreamIdsRequest(count=20000), timeout=TIMEOUT))
    call(
        "next_ids_zero",
        lambda: vesta.NextIds(pb.NextIdsRequest(count=0), timeout=TIMEOUT),
        lambda r: {"ids": ids(r.ids)},
    )
    stream("stream_ids_zero", vesta.StreamIds(pb.StreamIdsRequest(count=0), timeout=TIMEOUT))
    call(
        "make_unknown_field",
        lambda: vesta.Make(
            pb.MakeRequest(fields={"time": 1, "seq": 1, "colour": 3}), timeout=TIMEOUT
        ),
        lambda r: {"id": str(r.id)},
    )
    call(
        "segment",
        lambda: vesta.Segment(pb.SegmentRequest(tag="orders"), timeout=TIMEOUT),
        lambda r: {"number": str(r.number)},
    )
    call(
        "seq_next",
        lambda: vesta.SeqNext(pb.SeqNextRequest(key="chat:4711", count=3), timeout=TIMEOUT),
        lambda r: {"first": str(r.first), "last": str(r.last), "last_text": r.last_text},
    )
    call(
        "seq_current",
        lambda: vesta.SeqCurrent(pb.SeqCurrentRequest(key="chat:4711"), timeout=TIMEOUT),
        lambda r: {"current": str(r.current)},
    )
    call(
        "seq_next_zero",
        lambda: vesta.SeqNext(pb.SeqNextRequest(key="chat:4711", count=0), timeout=TIMEOUT),
        lambda r: {"last": str(r.last)},
    )
    health(channel, "health_")
    call("reflection_services", lambda: list_services(channel), lambda s: {"services": s})
    call("reflection_methods", lambda: reflected_methods(channel), lambda m: {"methods": m})


def guarded_script(channel, pb, pb_grpc, token):
    vesta = pb_grpc.VestaStub(channel)
    bearer = [("authorization", f"Bearer {token}")]
    call(
        "next_id_without_token",
        lambda: vesta.NextId(pb.NextIdRequest(), timeout=TIMEOUT),
        lambda r: {"id": str(r.id)},
    )
    call(
        "next_id_wrong_token",
        lambda: vesta.NextId(
            pb.NextIdRequest(), timeout=TIMEOUT, metadata=[("authorization", "Bearer nope")]
        ),
        lambda r: {"id": str(r.id)},
    )
    call(
        "next_id_with_token",
        lambda: vesta.NextId(pb.NextIdRequest(), timeout=TIMEOUT, metadata=bearer),
        lambda r: {"id": str(r.id), "id_text": r.id_text},
    )
    call(
        "next_ids_with_token",
        lambda: vesta.NextIds(pb.NextIdsRequest(count=10), timeout=TIMEOUT, metadata=bearer),
        lambda r: {"ids": ids(r.ids)},
    )
    call(
        "make_with_token",
        lambda: vesta.Make(
            pb.MakeRequest(fields={"time": 1000, "seq": 7}), timeout=TIMEOUT, metadata=bearer
        ),
        lambda r: {"id": str(r.id)},
    )
    # Open without a token, as /healthz is.
    health(channel, "health_without_token_")
    call("reflection_without_token", lambda: list_services(channel), lambda s: {"services": s})


def plaintext_probe(addr, pb, pb_grpc):
    """A NextId over an insecure channel (plaintext HTTP/2) to a TLS port: its error."""
    with grpc.insecure_channel(addr, options=OPTIONS) as channel:
        vesta = pb_grpc.VestaStub(channel)
        call(
            "plaintext_next_id",
            lambda: vesta.NextId(pb.NextIdRequest(), timeout=TIMEOUT),
            lambda r: {"id": str(r.id)},
        )


def channel_to(addr, ca):
    """A channel to addr: plaintext HTTP/2, or TLS trusting only the CA in the file `ca`."""
    if ca is None:
        return grpc.insecure_channel(addr, options=OPTIONS)
    credentials = grpc.ssl_channel_credentials(root_certificates=Path(ca).read_bytes())
    return grpc.secure_channel(addr, credentials, options=OPTIONS)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("addr", help="the server, HOST:PORT (plaintext HTTP/2 unless --ca)")
    parser.add_argument("--token", help="run the guarded script with this bearer token")
    parser.add_argument(
        "--ca", help="TLS, trusting this CA certificate (PEM); then a plaintext call too"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vesta-grpc-stubs") as out:
        pb, pb_grpc = stubs(out)
        with channel_to(args.addr, args.ca) as channel:
            if args.token is None:
                open_script(channel, pb, pb_grpc)
            else:
                guarded_script(channel, pb, pb_grpc, args.token)
        if args.ca is not None:
            plaintext_probe(args.addr, pb, pb_grpc)


if __name__ == "__main__":
    main()
