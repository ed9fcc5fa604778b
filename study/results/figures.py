"""The paper's figures, drawn from the stored Parquet results alone (PDF and PNG under DIR/figures/).

* ``regret_<S>``: Setting S, log R(t) and log relative error vs t, all methods, mean over
  replications with +/- 2 Monte Carlo SE bands (paper Figure 1, one row per setting).
* ``coverage_<S>``: one panel per item; black dots = mean CP across dimensions, grey = min and
  max across dimensions, dashed = nominal level, shaded = Wilson 95% band for the number of
  replications (paper Figures 2-3).
* ``uniform_<S>``: the fixed-time CIs and the anytime-valid confidence sequences over t for a few
  coordinates of one replication, and the time-uniform coverage of both per coordinate
  (:mod:`.uniform`).
* ``reg_setting_<S>_T0_<T0>_T_<T>_M_<M>`` / ``err_setting_...``: the M-sweep panels, named as in
  the paper's appendix; ``msweep_<S>``: final R(T) and error against M.
* LLM-ranking replays (studies ``llm``, ``arena``, ``byo``): ``<study>_regret`` (the paper's
  real-data figure: R(t) and relative error, all methods, Monte Carlo bands) and, for ``llm`` and
  ``byo``, ``<study>_diagrams`` / ``<study>_diagrams_ci`` (ranking diagrams at t = 200, ..., 1600,
  point and uncertainty-aware, from one RB replication whose snapshots are stored in
  ``<study>/_diagrams.npz``).  Captions say what is real and what is generated.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..llm.byo import safe_label
from . import curves, storage, uniform
from .stored import stored_studies

def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    plt.rcParams.update({"font.size": 10, "axes.titlesize": 11, "axes.grid": True,
                         "grid.alpha": 0.3, "savefig.bbox": "tight", "figure.dpi": 110})
    return plt


def _save(fig, directory: Path, stem: str) -> list:
    """``stem.pdf`` and ``stem.png`` under ``directory``, each written atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext, kw in (("pdf", {}), ("png", {"dpi": 150})):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=ext, **kw)
        path = directory / f"{stem}.{ext}"
        storage.atomic_write_bytes(buffer.getvalue(), path)
        paths.append(path)
    return paths


def trajectory_stats(out, study):
    """Mean, SD and count over replications of R(t) and the relative error, per (setting,
    method, M, T0, T, t), as a DataFrame."""
    df = storage.load(out, study, columns=["T0", "T", "avg_regret", "rel_error", "avg_pair_regret"])
    if df.empty:
        return df
    g = df.groupby(["setting", "method", "M", "T0", "T", "t"], sort=True, observed=True)
    stats = g.agg(reg_mean=("avg_regret", "mean"), reg_sd=("avg_regret", "std"),
                  err_mean=("rel_error", "mean"), err_sd=("rel_error", "std"),
                  pair_mean=("avg_pair_regret", "mean"), pair_sd=("avg_pair_regret", "std"),
                  n=("avg_regret", "size")).reset_index()
    for col in ("reg", "err", "pair"):
        stats[f"{col}_se"] = stats[f"{col}_sd"].fillna(0.0) / np.sqrt(stats["n"])
    return stats


def _cell_groups(out, study, directory):
    """The figure directory, the curve statistics of a stored study and their per-(setting, M,
    T0, T) groups."""
    stats = trajectory_stats(out, study)
    directory = Path(directory or Path(out) / "figures")
    groups = [] if stats.empty else list(stats.groupby(["setting", "M", "T0", "T"], sort=True))
    return directory, stats, groups


def _setting_label(out, study, setting) -> str:
    """"Setting A", with the user's overrides other than M, T0, T (shown anyway) and the CI grid."""
    overrides = ((storage.read_manifest(out, study) or {}).get("overrides") or {})
    shown = {k: v for k, v in overrides.items() if k not in ("M", "T0", "T", "ci_every", "ci_level")}
    extra = ", ".join(f"{k}={v}" for k, v in sorted(shown.items()))
    return f"Setting {setting}" + (f" ({extra})" if extra else "")


