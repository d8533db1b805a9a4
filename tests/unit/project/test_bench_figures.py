"""The benchmark figures in README.md, docs/ and bench/RESULTS.md are what bench/results.json says.

bench/results.json is written by the bench scripts (each section with its date, load, machine and
command); `python -m bench.report` renders RESULTS.md and the guides' ``<!-- bench:NAME -->``
blocks from it. A figure typed over, left behind by a new run, or quoted outside a block fails here.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from bench import docs_figures, report


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(report.RESULTS_JSON.read_text())
    return data


def test_the_guides_quote_the_results(results: dict[str, Any]) -> None:
    assert docs_figures.check_all(results) == []


def test_results_md_is_rendered_from_the_results_and_notes() -> None:
    assert report.RESULTS_MD.read_text() == report.render_files(), "run: python -m bench.report"


def test_every_section_says_when_where_and_how_it_was_measured(results: dict[str, Any]) -> None:
    for name, section in results["sections"].items():
        for broker, entry in report.broker_entries(section):
            where = f"{name} ({broker})"
            assert entry.get("date"), where
            assert entry.get("load"), where
            assert entry.get("command"), where
            assert entry.get("machine", {}).get("nproc"), where


def test_a_figure_that_drifted_from_the_results_fails(results: dict[str, Any]) -> None:
    readme = (docs_figures.REPO_DIR / "README.md").read_text()
    rendered = docs_figures.readme_e2e(results)
    assert rendered in readme
    ratio = re.search(r"\d+\.\d+x", rendered)
    assert ratio is not None
    other = f"{float(ratio.group()[:-1]) + 0.1:.2f}x"  # whatever the results say now, one ratio off
    drifted = readme.replace(rendered, rendered.replace(ratio.group(), other, 1))
    assert drifted != readme
    assert docs_figures.check("README.md", drifted, results) == [
        f"README.md:{readme[: readme.index(rendered)].count(chr(10))}: bench:readme-e2e differs from bench/results.json"
    ]
    # and a new run's figures make the old text drift the same way
    newer = copy.deepcopy(results)
    for r in newer["sections"]["producer"]["brokers"]["kafka"]["results"]:
        if r["client"] == "kafka_core":
            r["wall_s"] /= 2
    assert any("bench:readme-e2e differs" in p for p in docs_figures.check("README.md", readme, newer))


def test_a_ratio_outside_a_block_fails(results: dict[str, Any]) -> None:
    text = "<!-- bench:crc -->x<!-- /bench:crc -->\n\nsend is 1.31\u00d7 confluent-kafka, poll 2.5x.\nA 3x gap, 0x1f.\n"
    problems = docs_figures.check("docs/new.md", text, results)
    assert problems == [
        "docs/new.md:1: bench:crc differs from bench/results.json",
        "docs/new.md:3: 1.31\u00d7 outside a bench block (no results file says it)",
        "docs/new.md:3: 2.5x outside a bench block (no results file says it)",
    ]
    assert docs_figures.check("docs/new.md", "<!-- bench:nope --><!-- /bench:nope -->", results) == [
        "docs/new.md:1: unknown block bench:nope"
    ]


def test_update_renders_inline_and_paragraph_blocks(results: dict[str, Any]) -> None:
    text = (
        "a <!-- bench:crc -->old<!-- /bench:crc --> b\n<!-- bench:spread -->\nold\n<!-- /bench:spread -->\n"
    )
    out = docs_figures.update(text, results)
    crc, spread = docs_figures.crc(results), docs_figures.spread(results)
    assert (
        out
        == f"a <!-- bench:crc -->{crc}<!-- /bench:crc --> b\n<!-- bench:spread -->\n{spread}\n<!-- /bench:spread -->\n"
    )
    assert docs_figures.check("x.md", out, results) == []
