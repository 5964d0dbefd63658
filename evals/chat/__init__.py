"""Plain-chat prompts (dev and held-out) and ``python -m evals.chat``, their degenerate-answer rate."""
