"""The W&B sink (`harness.observe.wandb_sink`) with the real `wandb` package in offline mode: what
it logs is read back from W&B's own transaction log (`tests.wandb_records`); a broken W&B (a bad
key against a loopback server that refuses it, an unwritable directory, a server that hangs)
leaves the events flowing and the run unharmed; nothing is built or imported when it is off.

W&B never reaches the network here: offline mode, or a loopback server; its directories are under
tmp_path and it is silent.
"""

from __future__ import annotations

import http.server
import json
import logging
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from harness.observe.search_metrics import MAX_CELL_CHARS, SAMPLE_COLUMNS, cut
from harness.observe.wandb_sink import SAMPLES_KEY, WandbOptions, WandbSink
from tests.synthetic_run import synthetic_state_dir
from tests.wandb_records import offline_runs

pytest.importorskip("wandb", reason="the watch extra (pip install -e '.[watch]') brings wandb")

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "guidance-ttt-polyomino-packing"
IDENTITY = {"mode": "trained", "model": "Qwen/Qwen3-8B", "state_dir": "/runs/a"}


@pytest.fixture(autouse=True)
def quiet_offline_wandb(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_ENTITY", "WANDB_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("WANDB_DIR", "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))


def options(directory: Path, mode: str = "offline", **block: Any) -> WandbOptions:
    found = WandbOptions.from_block(
        {"enabled": True, "mode": mode, "project": "guidance-ttt", "directory": str(directory)}
        | block,
        SCENARIO,
    )
    assert found is not None
    return found


def feed(sink: WandbSink, state_dir: Path, steps: range, groups: int, rollouts: int) -> None:
    """The events a run emits, as `harness.run.step_loop` and `harness.run.step` emit them."""
    sink.emit(
        "run_started",
        state_dir=str(state_dir),
        steps=steps.stop,
        groups=groups,
        rollouts=rollouts,
        guidance_model="Qwen/Qwen3-8B",
        executor_model="gpt-oss-120b",
    )
    for step in steps:
        for g in range(groups):
            for r in range(rollouts):
                sink.emit("rollout_stage", step=step, group=g, rollout=r, stage="judge")
                sink.emit(
                    "rollout_finished",
                    step=step,
                    group=g,
                    rollout=r,
                    status="valid",
                    timings={"guidance_s": 1.0, "executor_s": 2.0, "judge_s": 0.5 + r},
                )
        sink.emit("training_wait", step=step, phase="training", elapsed_s=12.5, missing_slots=[])
        sink.emit(
            "step_summary",
            step=step,
            elapsed_s=30.0 + step,
            grad_norm=0.25,
            valid_rollouts=groups * rollouts,
            sampled_rollouts=groups * rollouts,
        )
        sink.emit("step_committed", step=step, next_step=step + 1)
    sink.emit("run_finished", next_step=steps.stop, best_raw_score=50.0)


def test_every_committed_step_is_logged_with_its_metrics_and_samples_table(
    tmp_path: Path,
) -> None:
    archive = synthetic_state_dir(tmp_path / "state", steps=3, groups=2, rollouts=4)
    sink = WandbSink(options(tmp_path / "wb"), identity=IDENTITY, config={"task": "polyomino"})
    feed(sink, tmp_path / "state", range(3), 2, 4)
    sink.close()
    assert sink.warning is None
    (run,) = offline_runs(tmp_path / "wb")
    assert (run.run_id, run.project, run.group) == (sink.run_id, "guidance-ttt", SCENARIO)
    assert run.name == f"{SCENARIO}-search"
    rows = [row for row in run.history if "search/step" in row]
    assert [row["search/step"] for row in rows] == [0, 1, 2]
    for step, row in enumerate(rows):
        entries = [e for e in archive.entries.values() if e.timestep == step + 1]
        valid = [e.verifier_raw_score for e in entries if e.is_valid]
        assert row["search/rollouts"] == 8
        assert row["search/valid_fraction"] == pytest.approx(len(valid) / 8)
        assert row["search/step_best"] == pytest.approx(max(valid))
        assert row["search/archive_entries"] == sum(
            1 for e in archive.entries.values() if e.timestep <= step + 1
        )
        assert row["search/time/judge_s"] == pytest.approx(0.5 + 1.5)  # mean of 0.5..3.5
        assert row["search/time/training_wait_s"] == 12.5
        assert row["search/time/step_s"] == 30.0 + step
        assert row["search/grad_norm"] == 0.25
        for name in (
            "best_so_far",
            "step_mean",
            "step_median",
            "format_error_fraction",
            "tokens/executor",
            "tokens/guidance",
            "archive_nodes",
        ):
            assert f"search/{name}" in row, name
    tables = run.tables(SAMPLES_KEY)
    assert len(tables) == 3
    for step, table in enumerate(tables):
        assert table["columns"] == list(SAMPLE_COLUMNS)
        receipts = {
            e.metadata["agent_record_id"]
            for e in archive.entries.values()
            if e.timestep == step + 1
        }
        assert {row[SAMPLE_COLUMNS.index("receipt")] for row in table["data"]} == receipts
        assert all(row[0] == step for row in table["data"])


def test_text_cells_are_bounded() -> None:
    assert cut("short") == "short"
    long = "x" * (MAX_CELL_CHARS + 500)
    assert cut(long).startswith("x" * MAX_CELL_CHARS) and cut(long).endswith(
        "[500 more characters]"
    )


def test_a_resumed_run_continues_the_same_wandb_run(tmp_path: Path) -> None:
    synthetic_state_dir(tmp_path / "state", steps=2, groups=2, rollouts=2)
    # Two W&B directories only because W&B names an offline run's folder by the second it
    # started: two sessions within one second would share it. The id is what resumes.
    first = WandbSink(options(tmp_path / "wb1"), identity=IDENTITY)
    feed(first, tmp_path / "state", range(1), 2, 2)
    first.close()
    again = WandbSink(options(tmp_path / "wb2"), identity=IDENTITY)
    feed(again, tmp_path / "state", range(1, 2), 2, 2)
    again.close()
    runs = offline_runs(tmp_path / "wb1") + offline_runs(tmp_path / "wb2")
    assert [r.run_id for r in runs] == [first.run_id, first.run_id]
    assert [row["search/step"] for r in runs for row in r.history if "search/step" in row] == [0, 1]
    other = WandbSink(options(tmp_path / "wb"), identity={**IDENTITY, "state_dir": "/runs/b"})
    other.close()
    assert other.run_id != first.run_id


def test_an_unwritable_directory_warns_once_and_the_events_keep_flowing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    synthetic_state_dir(tmp_path / "state", steps=2, groups=2, rollouts=2)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    sink = WandbSink(options(blocker / "wandb"), identity=IDENTITY)
    with caplog.at_level(logging.WARNING, logger="harness.observe.wandb_sink"):
        feed(sink, tmp_path / "state", range(2), 2, 2)
        sink.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "W&B logging is off for the rest of this run" in warnings[0].getMessage()
    assert sink.logged_steps == []
    sink.emit("step_summary", step=5)  # still accepted, still harmless


class RefusingServer(http.server.BaseHTTPRequestHandler):
    """A W&B server on loopback that refuses every key, as api.wandb.ai refuses a bad one."""

    def _refuse(self) -> None:
        body = json.dumps({"errors": [{"message": "invalid api key"}]}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = _refuse

    def log_message(self, *args: Any) -> None:
        return None


BAD_KEY_RUN = """
import json, sys
from pathlib import Path
from tests.harness.test_wandb_sink import IDENTITY, feed, options
from harness.observe.wandb_sink import WandbSink
tmp = Path(sys.argv[1])
sink = WandbSink(options(tmp / "wb", mode="online"), identity=IDENTITY)
feed(sink, tmp / "state", range(1), 2, 2)
sink.close()
print(json.dumps({"warning": sink.warning, "logged": sink.logged_steps}))
"""


def test_a_bad_key_warns_once_without_the_key_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A process of its own: W&B reads its server address once per process.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RefusingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    key = "k" * 40
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("WANDB_API_KEY", key)
    monkeypatch.setenv("WANDB_MODE", "online")
    synthetic_state_dir(tmp_path / "state", steps=1, groups=2, rollouts=2)
    try:
        done = subprocess.run(
            [sys.executable, "-c", BAD_KEY_RUN, str(tmp_path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "W&B logging is off for the rest of this run" in result["warning"]
    assert "invalid api key" in result["warning"]
    assert result["logged"] == []
    assert done.stderr.count("W&B logging is off") == 1
    assert key not in done.stdout + done.stderr


class HangingWandb:
    """Stands in for `wandb` against a server that never answers (this machine cannot produce
    one that W&B waits on forever): `init` blocks until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def init(self, **kwargs: Any) -> Any:
        self.entered.set()
        self.release.wait()
        raise ConnectionError("the server never answered")

    @staticmethod
    def Settings(**kwargs: Any) -> dict[str, Any]:
        return kwargs


def test_a_hanging_wandb_never_blocks_emit_and_close_is_bounded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    hanging = HangingWandb()
    sink = WandbSink(
        options(tmp_path / "wb"),
        identity=IDENTITY,
        client=hanging,
        queue_size=100,
        close_timeout_s=0.2,
    )
    sink.emit("run_started", state_dir=str(tmp_path / "state"))
    assert hanging.entered.wait(10)
    with caplog.at_level(logging.WARNING, logger="harness.observe.wandb_sink"):
        for i in range(1000):  # ten times the queue: emit drops, it never waits
            sink.emit("rollout_stage", step=0, group=0, rollout=i, stage="judge")
        sink.close()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("dropping events" in m for m in messages) == 1
    assert any("did not finish within" in m for m in messages)
    hanging.release.set()


def test_off_blocks_build_nothing() -> None:
    assert WandbOptions.from_block({}, SCENARIO) is None
    assert WandbOptions.from_block({"enabled": False, "mode": "offline"}, SCENARIO) is None
    assert WandbOptions.from_block({"enabled": True, "mode": "disabled"}, SCENARIO) is None
    found = WandbOptions.from_block(
        {"enabled": True, "group_prefix": "lab", "name_prefix": "polyomino"}, SCENARIO
    )
    assert found is not None
    assert (found.mode, found.project, found.group, found.name) == (
        "online",
        "reef",
        f"lab/{SCENARIO}",
        "polyomino-search",
    )
    with pytest.raises(ValueError, match=r"observability\.wandb\.mode is 'sometimes'"):
        WandbOptions.from_block({"enabled": True, "mode": "sometimes"}, SCENARIO)


def test_serve_yaml_leaves_wandb_off_and_unimported() -> None:
    code = (
        "import sys\n"
        "from harness.settings.run_settings import RunSettings\n"
        "from harness.run.watchers import wandb_sink\n"
        "import harness.rehearsal.rehearse\n"
        "for name in ('serve.yaml', 'serve-frozen.yaml'):\n"
        "    s = RunSettings.load(name, environ={'GUIDANCE_TTT_GUIDANCE_URL': 'http://x',"
        " 'GUIDANCE_TTT_GUIDANCE_MODEL': 'm'})\n"
        "    assert s.wandb['enabled'] is False, s.wandb\n"
        "    assert wandb_sink(s) is None\n"
        "assert 'wandb' not in sys.modules\n"
        "print('off')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "off"


def test_serve_yaml_block_is_read_with_its_directory_made_absolute(tmp_path: Path) -> None:
    import yaml

    from harness.settings.run_settings import RunSettings, RunSettingsError

    document = yaml.safe_load((REPO / "serve.yaml").read_text())
    document["observability"]["wandb"].update(enabled=True, tags=["lab"], entity="team")
    path = tmp_path / "serve.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    settings = RunSettings.load(path, environ={}, base_dir=tmp_path)
    assert settings.wandb["enabled"] is True and settings.wandb["entity"] == "team"
    assert settings.wandb["directory"] == str(tmp_path / "work" / "polyomino_packing" / "wandb")
    found = WandbOptions.from_block(settings.wandb, settings.scenario)
    assert found is not None and found.group == SCENARIO and found.tags == ("lab",)
    document["observability"]["wandb"]["mode"] = "sometimes"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    with pytest.raises(RunSettingsError, match=r"observability\.wandb\.mode"):
        RunSettings.load(path, environ={}, base_dir=tmp_path)


def test_run_ids_come_from_the_state_directorys_run_id_for_both_writers(tmp_path: Path) -> None:
    """Two runs of one task and a resume of the first, W&B offline, read back from the files:
    three sessions, two harness run ids (the resume reuses its run's), groups of their own; and
    Reef's tracker ids (its own `stable_run_id`, from the names the settings copy gives it)
    follow the same rule."""
    from reef.observability.wandb import stable_run_id

    from harness.observe.wandb_sink import name_wandb_runs
    from harness.storage.run_files import run_id

    def session(state: Path, wb: Path, steps: range) -> tuple[WandbSink, dict[str, Any]]:
        block = {"enabled": True, "mode": "offline", "project": "guidance-ttt"}
        block["directory"] = str(wb)
        name_wandb_runs(block, SCENARIO, state)  # what the run's settings copy holds
        found = WandbOptions.from_block(block, SCENARIO, run_id=run_id(state))
        assert found is not None
        sink = WandbSink(found, identity=IDENTITY)  # the same identity: only the run id differs
        feed(sink, state, steps, 2, 2)
        sink.close()
        return sink, block

    for name in ("a", "b"):
        synthetic_state_dir(tmp_path / name, steps=2, groups=2, rollouts=2)
    first, block_a = session(tmp_path / "a", tmp_path / "wb1", range(1))
    other, block_b = session(tmp_path / "b", tmp_path / "wb2", range(1))
    again, block_again = session(tmp_path / "a", tmp_path / "wb3", range(1, 2))
    runs = [offline_runs(tmp_path / f"wb{i}")[0] for i in (1, 2, 3)]
    assert [r.run_id for r in runs] == [first.run_id, other.run_id, first.run_id]
    assert first.run_id != other.run_id and again.run_id == first.run_id
    short_a, short_b = run_id(tmp_path / "a")[:8], run_id(tmp_path / "b")[:8]
    assert [r.group for r in runs] == [f"run-{s}/{SCENARIO}" for s in (short_a, short_b, short_a)]
    assert runs[0].name == f"{SCENARIO}-{short_a}-search"

    def reef_id(block: dict[str, Any]) -> str:
        group = f"{block['group_prefix']}/{SCENARIO}"
        return stable_run_id(
            project="guidance-ttt",
            entity=None,
            group=group,
            name_prefix=block["name_prefix"],
            scenario=SCENARIO,
            recipe="tttd",
            run_segment=0,
        )

    assert reef_id(block_a) == reef_id(block_again) != reef_id(block_b)


def test_an_experiments_runs_share_one_group_and_are_named_by_arm_and_seed(
    tmp_path: Path,
) -> None:
    from harness.observe.wandb_sink import RunNames, name_wandb_runs
    from harness.storage.run_files import run_id

    groups, names = set(), []
    for arm, seed in (("guidance-ttt", 0), ("unguided", 0), ("unguided", 1)):
        state = tmp_path / f"{arm}-s{seed}"
        block = {"enabled": True, "mode": "offline", "group_prefix": "team"}
        name_wandb_runs(block, SCENARIO, state, RunNames("spring", arm, seed))
        found = WandbOptions.from_block(block, SCENARIO, run_id=run_id(state))
        assert found is not None
        groups.add(found.group)
        names.append(found.name)
    assert groups == {f"team/spring/{SCENARIO}"}
    assert [n.rsplit("-", 2)[0] for n in names] == [
        "spring-guidance-ttt-s0",
        "spring-unguided-s0",
        "spring-unguided-s1",
    ]
