"""Test helpers for the dashboard page: the dashboard served from a thread, a headless Debian Chromium
driven through Debian's chromedriver (``make system-deps``), and reading what the page drew."""

from __future__ import annotations

import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from flywheel.dashboard.server import make_server

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@contextmanager
def served(root: Path):
    """The dashboard of ``root`` on a free port of 127.0.0.1; yields its URL."""
    server = make_server(root, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def chromium():
    """A headless Chromium (the Debian packages; selenium-manager is never asked to download one)."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.is_file()]
    assert not missing, f"{', '.join(missing)} missing: run `make system-deps` (Debian chromium and chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver, url: str) -> None:
    """Loads the page and waits until it has drawn its first data; fails on an error it shows."""
    driver.get(url)
    deadline = time.monotonic() + 60
    while not driver.execute_script("return document.body.dataset.ready === 'true'"):
        status = driver.execute_script("return document.querySelector('#status').textContent")
        assert not status.startswith("error"), status
        assert time.monotonic() < deadline, "the page did not finish loading in 60 s"
        time.sleep(0.1)


def settle(driver) -> None:
    """Waits until the page has no request in flight (it draws what it fetched as it arrives)."""
    deadline = time.monotonic() + 30
    while driver.execute_script("return document.body.dataset.pending !== '0'"):
        assert time.monotonic() < deadline, "the page's requests did not finish in 30 s"
        time.sleep(0.05)
    status = driver.execute_script("return document.querySelector('#status').textContent")
    assert not status.startswith("error"), status


def choose(driver, selector: str, value) -> None:
    """Sets a <select> or <input> the way a user's change would."""
    driver.execute_script(
        "const el = document.querySelector(arguments[0]); el.value = arguments[1];"
        "el.dispatchEvent(new Event(el.tagName === 'SELECT' ? 'change' : 'input'));",
        selector,
        str(value),
    )
    settle(driver)


def attrs(driver, selector: str, *names: str) -> list[dict]:
    """The attributes ``names`` (and the <title> child's text as "title") of every element ``selector`` matches."""
    return driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map(el => Object.fromEntries(arguments[1].map(n =>"
        " [n, n === 'title' ? (el.querySelector('title')?.textContent ?? el.getAttribute('title')) : el.getAttribute(n)])));",
        selector,
        list(names),
    )


def background(driver, selector: str) -> tuple[int, int, int, float]:
    """The computed background colour of the first element ``selector`` matches, as (r, g, b, alpha)."""
    css = driver.execute_script("return getComputedStyle(document.querySelector(arguments[0])).backgroundColor", selector)
    r, g, b, *a = (float(x) for x in re.findall(r"[\d.]+", css))
    return int(r), int(g), int(b), a[0] if a else 1.0


def screenshot(driver, path: Path) -> Path:
    """A picture of the whole page."""
    height = driver.execute_script("return document.body.scrollHeight")
    driver.set_window_size(1400, height + 100)
    driver.save_screenshot(str(path))
    print(f"dashboard screenshot: {path}")
    return path
