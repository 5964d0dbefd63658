"""``python -m services.inference``: run the inference service."""

from __future__ import annotations

import sys

from services.inference.main import main

if __name__ == "__main__":
    sys.exit(main())