def _curves_figure(plt, frame, panels, *, title, caption="", T0=None, T=None):
    """Small multiples of ``panels`` = [(metric, column title, y label)]: one row when the methods
    fit in one panel, else one row per method family (:func:`study.results.curves.groups`); each
    row's legend outside its panels; a caption with the hidden curves and the stage switch."""
    methods = curves.method_order(frame["method"].unique())
    rows = curves.groups(methods)
    nrows, ncols = len(rows), len(panels)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols + 2.4, 3.3 * nrows + 0.9), sharex=True,
                             sharey="col", squeeze=False)
    hidden = {}
    for r, (name, members) in enumerate(rows):
        context = [m for m in methods if m not in members] if nrows > 1 else []
        row_hidden = curves.hidden_curves(frame, members, metrics=[p[0] for p in panels])
        hidden.update(row_hidden)
        for c, (metric, column, ylabel) in enumerate(panels):
            ax = axes[r][c]
            curves.draw_panel(ax, frame, metric, members, context=context, T0=T0, T=T, hidden=row_hidden, everyone=methods,
                              ylabel=(f"{name}\n" if name and c == 0 else "") + ylabel)
            if r == 0:
                ax.set_title(column)
            if r < nrows - 1:
                ax.set_xlabel("")
        if name:
            axes[r][0].yaxis.label.set_fontweight("bold")
        curves.legend_outside(axes[r][-1])
    fig.suptitle(title, fontsize=10)
    note = " ".join(x for x in (curves.hidden_note(hidden), curves.STAGE_NOTE if T0 else "", caption) if x)
    _caption(fig, note, width=int(15 * (4.4 * ncols + 2.4)))
    return fig


REGRET_PANELS = (("reg", "average regret R(t)", "R(t), log scale"),
                 ("err", r"relative error $\max_i\|\hat\theta_i(t)-\theta^*_i\| / \max_i\|\theta^*_i\|$",
                  "relative error, log scale"))


def regret_figures(out, study="regret", directory=None, *, label=None, stem=None, caption=None,
                   legend_loc=None) -> list:
    """One figure per setting: log R(t) and log relative error vs t, mean over replications with
    +/- 2 Monte Carlo SE bands, small multiples by method family when there are many methods.
    ``label`` replaces "Setting <S>" in the title, ``stem`` the file name, ``caption`` adds a note
    under the panels (``legend_loc`` is accepted for compatibility; legends sit outside)."""
    plt = _plt()
    directory, stats, groups = _cell_groups(out, study, directory)
    paths = []
    for (setting, M, T0, T), frame in groups:
        n = int(frame["n"].max())
        name = label or _setting_label(out, study, setting)
        fig = _curves_figure(plt, frame, REGRET_PANELS, T0=T0, T=T, caption=caption or "",
                             title=f"{name} (M={M}, T0={T0}, T={T}): {frame['method'].nunique()} methods, mean over "
                                   f"{n} replications, bands = $\\pm$2 MC SE")
        suffix = "" if study == "regret" else f"_{study}"
        paths += _save(fig, directory, stem or f"regret_{setting}{suffix}")
        plt.close(fig)
    return paths


