"""The two figures `guidance-ttt plot` draws from the series of `harness.cli.plot_series`.

Figure 1 (scores), x-axis `step` (0-based, as `status`, `inspect` and the progress display
count steps): every rollout of a step as a point (valid ones at their score; invalid ones, which
have no score, in a separate strip below the score axis, so they are never read as low valid
ones, each failure kind with its own marker and colour, `FAILURE_STYLE`), the step's mean (a
plain line with small markers, no caps) and best valid score, `valid/sampled` above each step
(clear of the title), the run's best so far, the seed's score as a labelled
line drawn above the grid, optionally a labelled reference score (e.g. the human expert's) and
the reference run's published best-so-far line (`results/reference/trajectory.csv`).

Figure 2 (health), same x-axis: the fraction of valid rollouts and of malformed guidance
(`guidance_format_error`) per step, the failures per step by kind (format, parse, execution,
invalid: stacked bars, told apart by colour and hatch), and the tokens per step (executor and
guidance, stacked) with the cost per step on a second axis from 0 when every model is priced.

A `trajectory.csv` holds only the best so far and the valid counts, so a plot made from one
draws those series only. `plot` returns what it drew, read back from the figure's artists (its
points, lines, axis and legend labels), so tests check what is on the figure, not what was
meant to be. Matplotlib (the `plot` extra) is imported only when drawing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean
from typing import Any

from harness.cli.plot_series import Reference, Series

X_LABEL = "step"
#: How each failure kind is drawn, the same in both figures: (colour, marker, hatch).
FAILURE_STYLE = {
    "format": ("tab:red", "x", "//"),
    "parse": ("tab:orange", "+", "\\\\"),
    "execution": ("tab:purple", "s", ".."),
    "invalid": ("tab:gray", "v", "xx"),
}
#: Where invalid rollouts are drawn in their strip (its height is 0..1).
INVALID_ROW = 0.5
MISSING_EXTRA = "needs matplotlib, from the `plot` extra: pip install -e '.[plot]'"


@dataclass(frozen=True)
class PlotData:
    """What the two figures show, read back from their artists."""

    scores_png: Path
    health_png: Path
    steps: list[int]  # x of the best-so-far line
    best_so_far: list[float]
    seed: float
    valid_points: list[tuple[int, float]]  # (step, score) of every valid rollout drawn
    invalid_points: list[int]  # the step of every invalid rollout drawn
    step_mean: list[tuple[int, float]]
    step_best: list[tuple[int, float]]
    reference: list[tuple[int, float]] | None
    valid_fraction: list[tuple[int, float]]
    format_error_fraction: list[tuple[int, float]] | None
    tokens: list[tuple[int, float]] | None  # executor + guidance, per step
    cost: list[tuple[int, float]] | None
    labels: dict[str, Any] = field(default_factory=dict)  # axes and legend texts per figure
    #: The per-step count labels ("valid/sampled") drawn above each step.
    counts: list[tuple[int, str]] = field(default_factory=list)
    #: The optional reference line (e.g. the human-expert score): (score, label).
    reference_line: tuple[float, str] | None = None
    #: Per failure kind (format, parse, execution, invalid), the fraction of rollouts per step.
    failure_fractions: dict[str, list[tuple[int, float]]] | None = None
    #: Per failure kind, the step of every rollout of that kind drawn in the no-score strip.
    invalid_by_kind: dict[str, list[int]] = field(default_factory=dict)


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError(MISSING_EXTRA) from exc
    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def _spread(step: int, n: int) -> list[float]:
    """x positions of `n` points of one step, spread over ±0.25 so they do not hide each other."""
    if n <= 1:
        return [float(step)] * n
    return [step - 0.25 + 0.5 * i / (n - 1) for i in range(n)]


def _pairs(line: Any) -> list[tuple[int, float]]:
    return [
        (round(float(x)), float(y)) for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
    ]


def _labels(figure: Any) -> list[dict[str, Any]]:
    out = []
    for axes in figure.axes:
        legend = axes.get_legend()
        out.append(
            {
                "title": axes.get_title(),
                "x": axes.get_xlabel(),
                "y": axes.get_ylabel(),
                "legend": [t.get_text() for t in legend.get_texts()] if legend else [],
            }
        )
    return out


def plot(
    series: Series,
    path: Path,
    title: str | None = None,
    reference: Reference | None = None,
    reference_line: tuple[float, str] | None = None,
) -> PlotData:
    """Draw the scores figure at `path` and the health figure next to it (`<stem>-health.png`);
    return what they show. `title` (default: the task) heads both figures, each with what it
    shows after a colon. `reference_line` (score, label) draws a labelled horizontal line,
    e.g. the human-expert score."""
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    health_path = path.with_name(f"{path.stem}-health{path.suffix or '.png'}")
    base = title or series.task
    figure, (ax, strip) = plt.subplots(
        2,
        1,
        figsize=(9, 6),
        sharex=True,
        gridspec_kw={"height_ratios": [7, 1]},
        layout="constrained",
    )
    try:
        arts = _draw_scores(ax, strip, series, reference, reference_line)
        _decorate_scores(ax, strip, series, base)
        figure.savefig(path, dpi=120)
        drawn, scores_labels = _read_scores(figure, ax, strip, arts, reference_line)
    finally:
        plt.close(figure)
    health, health_labels = _health(plt, series, health_path, base)
    return PlotData(
        path,
        health_path,
        drawn["steps"],
        drawn["best"],
        drawn["seed"],
        drawn["valid"],
        drawn["invalid"],
        drawn["mean"],
        drawn["step_best"],
        drawn["reference"],
        health["valid"],
        health["format"],
        health["tokens"],
        health["cost"],
        {"scores": scores_labels, "health": health_labels},
        drawn["counts"],
        drawn["reference_line"],
        health["failures"],
        drawn["invalid_by_kind"],
    )


def _draw_scores(
    ax: Any,
    strip: Any,
    series: Series,
    reference: Reference | None,
    reference_line: tuple[float, str] | None,
) -> dict[str, Any]:
    """The scores figure's data: every rollout, the step means and bests, the run's best so far,
    the seed, the reference lines, and the rollouts without a score in their own strip; returns
    the artists by name (None where there is nothing to draw)."""
    steps = series.steps
    pick = max if series.direction == "max" else min
    ax.grid(alpha=0.3, zorder=0)
    ax.set_axisbelow(True)
    # Invalid rollouts have no score: they go in their own strip below the score axis, so
    # they are never mistaken for low valid ones.
    strip.set_ylim(0, 1)
    strip.set_yticks([])
    strip.set_ylabel("no score", fontsize=8)
    strip.grid(alpha=0.3, axis="x")
    arts: dict[str, Any] = dict.fromkeys(("valid", "mean", "best", "reference", "extra"))
    valid_xy = [
        (x, s)
        for st in steps
        for x, s in zip(_spread(st.step, len(st.scores or ())), st.scores or (), strict=True)
    ]
    if valid_xy:
        arts["valid"] = ax.scatter(
            *zip(*valid_xy, strict=True), s=14, alpha=0.55, color="tab:blue", label="valid rollout"
        )
    arts["invalid"] = _no_score_strip(strip, steps)
    scored = [st for st in steps if st.scores]
    if scored:
        (arts["mean"],) = ax.plot(
            [st.step for st in scored],
            [fmean(st.scores or ()) for st in scored],
            color="tab:orange",
            marker="D",
            markersize=3.5,
            linewidth=1,
            label="step mean (valid)",
        )
        (arts["best"],) = ax.plot(
            [st.step for st in scored],
            [pick(st.scores or ()) for st in scored],
            color="tab:purple",
            marker="^" if series.direction == "max" else "v",
            linestyle=":",
            linewidth=1,
            label=f"step {'max' if series.direction == 'max' else 'min'} (the step's best)",
        )
    (arts["run"],) = ax.plot(
        [st.step for st in steps],
        [st.best_so_far for st in steps],
        drawstyle="steps-post",
        color="tab:green",
        linewidth=2.2,
        marker="o",
        markersize=3,
        label="best so far",
        zorder=4,
    )
    arts["seed"] = ax.axhline(
        series.seed,
        color="black",
        linestyle="--",
        linewidth=1.4,
        zorder=3,
        label=f"seed {series.seed:.4f}",
    )
    if reference is not None:
        (arts["reference"],) = ax.plot(
            reference.steps,
            reference.best_so_far,
            drawstyle="steps-post",
            color="gray",
            linewidth=1.6,
            linestyle="-.",
            label=reference.label,
            zorder=3,
        )
    if reference_line is not None:
        arts["extra"] = ax.axhline(
            reference_line[0],
            color="tab:brown",
            linestyle=(0, (6, 2)),
            linewidth=1.4,
            zorder=3,
            label=f"{reference_line[1]} {reference_line[0]:.4f}",
        )
    return arts


def _decorate_scores(ax: Any, strip: Any, series: Series, base: str) -> None:
    """The scores figure's counts above each step, axis labels, title and legend."""
    from matplotlib.ticker import MaxNLocator

    steps = series.steps
    better = "higher" if series.direction == "max" else "lower"
    rollouts = any(st.scores is not None for st in steps)
    title = f"{base}: " + ("every rollout's score per step" if rollouts else "best so far per step")
    # How many rollouts each step had and how many were valid, above the step.
    counts = [(st.step, f"{st.valid}/{st.sampled}") for st in steps if st.valid is not None]
    for step, text in counts:
        ax.text(
            step, 1.0, text, transform=ax.get_xaxis_transform(), ha="center", va="bottom",
            fontsize=7, color="dimgray",
        )  # fmt: skip
    ax.set_ylabel(f"score ({better} is better)")
    strip.set_xlabel(X_LABEL)
    ax.set_title(
        title + " (valid/sampled above each step)" + (f"\n{series.note}" if series.note else ""),
        fontsize=11,
        pad=14,  # room for the count labels above the axes
    )
    strip.xaxis.set_major_locator(MaxNLocator(integer=True))
    handles, names = ax.get_legend_handles_labels()
    more, more_names = strip.get_legend_handles_labels()
    ax.legend(handles + more, names + more_names, loc="best", fontsize=8)


