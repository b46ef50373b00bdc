"""``python -m trizk.compat.bench``: the standalone benchmark (:mod:`.standalone`)."""

import sys

from trizk.compat.bench.standalone import main

if __name__ == "__main__":
    sys.exit(main())
