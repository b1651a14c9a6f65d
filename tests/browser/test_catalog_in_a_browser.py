"""The catalog's pages in headless Chromium (docs/gateway.md, "The catalog page"): served by a
gateway (tests/catalog_site.py) and written by ``slurm-image catalog --html``, read as a person
reads them: the rows, the filter, the alias page's chain and ``srun`` line, the requests page
following a job without a reload, markup from inside an image staying text, and axe-core's
accessibility rules. Screenshots go to ``.ci-artifacts/screenshots/``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from catalog_site import (
    INJECTED,
    LIVE,
    TORCH_DIGEST,
    CatalogSite,
    catalog_site,
    sqsh,
    write_progress,
)
from gateway_lab import GatewayLab, gateway_lab
from slurm_image.composition.main import main

pytestmark = pytest.mark.usefixtures("browser")

PUBLIC = ["hostile", "torch", "vllm-serve"]
WAIT_S = 20


@pytest.fixture(scope="module")
def site() -> Iterator[CatalogSite]:
    with catalog_site() as running:
        yield running


@pytest.fixture(scope="module")
def exported(site: CatalogSite, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``slurm-image catalog --html DIR`` of the site's store, as its command line runs it."""
    folder = tmp_path_factory.mktemp("pages")
    main(
        ["--profile", str(site.lab.profile), "--gateway", "local", "catalog", "--html", str(folder)]
    )
    return folder


def served(site: CatalogSite, path: str) -> str:
    return site.lab.url + path


def static(folder: Path, path: str) -> str:
    return (folder / path).as_uri()


def visit(browser: Any, url: str) -> None:
    browser.get_log("browser")  # what earlier pages logged is theirs
    browser.get(url)
    wait_for(browser, lambda: browser.execute_script("return document.readyState") == "complete")


def wait_for(browser: Any, condition: Any, timeout_s: float = WAIT_S) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout_s, poll_frequency=0.1).until(lambda _: condition())


def rows(browser: Any, table: str = "catalog") -> list[list[str]]:
    """The visible rows of a table, each as its cells' text."""
    return browser.execute_script(
        "return Array.from(document.getElementById(arguments[0]).tBodies[0].rows)"
        ".filter(r => !r.hidden).map(r => Array.from(r.cells, c => c.textContent.trim()))",
        table,
    )


def errors_logged(browser: Any) -> list[dict[str, Any]]:
    return [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]


def test_the_catalog_lists_the_public_aliases_with_their_facts_signer_and_architectures(
    browser: Any, site: CatalogSite, screenshots: Path
) -> None:
    visit(browser, served(site, "/"))
    shown = {row[0].split()[0]: row for row in rows(browser)}
    assert sorted(shown) == PUBLIC, "the private alias is not shown to a reader with no identity"
    torch = dict(zip(headers(browser), shown["torch"], strict=True))
    assert torch["Architectures"] == "x86_64"
    assert torch["Source"] == "registry.example.org/ml/torch"
    assert torch["Tag"] == "2.4"
    assert torch["Signer"] == "unsigned"
    assert torch["Owner"] == "alice"
    assert (torch["Python"], torch["pip"], torch["vLLM"]) == ("3.11.2", "23.0.1", "-")
    assert torch["Size"] == "4.1 kB"
    serve = dict(zip(headers(browser), shown["vllm-serve"], strict=True))
    assert (serve["Role"], serve["vLLM"], serve["Python"]) == ("serving", "0.6.3", "-")
    assert errors_logged(browser) == []
    browser.save_screenshot(str(screenshots / "catalog.png"))


def headers(browser: Any) -> list[str]:
    return list(
        browser.execute_script(
            "return Array.from(document.querySelectorAll('#catalog thead th'),"
            " th => th.textContent.trim())"
        )
    )