def baselines_figures(out, study="baselines", directory=None) -> list:
    """One figure per setting: R(t) (the major item's regret, the paper's), the pair's regret (the
    dueling literature's: the mean regret of both compared items) and the relative error, all
    methods, +/- 2 Monte Carlo SE bands; small multiples by method family."""
    plt = _plt()
    directory, stats, groups = _cell_groups(out, study, directory)
    replay = bool(((storage.read_manifest(out, study) or {}).get("fingerprint") or {}).get("replay"))
    panels = (("reg", "regret of the major item (the paper's)", "R(t), log scale"),
              ("pair", "regret of the pair: mean of both items", "pair regret, log scale"),
              ("err", r"$\max_i\|\hat\theta_i(t)-\theta^*_i\| / \max_i\|\theta^*_i\|$", "relative error, log scale"))
    paths = []
    for (setting, M, T0, T), frame in groups:
        n = int(frame["n"].max())
        name = "LLM replay (GENERATED judgments)" if replay else _setting_label(out, study, setting)
        fig = _curves_figure(plt, frame, panels, T0=T0, T=T,
                             title=f"{name} (M={M}, T0={T0}, T={T}): {frame['method'].nunique()} methods, mean over "
                                   f"{n} replications, bands = $\\pm$2 MC SE")
        paths += _save(fig, directory, f"{study}_{setting}")
        plt.close(fig)
    return paths


def _caption(fig, text, width=150, fontsize=8):
    """A wrapped note under the panels (tight layout keeps room for it)."""
    import textwrap
    lines = textwrap.wrap(text, width)
    fig.text(0.5, 0.005, "\n".join(lines), ha="center", va="bottom", fontsize=fontsize, color="0.2")
    height = fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, min(0.4, (len(lines) * fontsize * 1.45 + 6) / 72 / height), 1, 1))


def msweep_figures(out, study="msweep", directory=None) -> list:
    """The appendix panels, one file per (setting, M) and metric, plus a final-value summary."""
    plt = _plt()
    directory, stats, groups = _cell_groups(out, study, directory)
    paths = []
    for (setting, M, T0, T), frame in groups:
        n = int(frame["n"].max())
        for metric, prefix, ylabel in (("reg", "reg", "average regret R(t) (log scale)"),
                                       ("err", "err", "relative estimation error (log scale)")):
            fig = _curves_figure(plt, frame, ((metric, "", ylabel),), T0=T0, T=T,
                                 title=f"{_setting_label(out, study, setting)}, M={M} ({n} reps)")
            paths += _save(fig, directory, f"{prefix}_setting_{setting}_T0_{T0}_T_{T}_M_{M}")
            plt.close(fig)
    final = stats[stats["t"] == stats["T"]]
    for setting, frame in final.groupby("setting", sort=True):
        if frame["M"].nunique() < 2:
            continue
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
        methods = curves.method_order(frame["method"].unique())
        for ax, metric, ylabel in ((axes[0], "reg", "final R(T)"), (axes[1], "err", "final relative error")):
            for k, (method, style) in enumerate(curves.styles(methods).items()):
                sub = frame[frame["method"] == method].sort_values("M")
                style = dict(style)
                style.pop("zorder", None)
                dodge = 1.0 + 0.03 * (k - (len(methods) - 1) / 2)  # side by side, not on top
                ax.errorbar(sub["M"] * dodge, sub[f"{metric}_mean"], yerr=2 * sub[f"{metric}_se"], ms=4, capsize=3,
                            **style)
            ax.set_xscale("log")
            curves.log_axis(ax)
            ax.set_xticks(sorted(frame["M"].unique()))
            ax.set_xticklabels([str(m) for m in sorted(frame["M"].unique())])
            from matplotlib.ticker import NullLocator
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xlabel("M (comparisons per step)")
            ax.set_ylabel(ylabel + " (log)")
        curves.legend_outside(axes[1])
        fig.suptitle(f"{_setting_label(out, study, setting)}: value at t=T against M (mean $\\pm$2 MC SE)",
                     fontsize=10)
        fig.tight_layout()
        paths += _save(fig, directory, f"msweep_{setting}")
        plt.close(fig)
    return paths


