"""``python -m trizk.server``: the same as the ``trizk-server`` console script."""

from .main import main

raise SystemExit(main())
