#!/usr/bin/env python3
"""Generates ``src/vesta_client/pb/`` (the messages, their type stubs and the service stub)
from the repository's ``proto/vesta/v1/vesta.proto`` with grpcio-tools, so users of the
package need no protoc. The import of the messages in the service stub is made relative (the
stubs live inside the package, not at ``vesta.v1``).

``generate.py`` rewrites the files; ``generate.py --check`` exits 1 naming each file that
differs from what the .proto makes now (``tests/test_generated.py`` runs the check).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
PROTO_ROOT = PACKAGE.parents[1] / "proto"
OUT = PACKAGE / "src" / "vesta_client" / "pb"
FILES = ("vesta_pb2.py", "vesta_pb2.pyi", "vesta_pb2_grpc.py")
ABSOLUTE = "from vesta.v1 import vesta_pb2 as vesta_dot_v1_dot_vesta__pb2"
RELATIVE = "from . import vesta_pb2 as vesta_dot_v1_dot_vesta__pb2"


def generated() -> dict[str, str]:
    """Each file's text as the .proto makes it now."""
    with tempfile.TemporaryDirectory(prefix="vesta-pb") as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                f"-I{PROTO_ROOT}",
                f"--python_out={tmp}",
                f"--pyi_out={tmp}",
                f"--grpc_python_out={tmp}",
                "vesta/v1/vesta.proto",
            ],
            check=True,
        )
        out = {name: (Path(tmp) / "vesta" / "v1" / name).read_text() for name in FILES}
    grpc_stub = out["vesta_pb2_grpc.py"]
    if ABSOLUTE not in grpc_stub:
        raise SystemExit(f"vesta_pb2_grpc.py: no line `{ABSOLUTE}` to make relative")
    out["vesta_pb2_grpc.py"] = grpc_stub.replace(ABSOLUTE, RELATIVE)
    return out


def stale() -> list[str]:
    """The files that differ from what the .proto makes now."""
    return [
        name
        for name, text in generated().items()
        if not (OUT / name).exists() or (OUT / name).read_text() != text
    ]


def main() -> None:
    if sys.argv[1:] == ["--check"]:
        names = stale()
        if names:
            print(f"stale: {', '.join(names)} (run clients/python/tools/generate.py)")
            raise SystemExit(1)
        return
    for name, text in generated().items():
        (OUT / name).write_text(text)


if __name__ == "__main__":
    main()
