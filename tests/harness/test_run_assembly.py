"""One run assembly (`harness.run.assembly.assemble_and_run`) builds every run's services, sinks
and closers: nothing else in `harness/` or `tttd/` calls what assembles a run, and a run started by
`guidance-ttt experiment` from a settings file gets the W&B sink like any run (real: the CLI,
the local judge, the run loop, wandb in offline mode; stand-ins: the scripted executor)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ASSEMBLER = REPO / "harness" / "run" / "assembly.py"
#: What assembles a run: the adapters, the sinks, the step loop.
ASSEMBLY = {"production_services", "run_steps", "EventLog", "Fanout", "wandb_sink"}


def _called_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ASSEMBLY:
                names.add(name)
    return names


def test_the_assembly_is_the_only_place_a_run_is_assembled() -> None:
    sources = [*(REPO / "harness").rglob("*.py"), *(REPO / "tttd").rglob("*.py"), REPO / "run.py"]
    elsewhere = {
        str(path.relative_to(REPO)): sorted(names)
        for path in sources
        if path != ASSEMBLER and (names := _called_names(path))
    }
    assert elsewhere == {}, f"a run is assembled outside harness/run/assembly.py: {elsewhere}"
    assert _called_names(ASSEMBLER) == ASSEMBLY


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_an_experiment_run_with_wandb_enabled_writes_its_offline_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("wandb", reason="the watch extra (pip install -e '.[watch]') brings wandb")
    from harness.adapters.judge.process import LocalJudge
    from harness.cli.entry import main
    from harness.rehearsal.openai_server import OpenAIFixture
    from harness.rehearsal.stand_ins import EXECUTOR_MODEL, executor_reply
    from tests.wandb_records import offline_runs

    for name in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_ENTITY", "WANDB_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home" / name.lower()))
    settings = yaml.safe_load((REPO / "serve-frozen.yaml").read_text(encoding="utf-8"))
    settings["observability"]["wandb"].update(enabled=True, mode="offline")
    settings_file = tmp_path / "frozen-wandb.yaml"
    settings_file.write_text(yaml.safe_dump(settings, sort_keys=False), encoding="utf-8")
    with (
        LocalJudge(tmp_path / "judge", "--generated-cases", "2", "--seed", "11") as judge,
        OpenAIFixture(executor_reply, model=EXECUTOR_MODEL) as executor,
    ):
        monkeypatch.setenv("GUIDANCE_TTT_EXECUTOR_URL", executor.v1_url)
        monkeypatch.setenv("FRONTIERCS_JUDGE_URL", judge.url)
        monkeypatch.setenv("GUIDANCE_TTT_GUIDANCE_URL", "http://127.0.0.1:9")
        monkeypatch.setenv("GUIDANCE_TTT_GUIDANCE_MODEL", "none")
        plan = tmp_path / "plan.yaml"
        plan.write_text(
            yaml.safe_dump(
                {
                    "name": "watched",
                    "settings": str(settings_file),
                    "arms": ["unguided"],  # no guidance model: no reef serve to start
                    "seeds": [0],
                    "steps": 1,
                    "groups": 1,
                    "rollouts": 2,
                }
            )
        )
        directory = tmp_path / "experiment"
        assert main(["experiment", str(plan), "--dir", str(directory)]) == 0
    runs = offline_runs(directory / "unguided-s0" / "wandb")
    search = [r for r in runs if r.name.endswith("-search")]
    assert len(search) == 1, [r.name for r in runs]
    steps = [row["search/step"] for row in search[0].history if "search/step" in row]
    assert steps == [0]