def wilson_band(p: float, n: int, z: float = 1.959963984540054):
    """Wilson score interval for a proportion ``p`` observed in ``n`` trials."""
    if n <= 0:
        return (np.nan, np.nan)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def coverage_stats(out, study="coverage", min_fraction=0.9):
    """Per (setting, method, M, t, item, dim): empirical coverage over replications, and the
    number of replications with a CI at t.  Grid times where fewer than ``min_fraction`` of the
    replications have a CI are dropped (the CI exists once the information matrix is invertible)."""
    df = storage.load(out, study, "intervals", columns=["covered"])
    if df.empty:
        return df, {}
    reps = df.groupby(["setting", "method", "M"], observed=True)["rep"].nunique().to_dict()
    cell = df.groupby(["setting", "method", "M", "t", "item", "dim"], observed=True)["covered"] \
        .agg(cp="mean", n="size").reset_index()
    total = np.array([reps[k] for k in zip(cell["setting"], cell["method"], cell["M"])])
    keep = cell["n"].to_numpy() >= min_fraction * total
    return cell[keep].reset_index(drop=True), reps


def coverage_figures(out, study="coverage", directory=None, level=0.95) -> list:
    plt = _plt()
    cell, reps = coverage_stats(out, study)
    directory = Path(directory or Path(out) / "figures")
    paths = []
    if cell.empty:
        return paths
    stored = storage.stored_keys(out, study)
    for (setting, method, M), frame in cell.groupby(["setting", "method", "M"], sort=True):
        n_reps = reps[(setting, method, M)]
        items = sorted(frame["item"].unique())
        n_items = int(max(items)) + 1
        ncols = min(5, n_items)
        nrows = int(np.ceil(n_items / ncols))
        fig, axes = plt.subplots(nrows, ncols, figsize=(2.6 * ncols + 0.6, 2.5 * nrows + 0.6),
                                 sharex=True, sharey=True, squeeze=False)
        per = frame.groupby(["item", "t"])["cp"].agg(["mean", "min", "max"]).reset_index()
        lo_w, hi_w = wilson_band(level, n_reps)
        ymin = min(0.85, float(per["min"].min()) - 0.02)  # zoom in where the CPs are; widen if they fall
        for item in range(nrows * ncols):
            ax = axes[item // ncols][item % ncols]
            if item >= n_items:
                ax.set_visible(False)
                continue
            sub = per[per["item"] == item]
            ax.axhspan(lo_w, hi_w, color="#9ecae1", alpha=0.45, lw=0, zorder=0)
            ax.axhline(level, color="k", ls="--", lw=1, zorder=1)
            ax.scatter(sub["t"], sub["min"], s=9, color="0.6", zorder=2)
            ax.scatter(sub["t"], sub["max"], s=9, color="0.6", zorder=2)
            ax.scatter(sub["t"], sub["mean"], s=12, color="k", zorder=3)
            ax.set_title(f"Item {item + 1}")
            ax.set_ylim(ymin, 1.01)
            if item % ncols == 0:
                ax.set_ylabel("coverage probability")
            if item // ncols == nrows - 1:
                ax.set_xlabel("t")
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
        handles = [Line2D([], [], marker="o", ls="", color="k", ms=4, label="mean CP across dims"),
                   Line2D([], [], marker="o", ls="", color="0.6", ms=4, label="min / max across dims"),
                   Line2D([], [], ls="--", color="k", label=f"nominal {level:g}"),
                   Patch(color="#9ecae1", alpha=0.6, label=f"Wilson 95% band, n={n_reps}")]
        total = len({k for k in stored if k[:3] == (setting, method, M)})
        with_ci = "" if n_reps == total else f" ({total - n_reps} of {total} never have one)"
        first = int(frame["t"].min())
        fig.suptitle(f"Coverage of the {level:.0%} debiased CIs ({SE_TEXT['model']}): "
                     f"{_setting_label(out, study, setting)}, {method}, M={M}, {total} replications", fontsize=10)
        _caption(fig, f"Each panel is one item. At each time t of the grid: the fraction of replications whose CI "
                      f"of θ*_ik covers the truth, averaged over the item's d dimensions (black; grey: the lowest "
                      f"and highest dimension). A CI exists once Ψ_t is invertible; a time is shown once at least "
                      f"90% of the {n_reps} replications with CIs{with_ci} have one (from t = {first} here). The band: "
                      f"where 95% of the empirical CPs of {n_reps} replications fall if the true coverage is "
                      f"{level:g} (Wilson).", width=150)
        fig.legend(handles=handles, loc="upper center", ncol=4, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 0.0))
        stem = f"coverage_{setting}" + ("" if method == "RB" else f"_{method}")
        paths += _save(fig, directory, stem)
        plt.close(fig)
    return paths


