"""``python -m gateway``: run the gateway."""

from __future__ import annotations

import sys

from gateway.main import main

if __name__ == "__main__":
    sys.exit(main())
