"""The web explorer in a real browser: headless Chromium (Debian's chromium and
chromium-driver, installed by `make browser`) through selenium, against a seeded brain served
by webui.host.UIHost on loopback. One browser for the module. Every page is loaded and
screenshotted at 1280x800 (into the test's tmp dir; also into docs/screenshots/ when
BRAIN_UI_SCREENSHOTS is set); a search opens a note and follows a link; pin, tags, forget and
restore are done through the pages and checked through the MCP tools (fastmcp.Client in
process). The browser log must show no error (a CSP violation would be one)."""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from brain.trust.identity import Identity
from tests.webui_support import chromium, live_ui, make_brain, seed

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FOUND = chromium()
if FOUND is None:
    pytest.skip("no chromium and chromedriver on PATH: `make browser` installs them "
                "(apt-get install chromium chromium-driver)", allow_module_level=True)

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
W, H = 1280, 800


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, _empty_shard: Path) -> Iterator[Any]:
    base = tmp_path_factory.mktemp("webui-browser")
    b, settings = make_brain(base, _empty_shard)
    ids = seed(b, base, "kestrel", Identity("default", "default"))
    shots = base / "screenshots"
    shots.mkdir()
    try:
        with live_ui(b, settings) as host:
            yield {"brain": b, "host": host, "ids": ids, "shots": shots, "base": base}
    finally:
        b.close()


@pytest.fixture(scope="module")
def driver(world: Any) -> Iterator[Any]:
    browser, chromedriver = FOUND  # type: ignore[misc]
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={W},{H}", "--hide-scrollbars"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=opts, service=Service(chromedriver))
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": W, "height": H, "deviceScaleFactor": 1, "mobile": False})
    d.get(world["host"].login_url())  # the one-time link brain ui prints
    try:
        yield d
    finally:
        d.quit()


def _shot(world: Any, d: Any, name: str) -> Path:
    path = world["shots"] / f"{name}.png"
    d.save_screenshot(str(path))
    with path.open("rb") as fh:
        head = fh.read(24)
    assert struct.unpack(">II", head[16:24]) == (W, H), f"{name}: not {W}x{H}"
    if os.environ.get("BRAIN_UI_SCREENSHOTS"):
        out = ROOT / "docs" / "screenshots"
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out / path.name)
    return path


def _errors(d: Any) -> list[str]:
    return [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]


def _wait(d: Any, css: str) -> Any:
    try:
        return WebDriverWait(d, 10).until(
            ec.presence_of_element_located((By.CSS_SELECTOR, css)))
    except Exception as exc:
        raise AssertionError(f"no {css} at {d.current_url}: {d.page_source[:2000]}") from exc


async def _tool(b: Any, name: str, **args: Any) -> dict[str, Any]:
    from mcp_server import create_server

    async with Client(create_server(brain=b)) as c:
        res = await c.call_tool(name, args)
    return dict(res.structured_content or {})


def test_every_page_loads_and_is_screenshotted(world: Any, driver: Any) -> None:
    ids, base = world["ids"], world["host"].base_url
    pages = {
        "search": ("/search?q=kestrel+caching+redis", "#note-hits .hit"),
        "note": (f"/note/{ids['hub']}", "#note #content"),
        "graph": ("/graph?project=shop", "#graph[data-drawn]"),
        "graph-note": (f"/graph?note={ids['hub']}&depth=2", "#graph[data-drawn]"),
        "sessions": ("/sessions?project=shop", "#timeline .hit"),
        "mistakes": ("/sessions?tab=mistakes&project=shop", "#mistakes .hit .fix"),
        "sources": ("/sources", "#sources td"),
        "document": (f"/documents/{ids['file_id']}", "#chunks .hit"),
        "health": ("/health", "#h-health table"),
    }
    for name, (url, css) in pages.items():
        driver.get(base + url)
        _wait(driver, css)
        _shot(world, driver, name)
    text = driver.page_source
    assert "offline/hash-384" in text  # the health page names the model in use
    driver.get(base + "/sources")
    src = driver.find_element(By.ID, "sources").text
    assert "kestrel-src" in src and " 2 " in f" {src} "  # the source and its two files
    driver.get(base + "/sessions?tab=mistakes&project=shop")
    assert "×2" in driver.find_element(By.ID, "mistakes").text  # recurred once
    driver.get(base + f"/graph?note={ids['hub']}&depth=2")
    drawn = int(_wait(driver, "#graph[data-drawn]").get_attribute("data-drawn"))
    assert drawn == 3  # the hub, the note it links and the note linking it
    errors = _errors(driver)
    assert errors == [], "\n".join(errors)


