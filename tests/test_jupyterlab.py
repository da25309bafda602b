"""JupyterLab as readers use it: start a server on localhost, open a notebook in headless Chromium,
run all cells on the small preset, and check that no cell errs (a failing probe cell appended to the
copy shows the check works) and that a table and a figure render.

Needs Chromium and its driver (`make test` installs Debian's `chromium chromium-driver` where apt is
available); skipped without them unless ORDERLIB_REQUIRE_BROWSER=1. The screenshot is saved under
runs/jupyterlab/.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from browser import find_chromium

from orderlib.paths import repo_root, runs_root

NOTEBOOK = "00_oe_fig2_toy2d.ipynb"  # small preset: seconds of work, a table and a figure
PROBE = "probe: a last cell that fails, so the test shows it would see an error"


def _need(reason: str):
    if os.environ.get("ORDERLIB_REQUIRE_BROWSER") == "1":
        pytest.fail(reason + " (ORDERLIB_REQUIRE_BROWSER=1)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    """A JupyterLab server on localhost serving a copy of the notebook (autosave must not touch the repo)."""
    root = tmp_path / "lab"
    root.mkdir()
    nb = nbformat.read(repo_root() / "notebooks" / NOTEBOOK, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(f"raise RuntimeError({PROBE!r})"))  # proves errors are seen
    nbformat.write(nb, root / NOTEBOOK)
    port, token = _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws"),
        "MPLBACKEND": "module://matplotlib_inline.backend_inline",
    }
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--port={port}",
        "--ip=127.0.0.1",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(120):  # up to 60 s for the server to listen
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited: {(tmp_path / 'lab.log').read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK}?token={token}"
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


# JavaScript run in the page: JupyterLab's app object (exposed by --LabApp.expose_app_in_browser).
_STATE = """
const app = window.jupyterapp; if (!app) return null;
const panel = app.shell.currentWidget; if (!panel || !panel.content || !panel.sessionContext) return null;
const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
const cells = panel.content.widgets.filter(c => c.model.type === 'code');
return {kernel: kernel ? kernel.status : null,
        pending: cells.filter(c => c.model.executionCount === null || c.node.querySelector('.jp-InputArea-prompt')
                                   && c.node.querySelector('.jp-InputArea-prompt').textContent.includes('*')).length,
        errors: cells.flatMap(c => c.model.outputs.toJSON().filter(o => o.output_type === 'error')
                                   .map(o => o.ename + ': ' + o.evalue)),
        tables: document.querySelectorAll('.jp-RenderedHTMLCommon table').length,
        images: document.querySelectorAll('.jp-RenderedImage img').length,
        cells: cells.length};
"""


def test_notebook_runs_in_jupyterlab_in_a_headless_browser(lab):
    chromium, driver_path = find_chromium()
    if chromium is None:
        _need("no Chromium and chromedriver (Debian: apt install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    shot = runs_root() / "jupyterlab" / f"{Path(NOTEBOOK).stem}.png"
    try:
        driver.get(lab)
        deadline = time.time() + 120
        while time.time() < deadline:  # the notebook is open and its kernel is up
            state = driver.execute_script(_STATE)
            if state and state["kernel"] == "idle":
                break
            time.sleep(1)
        else:
            pytest.fail(f"the notebook or its kernel did not come up in JupyterLab: {state}")
        driver.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells');")
        deadline, idle_since = time.time() + 600, None
        while time.time() < deadline:  # every code cell executed and the kernel idle for 3 s
            state = driver.execute_script(_STATE)
            done = state and state["kernel"] == "idle" and state["pending"] == 0
            idle_since = (idle_since or time.time()) if done else None
            if idle_since and time.time() - idle_since > 3:
                break
            time.sleep(1)
        else:
            pytest.fail(f"the notebook did not finish in JupyterLab within 10 minutes: {state}")
        shot.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(shot))
        assert state["errors"] == [f"RuntimeError: {PROBE}"], state["errors"]  # the probe, and no other error
        assert state["tables"] >= 1, "no table rendered"
        assert state["images"] >= 1, "no figure rendered"
    finally:
        driver.quit()
