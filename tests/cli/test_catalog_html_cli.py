"""``slurm-image catalog --html DIR`` (docs/cli.md, "catalog"): the catalog's pages as files,
what anyone may see of this machine's store (tests/catalog_site.py publishes a private image
too); refused through a gateway. What a browser makes of the files: tests/browser/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog_site import catalog_site
from cli_site import run_main as run
from slurm_image.wire.exit_codes import EXIT_INVALID


def test_the_pages_of_everything_but_the_private_aliases(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pages = tmp_path / "site"
    (pages / "aliases").mkdir(parents=True)
    (pages / "aliases" / "secret.html").write_text("an earlier export's page")
    with catalog_site() as site:
        profile = str(site.lab.profile)
        code, out, err = run(
            capsys, "--profile", profile, "--gateway", "local", "--json", "catalog", "--html",
            str(pages),
        )  # fmt: skip
        assert code == 0, err
        written = json.loads(out)
        assert written["pages"] == [
            "index.html",
            "aliases/hostile.html",
            "aliases/torch.html",
            "aliases/vllm-serve.html",
        ]
        assert written["removed"] == ["aliases/secret.html"]
        index = (pages / "index.html").read_text()
        assert "secret" not in index
        assert site.paths["torch"] in (pages / "aliases" / "torch.html").read_text()
        code, out, _ = run(capsys, "--profile", profile, "catalog", "--html", str(pages))
        assert code == 0 and out == f"wrote 4 pages into {pages}\n"


def test_through_a_gateway_it_is_refused_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pages = tmp_path / "site"
    code, _, err = run(
        capsys, "--gateway", "unix:/run/nowhere.sock", "catalog", "--html", str(pages)
    )
    assert code == EXIT_INVALID
    assert "gateway" in err and "this machine's store" in err
    assert not pages.exists()
