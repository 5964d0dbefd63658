"""Evaluation of the agent turn through the real mesh (``make eval``, ``python -m evals``).

``agent_eval`` holds the cases, the running, the scoring and the report;
``__main__`` builds the mesh (a real vLLM engine, the tool executor, one
router per tool-selection mode) and writes ``EVAL.md``. The cases live in
``cases/``: ``dev.jsonl`` is what the router is tuned on, ``heldout.jsonl`` is
what it is judged on.
"""