def _read_scores(
    figure: Any,
    ax: Any,
    strip: Any,
    arts: dict[str, Any],
    reference_line: tuple[float, str] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the saved scores figure shows, read back from its artists, and its labels."""
    renderer = figure.canvas.get_renderer()
    title_box = ax.title.get_window_extent(renderer)
    invalid_arts = arts["invalid"]
    invalid_art = next(iter(invalid_arts.values()), None)
    valid_art, mean_line, best_line = arts["valid"], arts["mean"], arts["best"]
    run_line, seed_line, ref_line, extra_line = (
        arts["run"], arts["seed"], arts["reference"], arts["extra"]
    )  # fmt: skip
    drawn = {
        "steps": [round(float(x)) for x in run_line.get_xdata()],
        "best": [float(y) for y in run_line.get_ydata()],
        "seed": float(seed_line.get_ydata()[0]),
        "valid": [(round(float(x)), float(y)) for x, y in valid_art.get_offsets()]
        if valid_art is not None
        else [],
        "invalid": sorted(
            round(float(x)) for art in invalid_arts.values() for x, _ in art.get_offsets()
        ),
        "invalid_by_kind": {
            kind: [round(float(x)) for x, _ in art.get_offsets()]
            for kind, art in invalid_arts.items()
        },
        "mean": _pairs(mean_line) if mean_line is not None else [],
        "step_best": _pairs(best_line) if best_line is not None else [],
        "reference": _pairs(ref_line) if ref_line is not None else None,
        "reference_line": (float(extra_line.get_ydata()[0]), reference_line[1])
        if extra_line is not None and reference_line is not None
        else None,
        "counts": [(round(t.get_position()[0]), t.get_text()) for t in ax.texts],
    }
    labels = {
        **_labels(figure)[0],
        "x": strip.get_xlabel(),
        "invalid_apart": invalid_art is None or invalid_art.axes is strip,
        "mean_marker": mean_line.get_marker() if mean_line is not None else None,
        "y_limits": [float(y) for y in ax.get_ylim()],
        "seed_above_grid": ax.get_axisbelow() is True and seed_line.get_zorder() > 1,
        "counts_clear_of_title": not any(
            t.get_window_extent(renderer).overlaps(title_box) for t in ax.texts
        ),
    }
    return drawn, labels


def _no_score_strip(strip: Any, steps: Any) -> dict[str, Any]:
    """The rollouts without a score in their strip, one marker and colour per failure kind
    (`FAILURE_STYLE`; a `trajectory.csv` knows only how many: one kind, `no score`)."""
    by_kind: dict[str, list[float]] = {}
    for st in steps:
        kinds = [(k, n) for k, n in st.failures or () if n] or (
            [("no score", st.invalid)] if st.invalid else []
        )
        xs = iter(_spread(st.step, sum(n for _, n in kinds)))
        for kind, n in kinds:
            by_kind.setdefault(kind, []).extend(next(xs) for _ in range(n))
    order = list(FAILURE_STYLE)
    arts = {}
    for kind, xs in sorted(by_kind.items(), key=lambda item: _rank(order, item[0])):
        colour, marker, _ = FAILURE_STYLE.get(kind, ("tab:red", "x", ""))
        arts[kind] = strip.scatter(
            xs,
            [INVALID_ROW] * len(xs),
            marker=marker,
            s=22,
            color=colour,
            label=f"{kind} failure (no score, drawn apart below)",
        )
    return arts


def _rank(order: list[str], kind: str) -> int:
    return order.index(kind) if kind in order else len(order)


def _health(plt: Any, series: Series, path: Path, title: str) -> tuple[dict[str, Any], Any]:
    """The valid and guidance-format-error fractions and the tokens/cost per step."""
    from matplotlib.ticker import MaxNLocator

    steps = [st for st in series.steps if st.sampled]
    with_tokens = [st for st in steps if st.executor_tokens is not None]
    rows = 2 if with_tokens else 1
    figure, axes = plt.subplots(rows, 1, figsize=(9, 3 + 2.5 * rows), sharex=True, squeeze=False)
    try:
        top = axes[0][0]
        top.grid(alpha=0.3)
        top.set_axisbelow(True)
        (valid_line,) = top.plot(
            [st.step for st in steps],
            [(st.valid or 0) / st.sampled for st in steps],
            marker="o",
            color="tab:green",
            label="valid fraction",
        )
        format_line = None
        if any(st.format_errors is not None for st in steps):
            (format_line,) = top.plot(
                [st.step for st in steps],
                [(st.format_errors or 0) / st.sampled for st in steps],
                marker="s",
                color="tab:red",
                label="guidance format error fraction",
            )
        failures = None
        broken_down = [st for st in steps if st.failures is not None]
        if broken_down:
            failures = {}
            bottoms = [0.0] * len(broken_down)
            for kind, _ in broken_down[0].failures or ():
                fractions = [dict(st.failures or ())[kind] / st.sampled for st in broken_down]
                colour, _, hatch = FAILURE_STYLE.get(kind, ("tab:brown", "x", ""))
                top.bar(
                    [st.step for st in broken_down], fractions, bottom=bottoms, width=0.5,
                    color=colour, alpha=0.45, hatch=hatch, edgecolor=colour,
                    label=f"{kind} failures",
                )  # fmt: skip
                bottoms = [b + f for b, f in zip(bottoms, fractions, strict=True)]
                failures[kind] = [
                    (st.step, f) for st, f in zip(broken_down, fractions, strict=True)
                ]
        top.set_ylim(-0.02, 1.05)
        top.set_ylabel("fraction of rollouts")
        top.set_title(
            (
                f"{title}: valid rollouts, failures by kind, tokens per step"
                if with_tokens
                else f"{title}: valid rollouts per step (a trajectory.csv has no more)"
            )
            + (f"\n{series.note}" if series.note else ""),
            fontsize=11,
        )
        top.legend(loc="best", fontsize=8)
        tokens = cost = None
        if with_tokens:
            tokens, cost = _tokens_panel(plt, axes[1][0], with_tokens, series)
        axes[-1][0].set_xlabel(X_LABEL)
        axes[-1][0].xaxis.set_major_locator(MaxNLocator(integer=True))
        figure.tight_layout()
        figure.savefig(path, dpi=120)
        drawn = {
            "failures": failures,
            "valid": _pairs(valid_line),
            "format": _pairs(format_line) if format_line is not None else None,
            "tokens": tokens,
            "cost": cost,
        }
        labels = _labels(figure)
        if cost is not None:
            labels[-1]["cost_y_limits"] = [float(y) for y in figure.axes[-1].get_ylim()]
        return drawn, labels
    finally:
        plt.close(figure)


def _tokens_panel(
    plt: Any, bottom: Any, with_tokens: list[Any], series: Series
) -> tuple[list[tuple[float, float]], list[tuple[float, float]] | None]:
    """The health figure's lower panel: executor and guidance tokens per step, stacked, and the
    cost per step on a twin axis where every step is priced. Returns (tokens, cost) points."""
    cost = None
    bottom.grid(alpha=0.3)
    bottom.set_axisbelow(True)
    xs = [st.step for st in with_tokens]
    executor = [(st.executor_tokens or 0) / 1e3 for st in with_tokens]
    guidance = [(st.guidance_tokens or 0) / 1e3 for st in with_tokens]
    bottom.bar(xs, executor, color="tab:blue", label="executor tokens (k)")
    bottom.bar(xs, guidance, bottom=executor, color="tab:cyan", label="guidance tokens (k)")
    tokens = [(x, e + g) for x, e, g in zip(xs, executor, guidance, strict=True)]
    bottom.set_ylabel("tokens per step (thousands)")
    bottom.set_ylim(0, max(t for _, t in tokens) * 1.4 or 1.0)  # room for the legend
    handles, names = bottom.get_legend_handles_labels()
    priced = [st for st in with_tokens if st.cost_usd is not None]
    if priced and len(priced) == len(with_tokens):
        twin = bottom.twinx()
        (cost_line,) = twin.plot(
            [st.step for st in priced],
            [st.cost_usd for st in priced],
            color="black",
            marker="d",
            label="cost (USD)",
        )
        twin.set_ylabel("cost per step (USD)")
        twin.set_ylim(0, max(st.cost_usd or 0.0 for st in priced) * 1.4 or 1.0)  # from 0
        cost = _pairs(cost_line)
        extra, more = twin.get_legend_handles_labels()
        handles, names = handles + extra, names + more
    else:
        missing = ", ".join(series.unpriced) or "prices not given"
        names = [*names, f"cost unknown ({missing})"]
        handles = [*handles, plt.Line2D([], [], color="none")]
    bottom.legend(handles, names, loc="best", fontsize=8)
    return tokens, cost