# --------------------------------------------------------------------------------------------
# The LLM-ranking replays
# --------------------------------------------------------------------------------------------

# What the figures say about each replay's data (what is real, what is generated).
REPLAY_TEXT = {
    "llm": {
        "label": "LLM ranking replay, GENERATED judgments",
        "caption": ("Five LLMs on 100 MMLU anatomy questions. Prompts (the first 100 anatomy questions of MMLU) and "
                    "their all-MiniLM-L6-v2 embeddings (x = (1, 9 principal components)) are real. The judgments "
                    "are GENERATED from a contextual BTL whose overall strengths are fitted to real Chatbot Arena "
                    "votes; they stand in for the paper's GPT-4 judgments. theta* = BT MLE on the whole generated "
                    "pool. The error drops at T0: with one judgment per step, single comparisons are separable and "
                    "the stage-1 constrained MLE sits on the boundary of its gamma-ball, where the stage-2 ridge MLE "
                    "does not."),
    },
    "arena": {
        "label": "Chatbot Arena replay",
        "caption": ("129 models, non-contextual (d = 1, x = 1). Each outcome is drawn from the chosen pair's real "
                    "Chatbot Arena votes (1.67M human votes; a tie of either kind is half a win each); the graph "
                    "is the 3,460 pairs with votes; theta* = BT MLE on all votes."),
    },
    "byo": {
        "label": "Bring-your-own judgments replay",
        "caption": ("Outcomes are drawn from the judgments in the user's file (ties as half a win each); "
                    "theta* = BT MLE on all of them."),
    },
}

DIAGRAMS_FILE = "_diagrams.npz"
# Every interval states its standard errors (the coverage studies' are always the model-based ones).
SE_TEXT = {"model": "model-based SE: the paper's Phi_11(t)", "sandwich": "sandwich SE: robust to ties"}
MAX_DIAGRAM_MODELS = 12  # more models than this make an unreadable diagram (the arena has 129)


def diagrams_path(out, study) -> Path:
    """Where the ranking-diagram snapshots of a replay study are stored
    (:func:`study.runner.panels.store_diagram_panels` writes them)."""
    return storage.dataset_dirs(out, study)["trajectory"] / DIAGRAMS_FILE


def load_diagram_panels(out, study):
    """The stored snapshots as (point_panels, ci_panels, info) or None."""
    path = diagrams_path(out, study)
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        times = [int(t) for t in z["times"]]
        point = {t: z["point"][k] for k, t in enumerate(times)}
        ci = {t: ((z["theta_d"][k], z["phi11"][k]) if z["has_ci"][k] else None) for k, t in enumerate(times)}
        info = {"contexts": z["contexts"], "labels": [safe_label(x) for x in z["labels"]], "method": str(z["method"]),
                "seed": int(z["seed"]), "T": int(z["T"]), "T0": int(z["T0"]), "M": int(z["M"]),
                "se_method": str(z["se_method"]) if "se_method" in z.files else "model"}
    return point, ci, info


