"""Debian's chromium, headless, driven by Playwright for Python (its own browser download
is never used): a fresh profile per test, and a record of every request the page made,
every response it read and every error it logged, for the tests to check."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import Browser, Page, Response, expect, sync_playwright

FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
INSTALL = "install Debian's chromium (apt-get install chromium; `make test` does it as root)"


def chromium_path() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.fail(f"chromium is not on PATH: {INSTALL}", pytrace=False)
    return found


@contextmanager
def chromium() -> Iterator[Browser]:
    """Playwright's launch() gives each browser a fresh temporary user data dir."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path(), headless=True, args=FLAGS
        )
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Tab:
    """A page in its own context (its own sessionStorage), and what it did."""

    page: Page
    base: str
    requests: list[str] = field(default_factory=list)
    bodies: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def _read(self, response: Response) -> None:
        if response.url.startswith(self.base) and response.status != 204:
            # a body the page dropped (a navigation) cannot be read, and was not seen
            with contextlib.suppress(Exception):
                self.bodies.append(response.text())

    def sign_in(self, token: str) -> None:
        self.page.goto(f"{self.base}/console")
        self.page.fill("#token", token)
        self.page.click("#login button[type=submit]")


# expect() waits 5 s by default, the actions 20 s (below): a value the console shows
# changes at its next refresh, 3 s later or, after a refresh that took long on a loaded
# machine, ten times as long as that one took (console.js): wait as long as an action
expect.set_options(timeout=20_000)


@contextmanager
def tab(browser: Browser, base: str) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(20_000)
    the_tab = Tab(page, base)
    page.on("request", lambda r: the_tab.requests.append(r.url))
    page.on("response", the_tab._read)
    page.on("pageerror", lambda e: the_tab.errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and the_tab.errors.append(m.text))
    try:
        yield the_tab
    finally:
        context.close()
