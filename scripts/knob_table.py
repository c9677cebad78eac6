"""Write docs/knobs.md: every user-facing knob in one generated table, read from the code itself.

    python scripts/knob_table.py --write    rewrite docs/knobs.md
    python scripts/knob_table.py            print the table
    python scripts/knob_table.py --check    exit 1 when docs/knobs.md differs (names the fix)

The sources: every `guidance-ttt` subcommand's argparse parser (`harness.cli.entry`, the judge's
and the doctor's own parsers included, so the table follows their flags); the pydantic models of
serve.yaml and serve-frozen.yaml (`harness.settings.serve`, `harness.settings.frozen`: each leaf
key, its default and the `#:` comment above it); the keys of a `type: gpu` judge package
(`judges.gpu.package`); and every `GUIDANCE_TTT_*` variable the tracked code names.
A variable is either a settings-file interpolation (`${VAR:-default}` in serve.yaml or
serve-frozen.yaml, found in the files) or classified in `VARIABLES` below; one that is neither,
or an entry there the code no longer names, stops the script with a line naming it.

Imports only what the parsers and schemas need (no torch, no Ray, no server starts).
"""

from __future__ import annotations

import argparse
import ast
import copy
import inspect
import os
import re
import subprocess
import sys
import textwrap
import tokenize
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "docs" / "knobs.md"
COMMAND = "python scripts/knob_table.py --write"

#: Variables that change a parser's defaults; the table is the shipped defaults, so none apply.
AMBIENT_PREFIXES = ("GUIDANCE_TTT_", "FRONTIERCS_", "RAY_", "OPENROUTER_", "MODEL_ID")
#: Defaults that differ from machine to machine, shown as what they stand for: (command, dest).
MACHINE_DEFAULTS = {
    ("guidance-ttt judge", "workers"): "<cores>",
    ("guidance-ttt judge", "gpu_python"): "<this python>",
}

# ----------------------------------------------------------------------------- variables

DOCUMENTED = "the documented way to set it"
PLUMBING = "internal: set by one of our processes for another"
TEST = "test harness only"

