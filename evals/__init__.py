"""Evaluation of the agent turn through the real mesh (``make eval``, ``python -m evals``).

``cases`` (the case format and loading), ``records`` (what a turn did),
``arguments`` and ``scoring`` (judging a turn), ``runner`` (driving the mesh),
``summary`` and ``report`` (EVAL.md); ``__main__`` builds the mesh (a real vLLM engine, the tool executor, one
router per tool-selection mode) and writes ``EVAL.md``. The cases live in
``cases/``: ``dev.jsonl`` is what the router is tuned on, ``heldout.jsonl`` is
what it is judged on.
"""

from services.runtime.forks import exec_only

exec_only()  # before anything here imports gRPC: its children reach their exec (``services/runtime/forks.py``)
