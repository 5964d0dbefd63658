"""``python -m services.tools``: run the tool executor."""

from __future__ import annotations

import sys

from services.tools.main import main

if __name__ == "__main__":
    sys.exit(main())