#: Every `GUIDANCE_TTT_*` variable that is not a settings-file interpolation: its class and what
#: it does. The interpolations are found in serve.yaml and serve-frozen.yaml themselves.
VARIABLES: dict[str, tuple[str, str]] = {
    "GUIDANCE_TTT_SERVE_YAML": (
        DOCUMENTED,
        "the settings file of `./run.sh`, `guidance-ttt run` (`--config` wins), run.py and the "
        "Harbor agent: default serve.yaml; serve-frozen.yaml for frozen guidance",
    ),
    "GUIDANCE_TTT_GUIDANCE_API_KEY": (
        DOCUMENTED,
        "frozen mode: the guidance endpoint's key (a secret, so never a setting); a loopback "
        "forwarder adds it to each request and it reaches no file",
    ),
    "GUIDANCE_TTT_PROXY_PORT": (
        DOCUMENTED,
        "frozen mode with a guidance key: the port of the key forwarder (default 8011)",
    ),
    "GUIDANCE_TTT_TRIAL": (
        DOCUMENTED,
        "where the Harbor trial runs: `docker`, or `local` (bubblewrap on this host); default "
        "`docker` when a Docker daemon answers, else `local`",
    ),
    "GUIDANCE_TTT_PRICING": (
        DOCUMENTED,
        "a price table YAML laid over harness/observe/pricing.yaml, model by model "
        "(as `--pricing`)",
    ),
    "GUIDANCE_TTT_JUDGE_TOKEN": (
        DOCUMENTED,
        "the judge's bearer token (a secret, so never a flag): the judge requires it on every "
        "call but /health and to bind beyond loopback; its clients send it",
    ),
    "GUIDANCE_TTT_JUDGE_NODE_DIR": (
        DOCUMENTED,
        "a Ray judge node's root directory (default `<tmp>/guidance-ttt-judge-node-<uid>`)",
    ),
    "GUIDANCE_TTT_SKIP_SETUP": (
        DOCUMENTED,
        "set: `./run.sh` skips scripts/setup.sh and uses `$PYTHON` (default .venv/bin/python)",
    ),
    "GUIDANCE_TTT_SLIME_SRC": (
        DOCUMENTED,
        "scripts/gpu-check.sh: a Slime checkout to check instead of the installed one",
    ),
    "GUIDANCE_TTT_MEGATRON_SRC": (
        DOCUMENTED,
        "scripts/gpu-check.sh: a Megatron-LM checkout to check instead of the installed one",
    ),
    "GUIDANCE_TTT_UPSTREAM_SITE": (
        DOCUMENTED,
        "scripts/gpu-check.sh: one more directory of packages (SGLang, transformers) to check",
    ),
    "GUIDANCE_TTT_TASK_DIR": (
        DOCUMENTED,
        "the Harbor agent's task directory when its `task_dir` argument is not given (default: "
        "the settings' task); run.py sets it for the trial",
    ),
    "GUIDANCE_TTT_JUDGE_URL": (
        DOCUMENTED,
        "the Harbor agent's judge when its `judge_url` argument is not given (default: the "
        "settings' judge_url); run.py sets it for the trial",
    ),
    "GUIDANCE_TTT_TRAINING_BRIDGE": (
        DOCUMENTED,
        "the Harbor agent's training bridge factory `module:callable` when its `training_bridge` "
        "argument is not given (default: Reef's Ray bridge)",
    ),
    "GUIDANCE_TTT_FRONT_COMMAND": (
        PLUMBING,
        "set by `./run.sh`: the command a stop line names to resume with",
    ),
    "GUIDANCE_TTT_LOCAL_JUDGE": (
        PLUMBING,
        "set by scripts/run-stack.sh from the file GUIDANCE_TTT_LOCAL_JUDGE_FILE names when "
        "`guidance-ttt run` started the local judge: the preflight's judge row",
    ),
    "GUIDANCE_TTT_LOCAL_JUDGE_FILE": (
        PLUMBING,
        "set by `guidance-ttt run` when it starts the local judge beside the stack: the file "
        "that gets the judge's URL and preflight row once it listens, which the stack's "
        "preflight waits for",
    ),
    "GUIDANCE_TTT_COMMAND": (
        PLUMBING,
        "set by `guidance-ttt run` for its stack: the command that was typed, which the "
        "preflight's fixes, the stack's lines and the spend limit's advice name",
    ),
    "GUIDANCE_TTT_QUIET_STOP": (
        PLUMBING,
        "set by `guidance-ttt run`: the stack's stop names no process (the run prints one line)",
    ),
    "GUIDANCE_TTT_CRASH_AT": (
        TEST,
        "`<point>[:n]`: the run SIGKILLs itself on the n-th pass of a named point "
        "(harness/run/crash_hook.py; the crash-and-resume tests)",
    ),
    "GUIDANCE_TTT_JUDGE_TEST_MODE": (
        TEST,
        "the judge's test switches, comma-separated (judges/service/testing.py): paths the "
        "shipped judge does not take on the test's host",
    ),
    "GUIDANCE_TTT_SETUP_DRY_RUN": (
        TEST,
        "set: scripts/setup.sh and scripts/system-packages.sh only say what they would do "
        "(their tests check the decisions without network)",
    ),
}

#: Where variables are looked for (the files git tracks): the code, the scripts, the settings
#: files, the tests (the recipe's and the judge's own); not the benchmarks.
SCANNED = ("harness", "judges", "tttd", "scripts", "harbor", "tests")
TEST_FOLDERS = ("tests/", "judges/tests/")
NOT_SCANNED = ("judges/benchmarks/",)
SCANNED_FILES = ("run.sh", "run.py", "serve.yaml", "serve-frozen.yaml", "serve-tinker.yaml")
SETTINGS_FILES = ("serve.yaml", "serve-frozen.yaml", "serve-tinker.yaml")
SELF = ("knob_table.py", "test_knob_table.py")  # they name every variable
VARIABLE = re.compile(r"\bGUIDANCE_TTT_[A-Z0-9][A-Z0-9_]*[A-Z0-9]\b")
INTERPOLATION = re.compile(r"\$\{([A-Z][A-Z0-9_]*)(?::([-?])([^}]*))?\}")

# ----------------------------------------------------------------------------- GPU packages

