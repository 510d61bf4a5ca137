"""The web inspector in headless Chromium (Debian's chromium + chromium-driver, driven by Selenium)
against the HTTP API served by uvicorn on 127.0.0.1: enter a key and a question, read the decision,
family chips, evidence cards, rejections and the timing chart; data is shown as text, never as markup."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from interfaces_support import ENGINEERING, live_server

from evidex.engine import Engine
from evidex.interfaces.http import create_app
from evidex.interfaces.keys import KeyStore

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists() or not CHROMEDRIVER.exists(),
                       reason="needs Debian's chromium and chromium-driver: "
                              "apt-get install -y chromium chromium-driver"),
]

STATUSES = {"covered", "missing", "found-but-rejected"}
XSS_NAME = '<img src=x onerror="window.__pwned=1">'


@pytest.fixture
def browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager must never look for a driver online
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
                "--disable-dev-shm-usage", "--window-size=1280,2400", f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER), log_output=os.devnull), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def test_inspector_shows_the_decision(browser: Any, handbook_engine: Engine, keys: KeyStore,
                                      tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    key, _ = keys.create("inspector", XSS_NAME, ENGINEERING)
    wait = WebDriverWait(browser, 30)
    with live_server(create_app(handbook_engine, keys)) as base:
        browser.get(base + "/")
        assert browser.title == "evidex inspector"

        # A wrong key: the error is shown, nothing else.
        browser.find_element(By.ID, "api-key").send_keys("evx_0123456789ab_" + "A" * 43)
        browser.find_element(By.ID, "query").send_keys("How do I restore a Postgres backup?")
        browser.find_element(By.ID, "submit").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "Error 401"))
        assert not browser.find_element(By.ID, "result").is_displayed()

        # The right key, a composite question and an aspect focus.
        browser.find_element(By.ID, "api-key").clear()
        browser.find_element(By.ID, "api-key").send_keys(key)
        browser.find_element(By.ID, "query").clear()
        browser.find_element(By.ID, "query").send_keys(
            "How should a workload authenticate to Vaultline, and how often are its keys rotated?")
        browser.find_element(By.ID, "aspect-focus").send_keys("key rotation")
        browser.find_element(By.ID, "submit").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "Done"))
        wait.until(ec.visibility_of_element_located((By.CSS_SELECTOR, "[data-testid=evidence-card]")))

        action = browser.find_element(By.ID, "action").text.lower()
        assert action in {"proceed", "re-query", "stop"}
        assert browser.find_element(By.ID, "reason").text
        assert 0.0 <= float(browser.find_element(By.ID, "confidence").text) <= 1.0
        principal = browser.find_element(By.ID, "principal").text
        assert XSS_NAME in principal  # shown as text ...
        assert browser.execute_script("return window.__pwned === undefined")  # ... never run as markup
        assert not browser.find_elements(By.CSS_SELECTOR, "#decision img")

        chips = browser.find_elements(By.CSS_SELECTOR, "#families [data-testid=family]")
        assert chips and {c.get_attribute("data-status") for c in chips} <= STATUSES
        cards = browser.find_elements(By.CSS_SELECTOR, "[data-testid=evidence-card]")
        links = browser.find_elements(By.CSS_SELECTOR, ".chunk a[href*='#']")
        assert cards and links and all(a.get_attribute("href").startswith("https://") for a in links)
        assert all(a.get_attribute("rel") == "noopener noreferrer" for a in links)
        provenance = browser.find_element(By.CSS_SELECTOR, ".chunk .provenance").text
        for label in ("version", "published", "expires", "tier", "status"):
            assert label in provenance
        assert browser.find_elements(By.CSS_SELECTOR, "#rejected-counts .chip")

        bars = browser.find_elements(By.CSS_SELECTOR, "[data-testid=timing-bar]")
        stages = [b.get_attribute("data-stage") for b in bars]
        assert {"plan", "retrieve", "admit", "signals"} <= set(stages) and "total" not in stages
        widths = [b.find_element(By.CSS_SELECTOR, ".bar-fill").size["width"] for b in bars]
        assert max(widths) > 0
        assert browser.find_element(By.ID, "timing-total").text.startswith("total ")

        # A value the index holds no record of is shown apart from the aspects covered and missing.
        browser.find_element(By.ID, "aspect-focus").clear()
        browser.find_element(By.ID, "query").clear()
        browser.find_element(By.ID, "query").send_keys("Why does `vl_frob_window` delay the Vaultline key rotation?")
        browser.find_element(By.ID, "submit").click()
        unheld = wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#aspects [data-status=not-in-index]"))
        assert [c.text.split("\n")[0] for c in unheld] == ["vl_frob_window"]

        # The key stays for this tab's session only.
        assert browser.execute_script("return sessionStorage.getItem('evidex.apiKey')") == key
        assert browser.execute_script("return localStorage.length") == 0

        shot = tmp_path / "inspector.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
        lower = browser.find_element(By.CSS_SELECTOR, "section[aria-label='Timing']")
        browser.execute_script("arguments[0].scrollIntoView()", lower)
        assert lower.screenshot(str(tmp_path / "inspector-timing.png"))

        # The Content-Security-Policy blocked nothing of ours, and the page logged no errors.
        severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE" and "401" not in e["message"]]
        assert severe == []


def test_inspector_keeps_k_within_the_servers_limit(browser: Any, handbook_engine: Engine, keys: KeyStore) -> None:
    """With `serve --max-k 5` the form's default k of 10 had made every first search fail with 400."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    key, _ = keys.create("small-k", "alice", ENGINEERING)
    wait = WebDriverWait(browser, 30)
    with live_server(create_app(handbook_engine, keys, max_k=5)) as base:
        browser.get(base + "/")
        wait.until(lambda b: b.find_element(By.ID, "k").get_attribute("max") == "5")
        assert browser.find_element(By.ID, "k").get_attribute("value") == "5"
        browser.find_element(By.ID, "api-key").send_keys(key)
        browser.find_element(By.ID, "query").send_keys("How do I restore a Postgres backup?")
        browser.find_element(By.ID, "submit").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "Done"))
        assert len(browser.find_elements(By.CSS_SELECTOR, "[data-testid=evidence-card] .chunk")) <= 5