def test_search_open_a_note_and_follow_a_link(world: Any, driver: Any) -> None:
    ids, base = world["ids"], world["host"].base_url
    driver.get(base + "/search")
    box = driver.find_element(By.ID, "q")
    box.send_keys("kestrel caching decision Redis")
    box.submit()
    first = _wait(driver, "#note-hits .hit a.title")
    badges = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#note-hits .badge")]
    assert badges and set(badges) <= {"both", "dense", "keyword"}
    fresh = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#file-hits .hit .badge")
             if "fresh-" in (e.get_attribute("class") or "")]
    assert fresh and set(fresh) == {"synced"}  # the source's files, as on disk
    assert driver.find_elements(By.CSS_SELECTOR, "#doc-hits .hit")  # and the document
    first.click()
    _wait(driver, "#note #content")
    assert driver.current_url.endswith(f"/note/{ids['hub']}")
    driver.find_element(By.CSS_SELECTOR, f"#links-out a[href='/note/{ids['other']}']").click()
    _wait(driver, "#note #content")
    assert driver.current_url.endswith(f"/note/{ids['other']}")
    backlinks = driver.find_element(By.ID, "links-in").text
    assert ids["hub"] in backlinks
    changed = world["base"] / "src-kestrel" / "kestrel_cache.py"
    changed.write_text(changed.read_text() + "TTL = 90  # changed since the last sync\n")
    driver.get(base + "/search?q=redis+cache+ttl&scope=files")
    row = _wait(driver, "#file-hits .hit")
    assert "kestrel_cache.py" in row.text and "stale indexed" in row.text
    errors = _errors(driver)
    assert errors == [], "\n".join(errors)


def _act(d: Any, button: str) -> None:
    d.find_element(By.ID, button).click()
    _wait(d, "#confirm-yes").click()  # every action asks first
    _wait(d, "#flash")


async def test_pin_tags_forget_restore_through_the_pages(world: Any, driver: Any) -> None:
    b, zk, base = world["brain"], world["ids"]["third"], world["host"].base_url
    driver.get(base + f"/note/{zk}")
    _wait(driver, "#note")
    driver.find_element(By.ID, "act-pin").click()
    _wait(driver, "#confirm-no").click()  # cancelled: nothing changes
    assert (await _tool(b, "get_note", zk_id=zk))["note"]["pinned"] is False
    _act(driver, "act-pin")
    assert driver.find_element(By.ID, "pinned")
    assert (await _tool(b, "get_note", zk_id=zk))["note"]["pinned"] is True
    _shot(world, driver, "note-pinned")
    tags = driver.find_element(By.ID, "tag-input")
    tags.clear()
    tags.send_keys("ops, runbook")
    _act(driver, "act-tags")
    assert (await _tool(b, "get_note", zk_id=zk))["note"]["tags"] == ["ops", "runbook"]
    _act(driver, "act-forget")
    assert driver.find_element(By.ID, "forgotten")
    with pytest.raises(ToolError, match="NOTE_NOT_FOUND"):
        await _tool(b, "get_note", zk_id=zk)
    found = await _tool(b, "search_memory", query="kestrel deploy runbook web tier",
                        project="shop")
    assert zk not in [n["zk_id"] for n in found["results"]]
    _act(driver, "act-restore")
    back = (await _tool(b, "get_note", zk_id=zk))["note"]
    assert back["pinned"] is True and back["tags"] == ["ops", "runbook"]
    errors = _errors(driver)
    assert errors == [], "\n".join(errors)
