"""``python -m services.router``: run the router."""

from __future__ import annotations

import sys

from services.router.main import main

if __name__ == "__main__":
    sys.exit(main())
