"""TriMul's task package on the CPU: cases, generator, reference, comparison and the seed.

Plain functions, no judge process: the package's cases and settings as the judge loads them
(the cases are GPU MODE's, and equal to ../shared/data/trimul/cases.yaml where that copy is
present), the generator on a small CPU shape, the reference against a loop written from the
instruction's formula, the comparison rule, and the seed and our faster candidate against the
reference.
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from judges.gpu.compare import compare
from judges.gpu.package import load_cases, load_gpu_problem
from judges.kinds import load_problems
from judges.problems.package import ProblemError

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "harbor" / "trimul"
PACKAGE = TASK / "judge" / "trimul"
SHARED_CASES = REPO.parent / "shared" / "data" / "trimul" / "cases.yaml"


def load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = load(PACKAGE / "reference.py", "trimul_reference")


def small(seed: int = 1, nomask: bool = False, distribution: str = "normal", n: int = 6) -> Any:
    return reference.generate_input(
        "cpu",
        seqlen=n,
        bs=2,
        dim=8,
        hiddendim=4,
        seed=seed,
        nomask=nomask,
        distribution=distribution,
    )


def test_the_package_serves_gpu_modes_18_tests_and_7_benchmarks_with_its_rule() -> None:
    problem = load_problems(PACKAGE.parent)["trimul"]
    assert problem.kind == "gpu" and problem.language == "python"
    kinds = [case.kind for case in problem.gpu_cases]
    assert (kinds.count("test"), kinds.count("benchmark")) == (18, 7)
    settings = problem.settings
    assert (settings.rtol, settings.atol) == (2e-2, 2e-2)
    assert (settings.min_repeats, settings.max_repeats, settings.target_error) == (3, 100, 1e-3)
    assert (settings.benchmark_seconds, settings.benchmark_wall, settings.seed_step) == (
        30,
        120,
        13,
    )
    assert settings.warmup_seconds == pytest.approx(0.01)
    first = problem.gpu_cases[0]
    assert first.label() == (
        "seqlen: 32; bs: 1; dim: 128; hiddendim: 128; seed: 9371; nomask: True; "
        "distribution: normal"
    )
    assert problem.listing()["device"] == {
        "kind": "gpu",
        "available": None,
        "detail": "not probed yet",
    }


@pytest.mark.skipif(not SHARED_CASES.is_file(), reason="../shared/data/trimul is absent")
def test_the_cases_are_the_published_ones() -> None:
    shared = yaml.safe_load(SHARED_CASES.read_text())
    ours = load_cases(PACKAGE / "cases.yaml")
    assert [c.spec for c in ours if c.kind == "test"] == shared["tests"]
    assert [c.spec for c in ours if c.kind == "benchmark"] == shared["benchmarks"]


def test_a_wrong_package_key_is_one_line_naming_it(tmp_path: Path) -> None:
    package = tmp_path / "trimul"
    package.mkdir()
    (package / "reference.py").write_text("")
    (package / "cases.yaml").write_text("tests: []\nbenchmarks: []\n")
    with pytest.raises(ProblemError, match=r"unknown keys \['warmup'\]"):
        load_gpu_problem(package, {"type": "gpu", "warmup": 1}, "config.yaml")
    with pytest.raises(ProblemError, match="tests must be a non-empty list"):
        load_gpu_problem(package, {"type": "gpu"}, "config.yaml")
    (package / "cases.yaml").write_text("tests: [{seqlen: 4}]\nbenchmarks: [{seed: 1}]\n")
    with pytest.raises(ProblemError, match=r"tests\[0\] needs an integer seed"):
        load_gpu_problem(package, {"type": "gpu"}, "config.yaml")


def test_the_generator_draws_every_tensor_from_the_case_seed() -> None:
    x, mask, weights, config = small(seed=7)
    again = small(seed=7)
    assert torch.equal(x, again[0]) and torch.equal(mask, again[1])
    assert all(torch.equal(weights[k], again[2][k]) for k in weights)
    assert not torch.equal(x, small(seed=8)[0])
    assert x.shape == (2, 6, 6, 8) and x.dtype == torch.float32
    assert mask.dtype == torch.int64 and set(mask.unique().tolist()) <= {0, 1}
    assert small(nomask=True)[1].dtype == torch.float32 and bool(small(nomask=True)[1].all())
    assert config == {"dim": 8, "hidden_dim": 4}
    assert [name for name, _, _ in reference.WEIGHTS] == list(weights)
    assert weights["left_proj.weight"].shape == (4, 8) and weights["to_out.weight"].shape == (8, 4)


def test_the_generator_scales_weights_and_draws_a_heavy_tailed_cauchy_input() -> None:
    data = reference.generate_input(
        "cpu", seqlen=64, bs=1, dim=64, hiddendim=64, seed=3, nomask=True, distribution="cauchy"
    )
    x, _, weights, _ = data
    assert x.abs().median().item() == pytest.approx(2.0, rel=0.05)  # Cauchy(0, 2): median |x| = 2
    assert x.abs().max().item() > 1000
    assert weights["left_gate.weight"].std().item() == pytest.approx(1 / 8, rel=0.1)
    assert weights["norm.weight"].std().item() == pytest.approx(1.0, rel=0.3)
    with pytest.raises(ValueError, match="distribution 'uniform'"):
        reference.generate_input(
            "cpu", seqlen=2, bs=1, dim=2, hiddendim=2, seed=1, nomask=True, distribution="uniform"
        )


def naive(data: Any) -> torch.Tensor:
    """The instruction's six steps, written with loops over the contraction."""
    x, mask, w, _config = (part for part in data)
    x = x.double()
    w = {k: v.double() for k, v in w.items()}

    def norm(v: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        mean = v.mean(-1, keepdim=True)
        var = ((v - mean) ** 2).mean(-1, keepdim=True)
        return (v - mean) / torch.sqrt(var + 1e-5) * weight + bias

    z = norm(x, w["norm.weight"], w["norm.bias"])
    m = mask.double().unsqueeze(-1)
    left = (z @ w["left_proj.weight"].T) * m * torch.sigmoid(z @ w["left_gate.weight"].T)
    right = (z @ w["right_proj.weight"].T) * m * torch.sigmoid(z @ w["right_gate.weight"].T)
    b, n, _, h = left.shape
    t = torch.zeros(b, n, n, h, dtype=torch.float64)
    for i in range(n):
        for j in range(n):
            for k in range(n):
                t[:, i, j] += left[:, i, k] * right[:, j, k]
    u = norm(t, w["to_out_norm.weight"], w["to_out_norm.bias"])
    u = u * torch.sigmoid(z @ w["out_gate.weight"].T)
    return u @ w["to_out.weight"].T


@pytest.mark.parametrize("nomask", [True, False])
def test_the_reference_is_the_instructions_formula(nomask: bool) -> None:
    data = small(seed=5, nomask=nomask, n=5)
    got = reference.ref_kernel(data)
    assert torch.allclose(got.double(), naive(data), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "program",
    [
        TASK / "solution" / "solution.py",
        REPO / "judges" / "benchmarks" / "trimul_candidates" / "fast_bf16.py",
    ],
    ids=lambda p: p.name,
)
def test_the_seed_and_our_faster_candidate_match_the_reference(program: Path) -> None:
    candidate = load(program, program.stem)
    for case in (
        {"nomask": True, "distribution": "normal"},
        {"nomask": False, "distribution": "cauchy"},
    ):
        data = reference.generate_input(
            "cpu", seqlen=32, bs=1, dim=32, hiddendim=16, seed=11, **case
        )
        verdict = compare(candidate.custom_kernel(data), reference.ref_kernel(data), 2e-2, 2e-2)
        assert verdict.ok, verdict.detail


def test_compare_follows_gpu_modes_rule_element_by_element() -> None:
    expected = torch.tensor([1.0, -2.0, float("nan"), float("inf"), 0.0])
    assert compare(expected.clone(), expected, 2e-2, 2e-2).ok  # NaN and inf where expected
    near = expected.clone()
    near[0] = 1.0 + 0.02 + 0.02 * 1.0 - 1e-6  # just inside atol + rtol * |expected|
    assert compare(near, expected, 2e-2, 2e-2).ok
    far = expected.clone()
    far[1] = -2.0 - 0.07
    verdict = compare(far, expected, 2e-2, 2e-2)
    assert (
        not verdict.ok and "1 of 5 elements differ" in verdict.detail and "(1,)" in verdict.detail
    )
    for position, bad in ((4, float("nan")), (2, 0.0), (3, -math.inf), (0, math.inf)):
        wrong = expected.clone()
        wrong[position] = bad
        assert not compare(wrong, expected, 2e-2, 2e-2).ok, (position, bad)
    assert "shape [4]" in compare(expected[:4], expected, 2e-2, 2e-2).detail
    assert compare(expected.to(torch.bfloat16), expected, 2e-2, 2e-2).ok


def test_the_guards_keys_are_checked(tmp_path: Path) -> None:
    package = tmp_path / "trimul"
    package.mkdir()
    (package / "reference.py").write_text("")
    (package / "cases.yaml").write_text("tests: [{seed: 1}]\nbenchmarks: [{seed: 2}]\n")
    loaded = load_gpu_problem(
        package, {"type": "gpu", "determinism_check": True, "peak_bandwidth": 4.8e12}, "config.yaml"
    )
    assert loaded.settings.determinism_check and loaded.settings.peak_bandwidth == 4.8e12
    assert loaded.settings.peak_flops is None
    with pytest.raises(ProblemError, match="determinism_check must be true or false"):
        load_gpu_problem(package, {"type": "gpu", "determinism_check": "yes"}, "config.yaml")
    with pytest.raises(ProblemError, match="peak_flops must be a positive number or null"):
        load_gpu_problem(package, {"type": "gpu", "peak_flops": 0}, "config.yaml")
    assert not loaded.settings.trace_calls
    traced = load_gpu_problem(package, {"type": "gpu", "trace_calls": True}, "config.yaml")
    assert traced.settings.trace_calls and traced.settings.to_json()["trace_calls"] is True
    with pytest.raises(ProblemError, match="trace_calls must be true or false"):
        load_gpu_problem(package, {"type": "gpu", "trace_calls": 1}, "config.yaml")
    for removed in ("clocked_inputs", "keep_case_calibration"):  # no longer package keys
        with pytest.raises(ProblemError, match=f"unknown keys \\['{removed}'\\]"):
            load_gpu_problem(package, {"type": "gpu", removed: False}, "config.yaml")
