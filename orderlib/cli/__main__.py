"""python -m orderlib.cli ..."""

from orderlib.cli import main

raise SystemExit(main())
