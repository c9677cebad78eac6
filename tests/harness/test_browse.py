"""`guidance-ttt browse`: the page as a user sees it, in a real headless Chromium (Playwright),
on a synthetic archive built through the real `Archive` (`tests.synthetic_run`), one of whose
candidates tries to inject markup and script through every text it controls. The browser tests
skip with the reason when no chromium is found; the file checks run everywhere."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli.browse import json_for_html, load_source, render_page
from harness.results.browse_data import browse_data
from harness.storage.library_json import read_library_json
from harness.storage.run_files import ARCHIVE_DIR
from harness.storage.store import ArchiveStore
from tests.browser import browser, chromium_or_skip, expect
from tests.synthetic_run import step_rollouts, synthetic_state_dir, write_synthetic_run

REPO = Path(__file__).resolve().parents[2]
ATTACK = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
SECRET = "sk-do-not-show-9c1f"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", "browse", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-step 2 × 4 synthetic run whose step-1 g0r1 candidate carries the attack in its
    guidance, summary and program, and a secret in metadata the page must not show."""
    path = write_synthetic_run(tmp_path_factory.mktemp("browse"), steps=4, groups=2, rollouts=4)
    document = json.loads(path.read_text())
    entries = document["entries"]
    for entry in entries.values() if isinstance(entries, dict) else entries:
        if entry["id"] == "s01-g00-r01":
            entry["summary"] = f"summary {ATTACK}"
            entry["solution"] = f"// {ATTACK}\n" + entry["solution"]
            entry["metadata"]["raw_guidance_text"] = f"<guidance>{ATTACK}</guidance>"
            entry["metadata"]["guidance_prompt"] = {"system": SECRET}
            entry["metadata"]["execution_response_metadata"] = {"authorization": SECRET}
    path.write_text(json.dumps(document))
    return path


@pytest.fixture(scope="module")
def page_file(library: Path) -> Path:
    out = library.parent / "run.html"
    done = cli(str(library), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {out}" in done.stdout
    return out


# --- the file ------------------------------------------------------------------------------------


def test_the_page_is_one_self_contained_file(page_file: Path) -> None:
    text = page_file.read_text()
    assert not re.search(r"<(script|img|link|iframe)[^>]*\s(src|href)=", text, re.IGNORECASE)
    # The only URL in the page is the SVG namespace name, which nothing fetches.
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) == {"http://www.w3.org/2000/svg"}
    policy = re.search(r'Content-Security-Policy" content="([^"]+)"', text).group(1)
    assert "default-src 'none'" in policy
    scripts = re.findall(r"<script>(.*?)</script>", text, re.DOTALL)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in policy


def test_candidate_text_cannot_leave_the_data_block(page_file: Path, library: Path) -> None:
    text = page_file.read_text()
    assert ATTACK not in text and "window.__pwned" in text  # present, but only escaped
    block = re.search(r'<script id="data" type="application/json">(.*?)</script>', text, re.S)
    data = json.loads(block.group(1))
    attacked = next(n for n in data["nodes"] if n["id"] == "s01-g00-r01")
    assert attacked["summary"] == f"summary {ATTACK}"
    assert json_for_html({"s": "\u2028</script>&"}) == '{"s":"\\u2028\\u003c/script\\u003e\\u0026"}'


def test_no_prompt_metadata_or_secret_reaches_the_page(page_file: Path) -> None:
    text = page_file.read_text()
    assert SECRET not in text
    assert "guidance_prompt" not in text and "execution_response_metadata" not in text


def test_every_rollout_is_a_node_and_the_in_flight_step_is_shown(tmp_path: Path) -> None:
    archive = synthetic_state_dir(tmp_path, steps=2, groups=2, rollouts=4)
    import random

    with ArchiveStore.open(tmp_path / ARCHIVE_DIR) as store:  # a run in the middle of step 2
        restored = store.load()
        for group, rollout, entry in step_rollouts(restored.archive, 2, random.Random(3))[:3]:
            store.record_rollout(restored.archive, 2, group, rollout, entry)
    view, _, _ = load_source(tmp_path)
    data = browse_data(view, title="t", source="s")
    assert len(data["nodes"]) == len(archive.entries) + 3
    assert [n["step"] for n in data["nodes"] if n["in_flight"]] == [2, 2, 2]
    assert data["meta"]["in_flight"] == 3 and data["meta"]["committed_step"] == 1
    # Programs are stored once per distinct text; every node points at its own.
    for node in data["nodes"]:
        entry = archive.entries.get(node["id"])
        if entry is not None:
            assert data["programs"][node["program"]] == entry.solution