def test_the_filter_narrows_the_rows_and_a_column_sorts_them(
    browser: Any, site: CatalogSite, screenshots: Path
) -> None:
    from selenium.webdriver.common.by import By

    visit(browser, served(site, "/"))
    box = browser.find_element(By.ID, "filter")
    box.send_keys("vllm")
    wait_for(browser, lambda: len(rows(browser)) == 1)
    assert rows(browser)[0][0] == "vllm-serve"
    assert browser.find_element(By.ID, "shown").text == "1 of 3 shown"
    browser.save_screenshot(str(screenshots / "catalog-filtered.png"))
    box.clear()
    box.send_keys("registry.example.org/ml python 3.11")
    wait_for(browser, lambda: [row[0] for row in rows(browser)] == ["torch"])
    box.clear()
    box.send_keys(" ")  # clear() sends no input event; the filter then matches every row
    wait_for(browser, lambda: len(rows(browser)) == 3)

    size = headers(browser).index("Size")
    browser.find_elements(By.CSS_SELECTOR, "#catalog thead th button")[size].click()
    assert [row[0] for row in rows(browser)] == ["hostile", "torch", "vllm-serve"]
    browser.find_elements(By.CSS_SELECTOR, "#catalog thead th button")[size].click()
    assert [row[0] for row in rows(browser)] == ["vllm-serve", "torch", "hostile"]


def test_the_alias_page_shows_the_chain_and_an_srun_line_of_the_stable_path(
    browser: Any, site: CatalogSite, screenshots: Path
) -> None:
    from selenium.webdriver.common.by import By

    visit(browser, served(site, "/"))
    browser.find_element(By.LINK_TEXT, "torch").click()
    wait_for(browser, lambda: browser.current_url == served(site, "/aliases/torch"))
    srun = browser.find_element(By.ID, "srun").text
    stable = f"{site.lab.layout.images}/by-name/x86_64/torch.sqsh"
    assert srun == f"srun --container-image={stable} --pty bash"
    chain = browser.find_element(By.CSS_SELECTOR, "table.chain").text
    assert f"Pin {TORCH_DIGEST}" in chain
    assert "Config sha256:" + "c" * 64 in chain
    main_text = browser.find_element(By.TAG_NAME, "main").text
    assert "tag registry.example.org/ml/torch:2.4" in main_text
    assert "published x86_64 alice@" in main_text, "the history names who published"
    assert "Distributions (1)" in main_text
    browser.save_screenshot(str(screenshots / "alias.png"))


@pytest.fixture
def lab() -> Iterator[GatewayLab]:
    """A site of its own, whose catalog the other tests do not read."""
    with gateway_lab("public_catalog = true\nrequests_per_minute = 100000") as running:
        yield running


def test_the_requests_page_follows_an_import_without_a_reload(
    browser: Any, lab: GatewayLab, screenshots: Path
) -> None:
    from selenium.webdriver.common.by import By

    outcome = lab.client("dave").import_image(LIVE, name="live", role="client")
    lifecycle_id = outcome.lifecycle_id
    lab.scheduler.start(lab.job_of(lifecycle_id))
    write_progress(lab, lifecycle_id, "download", layers_done=1, layers_total=4,
                   bytes_done=3_000_000, bytes_total=12_000_000)  # fmt: skip
    visit(browser, lab.url + "/requests")
    browser.execute_script("window.__samePage = true")

    def in_flight() -> dict[str, str]:
        found = [row for row in rows(browser, "in-flight-rows") if row[0] == "live"]
        keys = browser.execute_script(
            "return Array.from(document.querySelectorAll('#in-flight-rows thead th'),"
            " th => th.dataset.key)"
        )
        return dict(zip(keys, found[0], strict=True)) if found else {}

    assert in_flight()["phase"] == "download"
    assert in_flight()["progress"] == "1/4 layers, 3.0 MB of 12.0 MB"
    assert in_flight()["requesters"] == "dave"
    write_progress(lab, lifecycle_id, "squash", layers_done=4, layers_total=4,
                   bytes_done=12_000_000, bytes_total=12_000_000)  # fmt: skip
    wait_for(browser, lambda: in_flight().get("phase") == "squash")
    assert in_flight()["progress"] == "4/4 layers, 12.0 MB of 12.0 MB"
    browser.save_screenshot(str(screenshots / "requests.png"))

    lab.run_job(lifecycle_id, sqsh=sqsh("live", 512))
    lab.client("dave").wait([lifecycle_id], timeout_s=10)
    lab.client("dave").publish(lifecycle_id)
    wait_for(browser, lambda: not in_flight())
    ended = [row for row in rows(browser, "ended-rows") if row[2] == "live/x86_64"]
    assert ended and ended[0][1] == "published" and ended[0][3] == "dave"
    assert browser.execute_script("return window.__samePage") is True, "the page never reloaded"
    assert browser.find_element(By.ID, "updated").text != ""
    assert errors_logged(browser) == []


