"""The review page in a real browser: headless Debian Chromium driven by Selenium.

Labels five items with the keyboard, kills the server (SIGKILL) while a sixth verdict is being
typed, restarts it and checks that the five verdicts survived and the page resumes at the first
unlabelled item. ``make test`` installs ``chromium`` and ``chromium-driver`` when missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dualview.review.store import read_verdicts
from tests.helpers import free_port
from tests.review_fixtures import write_dv_file

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1000",
]

pytestmark = pytest.mark.slow
CTRL_ENTER = "<ctrl-enter>"


def _start(data: Path, port: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "dualview", "review", str(data), "--n", "8"]
    cmd += ["--reviewer", "ann", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stdout.read().decode()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError("server did not start in 60 s")


@pytest.fixture()
def browser(tmp_path: Path):
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.fail("chromium/chromedriver missing: apt-get install -y chromium chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'profile'}")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _press(driver, *keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    chain = ActionChains(driver)
    for key in keys:
        if key == CTRL_ENTER:
            chain.key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL)
        else:
            chain.send_keys(key)
    chain.perform()


def _current(driver) -> str:
    return driver.find_element("id", "review").get_attribute("data-item")


def _wait_for_other_item(driver, before: str) -> None:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            if _current(driver) != before:
                return
        except Exception:  # the page is being replaced
            pass
        time.sleep(0.1)
    raise AssertionError(f"the page did not move on from {before}: {driver.page_source[:500]}")


def test_label_by_keyboard_survives_a_killed_server(browser, tmp_path: Path) -> None:
    from selenium.webdriver.common.keys import Keys

    data = write_dv_file(tmp_path / "dv.jsonl", {"law": 6, "food": 3})
    verdicts = tmp_path / "dv.jsonl.review.jsonl"
    port = free_port()
    server = _start(data, port)
    shots = Path(os.environ.get("DUALVIEW_REVIEW_SCREENSHOTS", tmp_path))
    try:
        browser.get(f"http://127.0.0.1:{port}/")
        # Untrusted passages are shown as text, never run.
        assert browser.execute_script("return window.__pwned === undefined")
        # (keys pressed, expected verdict, failure mode, note)
        plan = [
            (["v"], "valid", None, ""),
            (["2"], "invalid", "not_reversal", ""),
            (
                ["n", "P+ is <b>still</b> fine", Keys.ESCAPE, "v"],
                "valid",
                None,
                "P+ is <b>still</b> fine",
            ),
            (["x", "6"], "invalid", "unnatural", ""),
            (["n", "copy", CTRL_ENTER, Keys.ESCAPE], None, None, "copy"),  # no verdict yet
            (["x", Keys.ENTER], None, None, "copy"),  # no failure mode yet: not saved
            (["1"], "invalid", "near_copy", "copy"),
        ]
        expected, labelled = [], []
        for keys, verdict, mode, note in plan:
            item = _current(browser)
            _press(browser, *keys)
            if verdict is None:
                time.sleep(0.5)
                assert _current(browser) == item  # still here, with an error shown
                assert browser.find_element("id", "status").get_attribute("class") == "error"
                continue
            _wait_for_other_item(browser, item)
            expected.append((item, verdict, mode, note))
            labelled.append(item)
        assert browser.execute_script("return window.__pwned === undefined")
        # A sixth verdict is being typed when the server dies.
        _press(browser, "n", "half a thought")
        browser.save_screenshot(str(shots / "review-before-kill.png"))
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        rows = read_verdicts(verdicts)
        got = [(r["item"], r["verdict"], r["failure_mode"], r["note"]) for r in rows]
        assert got == expected and all(r["reviewer"] == "ann" for r in rows)

        server = _start(data, port)
        browser.get(f"http://127.0.0.1:{port}/")
        resumed = _current(browser)
        assert resumed not in labelled
        progress = browser.find_element("css selector", ".progress strong").text
        assert progress == "5"
        # a labelled item shows the saved verdict after the restart
        browser.get(f"http://127.0.0.1:{port}/item/0")
        status = browser.find_element("id", "status").text
        assert status.startswith("saved earlier:")
        browser.get(f"http://127.0.0.1:{port}/item/{_index_of(browser, port, resumed)}")
        browser.save_screenshot(str(shots / "review-after-restart.png"))
        assert [r["item"] for r in read_verdicts(verdicts)] == labelled
    finally:
        server.kill()
        server.wait(10)
        if shots != tmp_path:
            shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def _index_of(driver, port: int, item: str) -> int:
    for index in range(8):
        driver.get(f"http://127.0.0.1:{port}/item/{index}")
        if _current(driver) == item:
            return index
    raise AssertionError(f"{item} not found")
