"""``python -m trizk.server``: the same as the ``trizk-server`` console script."""

from trizk.server.config.main import main

raise SystemExit(main())
