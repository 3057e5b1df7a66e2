"""The web inspector in a real headless Chromium (Debian's chromium + chromium-driver, Selenium).

1. Signing in with alice's key shows her pages: facts with validity, documents and grafts, the
   request trace, store and hit-rate figures.
2. Approving a review item in the page replaces the fact: the review list empties and the facts
   page shows the approved statement instead of the old one.
A screenshot of each page is saved in the test's temporary folder, and under bench/results/ui/
(the committed ones) only when GRM_UI_SHOTS=1, so a test run leaves the checkout clean.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.serve.conftest import MODEL

pytestmark = pytest.mark.browser
COMMITTED_SHOTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "ui"
DRIVER = shutil.which("chromedriver")
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture()
def browser():
    if not DRIVER or not BROWSER:
        pytest.skip("chromium and chromium-driver are not installed (make services installs them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = BROWSER
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,900"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def seed(srv) -> dict:
    h = srv.headers("alice")
    post = lambda path, body: httpx.post(srv.url + path, json=body, headers=h, timeout=60).json()  # noqa: E731
    fact = post("/v1/memories", {"memory": "my boat is called Heron"})["results"][0]["id"]
    post("/v1/memories", {"memory": "the harbor opens at 6"})
    r = post("/v1/memories", {"messages": [{"role": "user", "content": "my boat is called Osprey"}]})
    review = next(x["id"] for x in r["results"] if x["event"] == "REVIEW")
    job = post("/v1/documents", {"name": "harbor-guide.txt",
                                 "text": "The harbor guide. Boats dock on the north quay.\n\n" * 6})
    for _ in range(300):
        if httpx.get(f"{srv.url}/v1/jobs/{job['id']}", headers=h).json()["status"] == "done":
            break
        time.sleep(0.1)
    prompt = "The harbor guide. Boats dock on the north quay.\n\n" * 6 + "Where do boats dock?"
    for _ in range(2):
        post("/v1/completions", {"model": MODEL, "prompt": prompt, "max_tokens": 4})
    return {"fact": fact, "review": review}


def test_inspector_pages_and_review_approval_in_a_browser(server, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    def wait_for(element_id: str):  # after a click the next page loads on its own time
        return WebDriverWait(b, 30).until(ec.presence_of_element_located((By.ID, element_id)))

    b = browser
    ids = seed(server)
    SHOTS = COMMITTED_SHOTS if os.environ.get("GRM_UI_SHOTS") == "1" else tmp_path / "ui"
    SHOTS.mkdir(parents=True, exist_ok=True)
    b.get(server.url + "/ui/facts")
    assert b.current_url.endswith("/ui/login")  # no key: the login form
    b.find_element(By.ID, "key").send_keys(server.keys["alice"])
    b.find_element(By.ID, "sign-in").click()
    assert wait_for("tenant").text == "alice"
    assert b.find_element(By.ID, "fact-count").text == "2"
    assert b.find_element(By.ID, "hit-rate").text.endswith("%")
    b.save_screenshot(str(SHOTS / "overview.png"))

    b.get(server.url + "/ui/facts")
    facts = b.find_element(By.ID, "facts").text
    assert "my boat is called Heron" in facts and "the harbor opens at 6" in facts
    b.save_screenshot(str(SHOTS / "facts.png"))

    b.get(server.url + "/ui/documents")
    assert "harbor-guide.txt" in b.find_element(By.ID, "documents").text
    assert "document" in b.find_element(By.ID, "grafts").text
    b.save_screenshot(str(SHOTS / "documents.png"))

    b.get(server.url + "/ui/requests")
    assert "Where do boats dock?" in b.find_element(By.ID, "requests").text
    b.save_screenshot(str(SHOTS / "requests.png"))

    b.get(server.url + "/ui/review")
    assert "my boat is called Osprey" in b.find_element(By.ID, f"review-{ids['review']}").text
    b.save_screenshot(str(SHOTS / "review.png"))
    b.find_element(By.ID, f"approve-{ids['review']}").click()
    assert "approved" in wait_for("message").text
    assert b.find_elements(By.ID, "no-reviews")
    b.save_screenshot(str(SHOTS / "review-approved.png"))

    b.get(server.url + "/ui/facts")
    facts = b.find_element(By.ID, "facts").text
    assert "my boat is called Osprey" in facts and "my boat is called Heron" not in facts

    b.get(server.url + f"/ui/facts/{ids['fact']}")
    lineage = b.find_element(By.ID, "lineage").text
    assert "superseded" in lineage and "my boat is called Heron" in lineage
    b.save_screenshot(str(SHOTS / "fact-lineage.png"))