#: What each key of a `type: gpu` package's config.yaml does, where its default's comment in
#: `judges.gpu.package` does not say it.
GPU_KEY_HELP = {
    "type": "`gpu`: the package is judged by the GPU judge",
    "language": "the candidate's language; only `python`",
    "entry": "the function the candidate module defines",
    "reference": "the module with `generate_input`, `ref_kernel` and optional `minimum_work`",
    "cases": "the file listing `tests` and `benchmarks` (generator arguments, each with a seed)",
    "rtol": "relative tolerance of the output check against the reference",
    "atol": "absolute tolerance of the output check against the reference",
    "time": "wall-clock limit of one submission's whole trial",
    "call_timeout": "limit of one call of the candidate",
    "startup_timeout": "limit of the candidate sandbox's start and the candidate's import",
    "memory": "memory limit of the candidate's cgroup",
    "processes": "process limit of the candidate's cgroup",
    "tmpfs": "size of the candidate sandbox's /tmp",
    "warmup_time": "warm-up on the first benchmark: calls until they took this long",
    "min_repeats": "timed calls of a benchmark before the stopping rule may end it",
    "max_repeats": "timed calls of a benchmark at most",
    "target_error": "stop a benchmark once the mean's relative standard error is below this",
    "benchmark_time": "stop a benchmark once mean × calls exceeds this",
    "benchmark_wall": "stop a benchmark once its wall clock exceeds this",
    "seed_step": "how far the seed advances between a benchmark's timed calls",
}


# ----------------------------------------------------------------------------- settings help

#: What a settings key sets, where the `#:` comment above its field (shown after it, in
#: brackets) does not say it. An entry for a key no model declares stops the script.
SETTINGS_HELP = {
    "reef.host": "the address Reef's service binds",
    "reef.port": "the port of Reef's service",
    "reef.token": "Reef's local bearer token (`${REEF_TOKEN:?}` to require a secret one)",
    "reef.run-dir": "where Reef's services keep their logs and state",
    "inference.model-path": "the guidance model: the weights SGLang serves (serve.yaml), the "
    "base model by the name Tinker serves it (serve-tinker.yaml)",
    "inference.tensor-parallel-size": "SGLang's tensor-parallel size per engine",
    "recipe.config.groups-per-step": "G, groups per step",
    "recipe.config.rollouts-per-group": "R, rollouts per group",
    "recipe.config.checkpoint-every-n-versions": "Reef's checkpoint cadence, in model versions",
    "training.ray-namespace": "the Ray namespace of Reef's training bridge actor",
    "training.ray-actor-name": "the name of Reef's training bridge actor",
    "<run>.model": "the guidance model's name (recorded with the run)",
    "<run>.task": "the task: a directory under harbor/, or a path to one anywhere",
    "<run>.steps": "STEPS, the final total of search steps",
    "<run>.context_length": "the guidance model's context, in tokens",
    "<run>.max_response_len": "guidance tokens per call; less than context_length",
    "<run>.state_dir": "the run's state directory (archive, records, logs)",
    "<run>.harness.executor_backend": "the executor: a preset (gpt_oss_120b, "
    "openrouter_glm_5_2) or openai_compatible (docs/executors.md)",
    "<run>.harness.gpt_oss_reasoning_effort": "the gpt_oss_120b preset's reasoning effort",
    "<run>.harness.judge_url": "the judge's base URL",
    "<run>.harness.seed": "the seed record the archive starts from, inside the task directory",
    "<run>.harness.experiment.arm": "the experiment arm: guidance-ttt, unguided or best-of-n",
    "<run>.harness.experiment.parent_selection": "how parents are chosen: puct, greedy or uniform",
    "<run>.harness.spend_limit.max_cost_usd": "stop at a step boundary once the run has spent "
    "this many US dollars (unset: no limit)",
    "<run>.harness.spend_limit.max_tokens": "stop at a step boundary once the run has used this "
    "many tokens (unset: no limit)",
    "<run>.harness.executor.temperature": "the executor's sampling temperature (unset: the "
    "preset's)",
    "<run>.harness.executor.max_tokens": "the executor's tokens per answer (unset: the preset's)",
    "<run>.harness.executor.timeout_s": "seconds an executor request may take (unset: the "
    "preset's)",
    "<run>.harness.executor.max_retries": "retries of a failed executor request (unset: the "
    "preset's)",
    "<run>.harness.executor.request.dialect": "how the executor's request bodies are shaped: "
    "sglang, openai or openrouter",
    "<run>.harness.executor.request.drop": "top-level fields never sent to the executor",
    "<run>.harness.executor.request.extra_body": "fields merged into every executor request body",
    "<run>.harness.guidance.request.dialect": "frozen mode: how the guidance request bodies are "
    "shaped: sglang, openai or openrouter (docs/frozen.md)",
    "<run>.harness.guidance.request.drop": "frozen mode: top-level fields never sent to the "
    "guidance endpoint",
    "<run>.harness.guidance.request.extra_body": "frozen mode: fields merged into every guidance "
    "request body",
    "<run>.harness.pricing.<model>.input_per_mtok": "US dollars per million input tokens (null: "
    "unknown)",
    "<run>.harness.pricing.<model>.output_per_mtok": "US dollars per million output tokens "
    "(null: unknown)",
    "training.config.lora_rank": "the LoRA rank trained",
    "training.config.checkpoint_dir": "where training checkpoints are kept",
    "training.options.global-batch-size": "Slime's batch size; must equal G·R",
    "training.options.rollout-batch-size": "Slime's prompts per rollout batch; must equal G",
    "training.options.n-samples-per-prompt": "Slime's samples per prompt; must equal R",
    "training.options.num-rollout": "Slime's rollout batches; must equal STEPS",
    "training.options.save": "where Slime saves Megatron checkpoints",
    "training.options.save-hf": "where Slime saves Hugging Face checkpoints",
    "observability.wandb.enabled": "log to W&B (Reef's training metrics and the search's)",
    "observability.wandb.project": "the W&B project (default: Reef's, reef)",
    "observability.wandb.entity": "the W&B entity (default: the account's default entity)",
    "observability.wandb.group_prefix": "prefix of the W&B group name",
    "observability.wandb.name_prefix": "prefix of the W&B run names",
    "observability.wandb.tags": "W&B tags of the runs",
    "observability.wandb.directory": "where W&B writes its local files",
    "inference.upstream-url": "frozen mode: the guidance endpoint, without /v1",
    "inference.upstream-model": "frozen mode: the guidance model's id at that endpoint",
    "recipe.implementation": "frozen mode: Reef's record-only recipe, "
    "tttd.recipe:TTTDReportsRecipe",
    "recipe.config.guidance-ttt.mode": "`frozen`: the file is a frozen-guidance run's",
}