def replay_figures(out, study, directory=None) -> list:
    """``<study>_regret`` from the Parquet and, when snapshots are stored, ``<study>_diagrams`` and
    ``<study>_diagrams_ci``; captions say which data are real and which are generated."""
    from ..llm.diagrams import plot_ranking_diagrams
    plt = _plt()
    out = Path(out)
    directory = Path(directory or out / "figures")
    text = dict(REPLAY_TEXT[study])
    replay = ((storage.read_manifest(out, study) or {}).get("fingerprint") or {}).get("replay") or {}
    if study == "byo" and replay:
        text["caption"] += (f" The file: {replay.get('n_models')} models, {replay.get('n_questions')} questions, "
                            f"{replay.get('n_judgments')} judgments (SHA-256 {str(replay.get('judgments_sha256'))[:12]}...).")
    paths = regret_figures(out, study, directory, label=text["label"], stem=f"{study}_regret",
                           caption=text["caption"], legend_loc="lower left")
    stored = load_diagram_panels(out, study)
    if stored is None:
        return paths
    point, ci, info = stored
    times = sorted(point)
    n_q = len(info["contexts"])
    stage = (f"all before T0 = {info['T0']}: exploration stage, constrained MLE"
             if max(times) <= info["T0"] else f"T0 = {info['T0']}")
    where = f"{info['method']} replication (seed {info['seed']}, {stage})"
    common = (f"An arrow i -> j: {{rule}} for more than 95% of the {n_q} question contexts x. Transitive "
              f"reduction; best at the top. The height encodes only the arrows (a model sits one level below the "
              f"lowest model that beats it); within a level, and in the grey band of models no arrow touches, the "
              f"order is alphabetical and means nothing. One {where}. ")
    for uncertainty, suffix, rule, title in (
            (False, "diagrams", "model i's score x'theta_i(t) exceeds model j's",
             "Ranking diagrams from the estimate theta(t)"),
            (True, "diagrams_ci", "the 95% CI of x'(theta_i - theta_j), from the debiased estimate and the full "
                                  f"covariance ({SE_TEXT[info['se_method']]}), lies above 0",
             "Uncertainty-aware ranking diagrams (95% CIs)")):
        panels = ci if uncertainty else point
        fig, _ = plot_ranking_diagrams(panels, info["contexts"], info["labels"], uncertainty=uncertainty,
                                       title=f"{text['label']}: {title}, t = {', '.join(map(str, times))}")
        _caption(fig, common.format(rule=rule) + text["caption"], width=170)
        paths += _save(fig, directory, f"{study}_{suffix}")
        plt.close(fig)
    return paths


def uniform_coverage_figures(out, study="coverage", directory=None, level=0.95) -> list:
    """``uniform_<S>``: the fixed-time CIs' and the confidence sequences' bands over t and their
    time-uniform coverage (:func:`study.results.uniform.uniform_figures`)."""
    return uniform.uniform_figures(out, study, _plt(), _save, _caption, _setting_label, directory, level)


FIGURES = {"regret": lambda out, study: regret_figures(out, study),
           "coverage": lambda out, study: coverage_figures(out, study) + uniform_coverage_figures(out, study),
           "msweep": lambda out, study: msweep_figures(out, study),
           "replay": lambda out, study: replay_figures(out, study),
           "baselines": lambda out, study: baselines_figures(out, study)}


def draw_study(out, study) -> list:
    """The figures of one stored study (by the figure family its manifest names); the paths written."""
    for name, kind in stored_studies(out):
        dirs = storage.dataset_dirs(out, name)
        if name == study and kind in FIGURES and (storage.parts(dirs["trajectory"]) or storage.parts(dirs["intervals"])):
            return FIGURES[kind](out, name)
    return []


def draw_all(out) -> list:
    """Every figure of every study stored under ``out`` (by the figure family its manifest names);
    returns the paths written."""
    paths = []
    for study, kind in stored_studies(out):
        dirs = storage.dataset_dirs(out, study)
        if kind in FIGURES and (storage.parts(dirs["trajectory"]) or storage.parts(dirs["intervals"])):
            paths += FIGURES[kind](out, study)
    return paths
