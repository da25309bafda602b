"""nbval settings for `make test`'s notebook run.

After a cell finishes, nbval waits a fixed 5 s for each of its output messages and fails the cell
("Timeout of 5 seconds exceeded waiting for output") when one is later, which happens on a busy
2-core machine although the cell itself ran fine. Wait up to OUTPUT_TIMEOUT_S instead; the
per-cell execution limit stays nbval's (--nbval-cell-timeout)."""

OUTPUT_TIMEOUT_S = 120


def pytest_collection_modifyitems(items):
    for item in items:
        if hasattr(item, "output_timeout"):  # nbval's notebook cells
            item.output_timeout = OUTPUT_TIMEOUT_S
