"""``python -m dashboards``: see :mod:`dashboards.server`."""

from dashboards.server import main

raise SystemExit(main())