@pytest.mark.parametrize("where", ["served", "static"])
def test_markup_from_inside_an_image_stays_text_and_runs_nothing(
    browser: Any, site: CatalogSite, exported: Path, screenshots: Path, where: str
) -> None:
    from selenium.webdriver.common.by import By

    url = (
        served(site, "/aliases/hostile")
        if where == "served"
        else static(exported, "aliases/hostile.html")
    )
    visit(browser, url)
    codes = [element.text for element in browser.find_elements(By.CSS_SELECTOR, "main code")]
    for injected in INJECTED:
        assert injected in codes, f"{injected!r} is shown as text"
    assert browser.execute_script("return window.__dialogs") == [], "no dialog was opened"
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.find_elements(By.CSS_SELECTOR, "img, svg, main script") == []
    sources = browser.execute_script(
        "return Array.from(document.scripts, s => s.getAttribute('src'))"
    )
    assert sources == ["../static/catalog.js"], "only the page's own script"
    assert errors_logged(browser) == []
    browser.execute_script("document.querySelector('main h3').scrollIntoView()")
    browser.save_screenshot(str(screenshots / f"hostile-{where}.png"))


def test_the_static_export_opens_from_file_and_matches_the_served_pages(
    browser: Any, site: CatalogSite, exported: Path, screenshots: Path
) -> None:
    from selenium.webdriver.common.by import By

    visit(browser, served(site, "/"))
    served_rows = rows(browser)
    visit(browser, static(exported, "index.html"))
    assert rows(browser) == served_rows
    assert browser.find_element(By.ID, "shown").text == "3 of 3 shown", "its script ran"
    browser.find_element(By.ID, "filter").send_keys("torch")
    wait_for(browser, lambda: [row[0] for row in rows(browser)] == ["torch"])
    assert errors_logged(browser) == []
    browser.save_screenshot(str(screenshots / "static-catalog.png"))
    for name in PUBLIC:
        visit(browser, served(site, f"/aliases/{name}"))
        served_main = browser.find_element(By.TAG_NAME, "main").text
        visit(browser, static(exported, f"aliases/{name}.html"))
        assert browser.find_element(By.TAG_NAME, "main").text == served_main
        assert errors_logged(browser) == []
    browser.find_element(By.LINK_TEXT, "Images").click()
    wait_for(browser, lambda: browser.current_url == static(exported, "index.html"))
    assert not (exported / "aliases" / "secret.html").exists()


@pytest.fixture(scope="module")
def in_flight(site: CatalogSite) -> str:
    """A lifecycle in flight on the site, so that /requests has a row to check."""
    outcome = site.lab.client("dave").import_image(LIVE, name="live", role="client")
    write_progress(site.lab, outcome.lifecycle_id, "extract", layers_done=2, layers_total=4)
    return outcome.lifecycle_id


@pytest.mark.parametrize("page", ["/", "/aliases/torch", "/requests", "static"])
def test_the_pages_pass_axe_core_with_no_serious_or_critical_violation(
    browser: Any, site: CatalogSite, exported: Path, in_flight: str, axe: str, page: str
) -> None:
    visit(browser, static(exported, "index.html") if page == "static" else served(site, page))
    if page == "/requests":
        assert [row[0] for row in rows(browser, "in-flight-rows")] == ["live"]
    browser.execute_script(axe)
    violations = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {preload: false, resultTypes: ['violations']})"
        ".then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact,"
        " nodes: v.nodes.map(n => n.html)}))), e => done([{id: String(e), impact: 'critical'}]))"
    )
    serious = [v for v in violations if v["impact"] in ("serious", "critical")]
    assert serious == [], serious
