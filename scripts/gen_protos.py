"""Generate the importable ``agentmesh`` contracts package from protos/.

Writes ``agentmesh/<area>/v1/*_pb2.py`` (+ ``_pb2_grpc.py``) with typed ``.pyi``
stubs from mypy-protobuf, and the ``__init__.py``/``py.typed`` files that make
it a typed package. The output is git-ignored: protos/ is the only source of
truth. A stamp of the protos' hash makes re-runs free when nothing changed.

Usage: python scripts/gen_protos.py [--force]
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = ROOT / "protos"
OUT = ROOT / "agentmesh"
STAMP = OUT / ".protos.sha256"


def protos_digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(PROTOS)).encode())
        h.update(f.read_bytes())
    h.update(Path(__file__).read_bytes())
    return h.hexdigest()


def main() -> int:
    files = sorted(PROTOS.glob("agentmesh/**/*.proto"))
    digest = protos_digest(files)
    if "--force" not in sys.argv and STAMP.is_file() and STAMP.read_text() == digest:
        return 0
    import os

    import grpc_tools
    from grpc_tools import protoc

    # The mypy-protobuf plugins live beside this interpreter (the venv's bin/).
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"

    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir()
    include = Path(grpc_tools.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTOS}",
        f"-I{include}",
        f"--python_out={ROOT}",
        f"--grpc_python_out={ROOT}",
        f"--mypy_out={ROOT}",
        f"--mypy_grpc_out={ROOT}",
        *[str(f) for f in files],
    ]
    if protoc.main(args) != 0:
        print("error: protoc failed", file=sys.stderr)
        return 1
    # Every directory of the generated tree becomes a regular package.
    for d in [OUT, *(p for p in OUT.rglob("*") if p.is_dir())]:
        (d / "__init__.py").touch()
    (OUT / "py.typed").touch()
    (OUT / "__init__.py").write_text('"""AgentMesh contracts, generated from protos/ by scripts/gen_protos.py."""\n')
    STAMP.write_text(digest)
    print(f"generated {len(files)} protos into {OUT.relative_to(ROOT)}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