@dataclass
class Row:
    name: str
    where: str
    default: str
    help: str


@dataclass
class Table:
    rows: list[Row] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)


# ----------------------------------------------------------------------------- helpers


def one_line(text: str | None) -> str:
    return " ".join((text or "").split()).replace("|", "\\|")


def code(value: str) -> str:
    return f"`{value}`" if "`" not in value else f"``{value}``"


def shown(value: Any) -> str:
    """A default as the table shows it."""
    if value is None or value is argparse.SUPPRESS:
        return "—"
    if isinstance(value, bool):
        return code("true" if value else "false")
    if isinstance(value, float):
        return code(f"{value:g}")
    if isinstance(value, Path):
        value = relative(value)
    if isinstance(value, list | tuple | set | frozenset):
        return code("[" + ", ".join(str(item) for item in value) + "]")
    if isinstance(value, dict):
        return code("{}") if not value else code(str(value))
    text = relative(value) if isinstance(value, str) else str(value)
    return code(text) if text else code('""')


def relative(value: str | Path) -> str:
    text = str(value)
    for root, short in ((str(REPO), "."), (str(Path.home()), "~")):
        if text == root:
            return short
        text = text.replace(root + os.sep, "" if short == "." else short + os.sep)
    return text


# ----------------------------------------------------------------------------- commands


def _invocation(action: argparse.Action) -> str:
    flags = ", ".join(action.option_strings)
    if action.nargs == 0:
        return flags
    metavar = action.metavar or (
        "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
    )
    if isinstance(metavar, tuple):
        metavar = " ".join(metavar)
    if action.nargs == "?":
        return f"{flags} [{metavar}]"
    if action.nargs in ("*", "+"):
        return f"{flags} {metavar} ..."
    return f"{flags} {metavar}"


def _flag_default(action: argparse.Action) -> str:
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        return shown(bool(action.default))
    return shown(action.default)


