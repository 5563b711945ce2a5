"""A real headless Chromium for the web tests (Debian's chromium and chromium-driver, which
.ci/run installs), and the waits that drive it without blocking the loop the API serves from.

A test module takes `browser` (a fixture: import it) and sets `pytestmark = NEEDS_CHROMIUM`.
"""

from __future__ import annotations

import asyncio
import shutil
from typing import Any, Callable, Iterator

import pytest

from tests.support.sessions import eventually

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
NEEDS_CHROMIUM = pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="needs Debian's chromium and chromium-driver (`apt-get install chromium chromium-driver`; .ci/run installs them)",
)


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,860"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


async def until(browser: Any, probe: Callable[[Any], Any], timeout: float = 30) -> Any:
    """Wait (without blocking the loop the API serves from) until `probe(browser)` is truthy."""
    from selenium.common.exceptions import WebDriverException

    def look() -> Any:
        try:
            return probe(browser)
        except WebDriverException:
            return None

    return await eventually(lambda: asyncio.to_thread(look), bool, timeout=timeout, every=0.1)


def find(selector: str) -> Callable[[Any], Any]:
    from selenium.webdriver.common.by import By

    return lambda browser: browser.find_elements(By.CSS_SELECTOR, selector)


def click(selector: str) -> Callable[[Any], bool]:
    """Find and click in one go (the inbox list is redrawn every few seconds)."""
    def probe(browser: Any) -> bool:
        found = find(selector)(browser)
        if len(found) != 1:
            return False
        found[0].click()
        return True
    return probe


def text_of(selector: str) -> Callable[[Any], str]:
    return lambda browser: " ".join(e.text for e in find(selector)(browser))


async def approve_and_confirm(browser: Any, card: str) -> None:
    """Approve from a card and confirm it: an edited or destructive call's Approve only asks."""
    await until(browser, click(f"{card} button.approve:not(.confirm-approval)"))
    [confirm] = await until(browser, lambda b: [e for e in find(f"{card} button.confirm-approval")(b) if e.is_displayed()])
    await asyncio.to_thread(confirm.click)
