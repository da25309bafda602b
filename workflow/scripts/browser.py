"""Headless Chromium for the JupyterLab test: `python workflow/scripts/browser.py` installs it if it can.

Debian's `chromium` and `chromium-driver` are installed with apt where apt is available and we are
root or have passwordless sudo (as `make data` does for WordNet); otherwise this says what to
install, and tests/test_jupyterlab.py skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

DEBIAN_PACKAGES = ("chromium", "chromium-driver")


def find_chromium() -> tuple[str | None, str | None]:
    """Return (browser, driver) paths, or (None, None) when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else (None, None)


def ensure_chromium() -> str:
    """Install Chromium and its driver with apt if missing and possible; return a one-line status."""
    if find_chromium()[0]:
        return f"Chromium for the JupyterLab test: {find_chromium()[0]}"
    sudo = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
    if shutil.which("apt-get") and sudo is not None:
        quiet = dict(check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        install = sudo + ["apt-get", "install", "-y", "-q", *DEBIAN_PACKAGES]
        if subprocess.run(install, **quiet).returncode != 0:  # stale package lists: refresh once
            subprocess.run(sudo + ["apt-get", "update", "-q"], **quiet)
            subprocess.run(install, **quiet)
    if find_chromium()[0]:
        return f"Chromium for the JupyterLab test: {find_chromium()[0]} (installed with apt)"
    return (
        "no Chromium: the JupyterLab browser test will be skipped; install it with "
        f"`sudo apt-get install {' '.join(DEBIAN_PACKAGES)}` (or put chromium and chromedriver on PATH)"
    )


if __name__ == "__main__":
    print(ensure_chromium())
    sys.exit(0)