def parser_rows(
    parser: argparse.ArgumentParser, where: str, used: set[tuple[str, str]]
) -> Iterator[Row]:
    """One row per flag of `parser` (and of its subcommands'), one per name of a named flag."""
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parser_rows(sub, f"{where} {name}", used)
            continue
        if (
            not action.option_strings
            or action.help == argparse.SUPPRESS
            or isinstance(action, argparse._HelpAction | argparse._VersionAction)
        ):
            continue
        names = getattr(action, "names", None)
        if isinstance(names, dict):  # a named-values flag: `--limit NAME=VALUE`
            flag = action.option_strings[0]
            for name, item in names.items():
                # `shown` is the default in words where the value says too little
                default = one_line(item.shown) if item.shown is not None else shown(item.default)
                yield Row(
                    code(f"{flag} {name}={item.metavar}"), code(where), default, one_line(item.help)
                )
            continue
        placeholder = MACHINE_DEFAULTS.get((where, action.dest))
        if placeholder is not None:
            used.add((where, action.dest))
            action = copy.copy(action)
            action.default = placeholder
        yield Row(
            code(_invocation(action)),
            code(where),
            _flag_default(action),
            one_line(relative(formatter._expand_help(action)) if action.help else ""),
        )


def command_rows(table: Table) -> list[Row]:
    from harness.cli.entry import subcommand_parsers

    rows: list[Row] = []
    used: set[tuple[str, str]] = set()
    for name, parser in subcommand_parsers().items():
        where = f"guidance-ttt {name}"
        rows.extend(parser_rows(parser, where, used))
        for command, flags in flag_counts(parser, where):
            table.counts[f"{command} flags"] = flags
    table.counts["guidance-ttt flags, all commands"] = sum(table.counts.values())
    stale = sorted(set(MACHINE_DEFAULTS) - used)
    if stale:
        raise SystemExit(f"scripts/knob_table.py: MACHINE_DEFAULTS names no flag any more: {stale}")
    return rows


def flag_counts(parser: argparse.ArgumentParser, where: str) -> Iterator[tuple[str, int]]:
    """(command, flags its --help lists) of a parser and of each of its subcommands."""
    flags = 0
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from flag_counts(sub, f"{where} {name}")
        elif action.option_strings and not isinstance(action, argparse._HelpAction):
            flags += action.help != argparse.SUPPRESS
    if flags or not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        yield where, flags


# ----------------------------------------------------------------------------- settings


@dataclass
class SettingsKey:
    path: str
    files: dict[str, str]  # file -> the key's full path in it
    default: str
    help: str


def _comment_above(owner: type, name: str) -> str:
    """The `#:` (or `#`) comment lines right above the field `name` in `owner`'s source."""
    try:
        source = textwrap.dedent(inspect.getsource(owner))
    except (OSError, TypeError):
        return ""
    lines = source.splitlines()
    for node in ast.parse(source).body[0].body:
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            above: list[str] = []
            index = node.lineno - 2
            while index >= 0 and lines[index].strip().startswith("#"):
                above.insert(0, lines[index].strip().lstrip("#").lstrip(":").strip())
                index -= 1
            return " ".join(above)
    return ""


def _owner(model: type, name: str) -> type:
    for klass in model.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return klass
    return model