def test_a_directory_without_a_run_is_refused_in_one_line(tmp_path: Path) -> None:
    done = cli(str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "holds no run and no library.json" in done.stderr


def test_render_page_is_deterministic_for_the_same_data(library: Path) -> None:
    data = browse_data(archive=read_library_json(library), title="x", source="y")
    data["meta"]["generated"] = "fixed"
    assert render_page(data) == render_page(data)


# --- in the browser ------------------------------------------------------------------------------


def visible(b, selector: str) -> int:
    return b.page.locator(f"{selector}:not(.hidden)").count()


def test_the_page_loads_clean_with_one_node_per_rollout(page_file: Path, library: Path) -> None:
    executable = chromium_or_skip()
    archive = read_library_json(library)
    with browser(executable) as b:
        b.open(page_file)
        assert b.page.locator("circle.node").count() == len(archive.entries)
        assert b.page.locator("line.edge").count() == sum(
            1 for e in archive.entries.values() if e.timestep >= 1
        )
        failed = sum(1 for e in archive.entries.values() if not e.is_valid)
        assert b.page.locator("circle.node.failed").count() == failed
        assert b.page.locator("#count").text_content() == (
            f"showing {len(archive.entries)} of {len(archive.entries)} nodes"
        )
        assert b.problems == []


def test_selecting_a_node_shows_its_guidance_program_and_diff(page_file: Path) -> None:
    executable = chromium_or_skip()
    data = browse_data(
        archive=read_library_json(page_file.parent / "library.json"), title="", source=""
    )
    index = next(i for i, n in enumerate(data["nodes"]) if n["id"] == "s02-g01-r02")
    node = data["nodes"][index]
    with browser(executable) as b:
        b.open(page_file)
        b.page.locator(f"circle.node[data-i='{index}']").click(force=True)
        detail = b.page.locator("#detail")
        # A click selects through the location hash, so the details are drawn a moment later.
        expect(detail.locator("h2")).to_have_text("step 2 · group 1 · rollout 2")
        assert detail.locator("pre.guidance").text_content() == node["guidance"]
        assert b.page.locator("#tab-diff").get_attribute("class") == "on"  # diff first
        diff_lines = detail.locator("pre.diff span.add, pre.diff span.del").count()
        assert diff_lines > 0
        b.page.locator("#tab-program").click()
        assert detail.locator("pre.program").text_content() == data["programs"][node["program"]]
        # Its lineage links to its parent; following the link selects the parent.
        parent = data["nodes"][node["parent"]]
        b.page.locator("ol.lineage a").last.click()
        expect(b.page.locator("#detail h2")).to_have_text(
            f"step {parent['step']} · group {parent['g']} · rollout {parent['r']}"
        )
        assert b.page.evaluate("location.hash") == f"#node={parent['id']}"
        assert b.problems == []


def test_injected_markup_shows_as_text_and_runs_nothing(page_file: Path) -> None:
    executable = chromium_or_skip()
    with browser(executable) as b:
        b.open(page_file)
        b.page.evaluate("location.hash = 'node=s01-g00-r01'")
        b.page.wait_for_function("document.querySelector('#detail h2') !== null")
        summary = b.page.locator("#detail pre").nth(1).text_content()
        assert summary == f"summary {ATTACK}"
        assert b.page.evaluate("typeof window.__pwned") == "undefined"
        assert b.page.locator("#detail img").count() == 0
        assert b.problems == []


def test_a_parse_errors_raw_answer_is_shown_as_text(page_file: Path, library: Path) -> None:
    executable = chromium_or_skip()
    data = browse_data(archive=read_library_json(library), title="", source="")
    index = next(i for i, n in enumerate(data["nodes"]) if n["status"] == "parse_error")
    node = data["nodes"][index]
    assert node["answer"] and node["answer"].startswith("I would try ")
    with browser(executable) as b:
        b.open(page_file)
        b.page.evaluate(f"location.hash = 'node={node['id']}'")
        b.page.wait_for_function("document.querySelector('#detail pre.answer') !== null")
        assert b.page.locator("#detail pre.answer").text_content() == node["answer"]
        assert b.problems == []


def test_filters_hide_what_they_should(page_file: Path, library: Path) -> None:
    executable = chromium_or_skip()
    archive = read_library_json(library)
    entries = list(archive.entries.values())
    with browser(executable) as b:
        b.open(page_file)
        b.page.select_option("#status", "valid")
        assert visible(b, "circle.node") == sum(1 for e in entries if e.is_valid)
        b.page.select_option("#status", "all")
        b.page.fill("#step-min", "1")
        b.page.fill("#step-max", "2")
        # The step range keeps the seed (step -1) so the tree keeps its root.
        assert visible(b, "circle.node") == sum(1 for e in entries if e.timestep in (0, 2, 3))
        b.page.click("#reset")
        b.page.fill("#search", "BINARY SEARCH")
        wanted = sum(
            1
            for e in entries
            if "binary search" in str(e.metadata.get("raw_guidance_text") or e.guidance).lower()
        )
        assert 0 < wanted < len(entries)
        assert visible(b, "circle.node") == wanted
        assert (
            b.page.locator("#count").text_content() == f"showing {wanted} of {len(entries)} nodes"
        )
        b.page.click("#reset")
        best = archive.best_entry()
        b.page.fill("#score-min", str(best.verifier_raw_score))
        assert visible(b, "circle.node") == sum(
            1 for e in entries if e.is_valid and e.verifier_raw_score >= best.verifier_raw_score
        )
        assert b.problems == []


def test_the_path_to_the_best_is_highlighted(page_file: Path, library: Path) -> None:
    executable = chromium_or_skip()
    archive = read_library_json(library)
    data = browse_data(archive=archive, title="", source="")
    chain, k = [], data["meta"]["best"]
    while k is not None:
        chain.append(k)
        k = data["nodes"][k]["parent"]
    with browser(executable) as b:
        b.open(page_file)
        marked = b.page.locator("circle.node.best-path")
        assert sorted(
            int(marked.nth(i).get_attribute("data-i")) for i in range(marked.count())
        ) == sorted(chain)
        assert data["nodes"][chain[0]]["id"] == archive.best_entry().id


def test_every_keeps_the_page_of_a_running_run_fresh(tmp_path: Path) -> None:
    import random

    synthetic_state_dir(tmp_path / "state", steps=1, groups=2, rollouts=2)
    out = tmp_path / "live.html"
    command = [sys.executable, "-m", "harness.cli.entry", "browse", str(tmp_path / "state")]
    live = subprocess.Popen(
        [*command, "-o", str(out), "--every", "1"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert live.stdout.readline().startswith(f"wrote {out} (6 rollouts)")  # 2 seeds + 4
        data = json.loads(
            re.search(r'type="application/json">(.*?)</script>', out.read_text(), re.S).group(1)
        )
        assert data["meta"]["refresh_s"] == 1
        with ArchiveStore.open(tmp_path / "state" / ARCHIVE_DIR) as store:  # the run goes on
            restored = store.load()
            group, rollout, entry = step_rollouts(restored.archive, 1, random.Random(5))[0]
            store.record_rollout(restored.archive, 1, group, rollout, entry)
        while not (line := live.stdout.readline()).startswith(f"wrote {out} (7 rollouts)"):
            assert line, live.stderr.read()
    finally:
        live.terminate()
        live.wait(30)


@pytest.mark.slow
def test_a_full_30_by_128_archive_opens_and_answers_clicks(tmp_path: Path) -> None:
    executable = chromium_or_skip()
    library = write_synthetic_run(tmp_path / "run")  # 30 steps of 8 × 16
    out = tmp_path / "full.html"
    assert cli(str(library), "-o", str(out)).returncode == 0
    with browser(executable) as b:
        b.open(out, timeout_ms=120_000)
        assert b.page.locator("circle.node").count() == 30 * 128 + 8  # and the 8 seed roots
        b.page.locator("circle.node:not(.failed)").nth(3000).click(force=True)
        expect(b.page.locator("#detail pre.diff")).to_have_count(1, timeout=60_000)
        b.page.select_option("#status", "failures")
        assert visible(b, "circle.node") == b.page.locator("circle.node.failed").count()
        assert b.problems == []


def test_an_exported_folder_is_browsed_from_the_archive_export_wrote(tmp_path: Path) -> None:
    from tests.state_fixture import build_state_dir

    state = tmp_path / "state"
    build_state_dir(state, committed_steps=2, in_flight_slots=0)
    out = tmp_path / "exported"
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli.entry", "export", str(state), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (archive_file,) = (out / "archives").glob("*.library.json")
    page = tmp_path / "exported.html"
    done = cli(str(out), "-o", str(page))
    assert done.returncode == 0, done.stderr
    _, archive, source = load_source(out)
    assert source == archive_file
    assert set(archive.entries) == set(load_source(state)[1].entries)
    assert page.stat().st_size > 0