def _models_in(annotation: Any) -> tuple[Any, ...]:
    """The non-None types an annotation allows (Annotated and unions unwrapped)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        found: tuple[Any, ...] = ()
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                found += _models_in(arg)
        return found
    return (annotation,)


def _is_model(kind: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(kind, type) and issubclass(kind, BaseModel)


def _walk(model: type, real_prefix: str, shown_prefix: str, skip: set[str]) -> Iterator[tuple]:
    """(shown path, real path, owner, field name, field info) of every leaf key under `model`;
    a run config's own keys are shown under `<run>` (serve.yaml and serve-frozen.yaml share
    them at different places)."""
    from harness.settings.serve import RunConfig

    for name, info in model.model_fields.items():
        if f"{model.__name__}.{name}" in skip:
            continue
        key = info.alias or name
        real = f"{real_prefix}{key}"
        in_run = issubclass(model, RunConfig) and name in RunConfig.model_fields
        path = f"<run>.{key}" if in_run else f"{shown_prefix}{key}"
        kinds = _models_in(info.annotation)
        if len(kinds) == 1 and _is_model(kinds[0]):
            yield from _walk(kinds[0], real + ".", path + ".", skip)
            continue
        mapping = [
            typing.get_args(kind)[1]
            for kind in kinds
            if typing.get_origin(kind) is dict and _is_model(typing.get_args(kind)[1])
        ]
        if mapping:  # `pricing: {<model>: {...}}`
            yield from _walk(mapping[0], real + ".<model>.", path + ".<model>.", skip)
            continue
        yield path, real, _owner(model, name), name, info


def _field_default(info: Any) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        return shown(info.default_factory())
    return shown(info.default)


def settings_keys(table: Table) -> list[SettingsKey]:
    from harness.settings.frozen import FrozenServeSettings
    from harness.settings.serve import ServeSettings
    from harness.settings.tinker import TinkerServeSettings

    keys: dict[str, SettingsKey] = {}
    # A frozen file's `training` may only be absent, and a Tinker file's local-engine, Ray and
    # colocation keys too: they are refusals, not knobs.
    skip = {"FrozenServeSettings.training"} | {
        f"{owner}.{name}"
        for owner, names in (
            ("TinkerTraining", ("colocate", "ray_namespace", "ray_actor_name", "ray_address")),
            ("TinkerInference", ("num_gpus", "tensor_parallel_size", "backend", "options")),
        )
        for name in names
    }
    models = (
        ("serve.yaml", ServeSettings),
        ("serve-frozen.yaml", FrozenServeSettings),
        ("serve-tinker.yaml", TinkerServeSettings),
    )
    for file, model in models:
        count = 0
        for path, real, owner, name, info in _walk(model, "", "", skip):
            count += 1
            own = info.description or _comment_above(owner, name)
            extra = SETTINGS_HELP.get(path)
            help_text = one_line(f"{extra} ({own})" if extra and own else extra or own)
            entry = keys.setdefault(path, SettingsKey(path, {}, _field_default(info), help_text))
            entry.files[file] = real
            entry.help = entry.help or help_text
        table.counts[f"{file} keys"] = count
    table.counts["RunSettings fields (built from them, not set directly)"] = _run_settings_fields()
    stale = sorted(set(SETTINGS_HELP) - set(keys))
    if stale:
        raise SystemExit(
            f"scripts/knob_table.py: SETTINGS_HELP names keys no model declares: {stale}"
        )
    missing = sorted(path for path, key in keys.items() if not key.help)
    if missing:
        raise SystemExit(
            "scripts/knob_table.py: settings keys without help: give each a `#:` comment in its "
            f"model (or an entry in SETTINGS_HELP): {missing}"
        )
    return list(keys.values())


def _run_settings_fields() -> int:
    import dataclasses

    from harness.settings.run_settings import RunSettings

    return len(dataclasses.fields(RunSettings))


def interpolations() -> dict[str, dict[str, tuple[str, str]]]:
    """`{variable: {file: (key path, fallback)}}` of every `${VAR...}` in the settings files."""
    import yaml

    found: dict[str, dict[str, tuple[str, str]]] = {}

    def visit(node: Any, path: str, file: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                visit(value, f"{path}.{key}" if path else str(key), file)
        elif isinstance(node, list):
            for value in node:
                visit(value, path, file)
        elif isinstance(node, str):
            for match in INTERPOLATION.finditer(node):
                variable, kind, fallback = match.groups()
                fallback = "required" if kind == "?" else shown(fallback or None)
                found.setdefault(variable, {})[file] = (path, fallback)

    for file in SETTINGS_FILES:
        visit(yaml.safe_load((REPO / file).read_text(encoding="utf-8")), "", file)
    return found


def settings_rows(
    keys: list[SettingsKey], interpolated: dict[str, dict[str, tuple[str, str]]]
) -> list[Row]:
    by_path: dict[tuple[str, str], str] = {}
    for variable, files in interpolated.items():
        for file, (path, _) in files.items():
            by_path[(file, path)] = variable
    rows = []
    for key in keys:
        files = [file for file in SETTINGS_FILES if file in key.files]
        variables = [by_path.get((file, key.files[file])) for file in files]
        if len(set(variables)) == 1:  # the same variable (or none) in every file
            where = ", ".join(files) + (f" (`${variables[0]}`)" if variables[0] else "")
        else:
            where = ", ".join(
                file + (f" (`${variable}`)" if variable else "")
                for file, variable in zip(files, variables, strict=True)
            )
        rows.append(Row(code(key.path), where, key.default, key.help))
    return rows


# ----------------------------------------------------------------------------- GPU packages


def _trailing_comments(path: Path, names: set[str]) -> dict[str, str]:
    """The end-of-line comment of each `"name": value,  # comment` line of a module."""
    comments: dict[str, str] = {}
    with tokenize.open(path) as handle:
        last_string = None
        line_of_string = -1
        for token in tokenize.generate_tokens(handle.readline):
            if token.type == tokenize.STRING and token.start[0] != line_of_string:
                last_string, line_of_string = token.string.strip("\"'"), token.start[0]
            elif (
                token.type == tokenize.COMMENT
                and token.start[0] == line_of_string
                and last_string in names
            ):
                comments[last_string] = token.string.lstrip("#").strip()
    return comments


def gpu_rows(table: Table) -> list[Row]:
    from judges.gpu import package

    known = sorted(package._KNOWN, key=lambda key: (key in package._DEFAULTS, key))
    comments = _trailing_comments(Path(package.__file__), set(known))
    stale = sorted(set(GPU_KEY_HELP) - set(known))
    if stale:
        raise SystemExit(f"scripts/knob_table.py: GPU_KEY_HELP names keys no package has: {stale}")
    rows = []
    for key in known:
        text = GPU_KEY_HELP.get(key) or comments.get(key)
        if not text:
            raise SystemExit(
                f"scripts/knob_table.py: the GPU package key {key!r} has no help: add a comment "
                "to its default in judges/gpu/package.py or an entry to GPU_KEY_HELP"
            )
        if key in GPU_KEY_HELP and comments.get(key):
            text = f"{GPU_KEY_HELP[key]} ({comments[key]})"
        default = "required" if key == "type" else shown(package._DEFAULTS.get(key, "python"))
        rows.append(Row(code(key), "`<package>/config.yaml`", default, one_line(text)))
    table.counts["GPU package keys"] = len(rows)
    return rows


# ----------------------------------------------------------------------------- variables


def scanned_files() -> Iterator[Path]:
    """The scanned files that git tracks (a fresh clone's), the code first: the order the table
    names readers in."""
    tracked = subprocess.run(
        ["git", "ls-files", "-z", *SCANNED_FILES, *SCANNED],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    order = {name: index for index, name in enumerate((*SCANNED_FILES, *SCANNED))}
    for name in sorted(filter(None, tracked), key=lambda name: (order[name.split("/")[0]], name)):
        path = REPO / name
        if (
            path.suffix in (".py", ".sh", ".yaml")
            and path.name not in SELF
            and not name.startswith(NOT_SCANNED)
        ):
            yield path


def variable_readers() -> dict[str, list[str]]:
    """Every `GUIDANCE_TTT_*` name in the scanned files, with the files that name it, in scan
    order."""
    readers: dict[str, list[str]] = {}
    for path in scanned_files():
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for name in set(VARIABLE.findall(text)):
            readers.setdefault(name, []).append(path.relative_to(REPO).as_posix())
    return dict(sorted(readers.items()))


def _where(files: list[str]) -> str:
    code_files = [f for f in files if not f.startswith(TEST_FOLDERS) and f not in SETTINGS_FILES]
    listed = code_files or files
    text = ", ".join(code(f) for f in listed[:3])
    return text + (f" +{len(listed) - 3}" if len(listed) > 3 else "")


def variable_rows(
    table: Table,
    interpolated: dict[str, dict[str, tuple[str, str]]],
    keys: list[SettingsKey],
) -> tuple[list[Row], list[Row]]:
    by_real = {(file, real): key for key in keys for file, real in key.files.items()}
    readers = variable_readers()
    ours = {name for name in interpolated if name.startswith("GUIDANCE_TTT_")}
    twice = sorted(ours & set(VARIABLES))
    unclassified = sorted(set(readers) - ours - set(VARIABLES))
    stale = sorted(set(VARIABLES) - set(readers))
    problems = []
    if twice:
        problems.append(f"settings interpolations, so remove them from VARIABLES: {twice}")
    if unclassified:
        problems.append(f"named by the code but not classified in VARIABLES: {unclassified}")
    if stale:
        problems.append(f"in VARIABLES but named by no code any more (remove them): {stale}")
    if problems:
        raise SystemExit("scripts/knob_table.py: GUIDANCE_TTT_* variables " + "; ".join(problems))
    user, internal = [], []
    for name in sorted(ours | set(VARIABLES)):
        if name in ours:
            files = interpolated[name]
            fallbacks = {file: fallback for file, (_, fallback) in files.items()}
            fallback = next(iter(fallbacks.values()))
            if len(set(fallbacks.values())) > 1:  # the files default it differently
                fallback = "; ".join(f"{value} ({file})" for file, value in fallbacks.items())
            filled = {
                by_real[(file, path)].path: by_real[(file, path)]
                for file, (path, _) in files.items()
            }
            text = "; ".join(f"sets {code(key.path)}: {key.help}" for key in filled.values())
            user.append(Row(code(name), ", ".join(files), fallback, text))
            continue
        kind, text = VARIABLES[name]
        row = Row(code(name), _where(readers[name]), "—", one_line(text))
        (user if kind == DOCUMENTED else internal).append(row)
        if kind != DOCUMENTED:
            row.default = kind
    table.counts["GUIDANCE_TTT_* variables"] = len(ours | set(VARIABLES))
    table.counts["of them internal or test-only"] = len(internal)
    return user, internal


# ----------------------------------------------------------------------------- rendering


def _table(rows: list[Row], headers: tuple[str, str, str, str]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|---|---|---|---|"]
    lines += [f"| {r.name} | {r.where} | {r.default} | {r.help} |" for r in rows]
    return lines


def render() -> str:
    """The table (`main` runs it without the variables that change parsers' defaults)."""
    table = Table()
    interpolated = interpolations()
    commands = command_rows(table)
    keys = settings_keys(table)
    settings = settings_rows(keys, interpolated)
    gpu = gpu_rows(table)
    user_variables, internal_variables = variable_rows(table, interpolated, keys)
    out = [
        "# Knobs",
        "",
        f"Generated from the code by `{COMMAND}`; do not edit by hand "
        "(`tests/harness/test_knob_table.py` fails when it is out of date).",
        "",
        "Every flag, settings key and environment variable a user sets, with its default. The "
        "flags come from the commands' own parsers (`guidance-ttt COMMAND --help` says the "
        "same), the settings keys from the pydantic models that check serve.yaml, "
        "serve-frozen.yaml and serve-tinker.yaml, the GPU package keys from "
        "`judges/gpu/package.py`.",
        "",
        "| knobs | count |",
        "|---|---|",
        *(f"| {name} | {count} |" for name, count in table.counts.items()),
        "",
        "## Command flags",
        "",
        "`guidance-ttt judge` is also `python -m judges` and `guidance-ttt-judge`; "
        "`guidance-ttt doctor` is also `python -m harness.preflight`. A `--flag name=VALUE` row "
        "is one setting of a repeatable named-values flag.",
        "",
        *_table(commands, ("flag", "command", "default", "what it does")),
        "",
        "## Settings files",
        "",
        "Keys of serve.yaml (trained run), serve-frozen.yaml (frozen guidance) and "
        "serve-tinker.yaml (trained run on Tinker), as dotted paths. `<run>` is "
        "`training.config` in serve.yaml and serve-tinker.yaml and `recipe.config.guidance-ttt` "
        "in serve-frozen.yaml; `<model>` is a model id. A `$VAR` after the file is the variable "
        "the shipped file reads the key from. Sections Reef owns (`reef`, `inference`, "
        "`recipe.config`, `training.options`) list only the keys the harness reads; Reef "
        "documents the rest.",
        "",
        *_table(settings, ("key", "file", "default", "what it sets")),
        "",
        "## GPU task packages",
        "",
        "Keys of a `type: gpu` judge package's config.yaml (judges/README.md).",
        "",
        *_table(gpu, ("key", "file", "default", "what it sets")),
        "",
        "## Environment variables",
        "",
        "A variable a settings file reads sets that key (its default is the file's fallback); "
        "the others are the documented way to set a value that is not a setting (a secret, the "
        "settings file itself, a script's input).",
        "",
        *_table(user_variables, ("variable", "read by", "default", "what it sets")),
        "",
        "## Not knobs: internal and test-only variables",
        "",
        "Set by one of this project's processes for another, or by the tests; a user never "
        "sets them.",
        "",
        *_table(internal_variables, ("variable", "read by", "class", "what it does")),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite docs/knobs.md")
    mode.add_argument("--check", action="store_true", help="exit 1 when docs/knobs.md differs")
    args = parser.parse_args(argv)
    for name in list(os.environ):
        if name.startswith(AMBIENT_PREFIXES):
            del os.environ[name]
    sys.path.insert(0, str(REPO))
    text = render()
    if args.write:
        TARGET.write_text(text, encoding="utf-8")
    elif args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.is_file() else ""
        if current != text:
            print(f"docs/knobs.md is out of date: run {COMMAND}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
