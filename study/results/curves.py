"""Curves of many methods that stay readable: styles, method families, small multiples, notes.

A figure with more than :data:`MAX_PER_PANEL` methods becomes small multiples: one row per method
family (the paper's five, the dueling-bandit baselines, the user's own policies; a family larger
than a panel holds is split), one column per metric.  In a family's row, its methods are drawn in
colour with markers, every other method as a thin grey line for context, and RB (the paper's
proposal) as a thin red reference.  The legend of each row sits outside its panels, to the right.

Where two methods' mean curves are identical over a stretch (ERA is RB up to T0 by construction:
the same exploration coins, the same estimate), one curve hides the other; :func:`hidden_curves`
finds those stretches from the data, the hidden method's legend entry says so, and the caption
gives the reason where the construction is known.
"""
from __future__ import annotations

import numpy as np

from ..policies import BASELINES, METHODS

MAX_PER_PANEL = 6
PROPOSED = "RB"
PAPER_STYLE = {  # the paper's five keep these in every figure
    "RB": {"color": "#d62728", "lw": 2.2, "zorder": 6, "label": "RB (proposed)", "marker": "o"},
    "ERA": {"color": "#1f77b4", "lw": 1.6, "zorder": 5, "label": "ERA", "marker": "s"},
    "ETA": {"color": "#2ca02c", "lw": 1.6, "zorder": 4, "label": "ETA", "marker": "^"},
    "BT-UCB1": {"color": "#ff7f0e", "lw": 1.6, "zorder": 4, "label": "BT-UCB1", "marker": "D"},
    "BT-UCB2": {"color": "#9467bd", "lw": 1.6, "zorder": 4, "label": "BT-UCB2", "marker": "v"},
}
LABELS = {"TS": "TS (two-draw Thompson)", "RB-UA": "RB-UA (uncertainty-aware opponent)",
          "CoLSTIM-rev": "CoLSTIM-rev (coin reversed)"}
# colours for every other method, distinct from the paper's five and from the grey of context lines;
# one per method across a figure's rows (a figure with more methods than colours repeats them,
# with other markers)
PALETTE = ("#8c564b", "#e377c2", "#17becf", "#bcbd22", "#393b79", "#ad494a", "#637939", "#7b4173",
           "#3182bd", "#e6550d", "#31a354", "#843c39")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">", "p")
# why two methods coincide, where the construction says so (otherwise the caption says only that they do)
KNOWN_COINCIDENCES = {frozenset(("RB", "ERA")): "ERA is RB that keeps exploring after T0: same coins, same estimate"}


def family(method: str) -> str:
    """The family a method is shown with: the paper's, the literature's baselines, or the user's."""
    if method in METHODS:
        return "the paper's methods"
    if method in BASELINES:
        return "dueling-bandit baselines"
    return "your policies"


def method_order(methods) -> list:
    """The paper's five, then the baselines (in the registry's order), then the others as given."""
    present = list(dict.fromkeys(methods))
    known = list(METHODS) + [m for m in BASELINES if m not in METHODS]
    return [m for m in known if m in present] + [m for m in present if m not in known]


def groups(methods, size: int = MAX_PER_PANEL) -> list:
    """[(title, [methods])]: one group when all fit in a panel, else one per family (a family larger
    than ``size`` split into even parts of at most ``size``, titled "... (1 of 2)")."""
    ordered = method_order(methods)
    if len(ordered) <= size:
        return [("", ordered)]
    by_family: dict = {}
    for method in ordered:
        by_family.setdefault(family(method), []).append(method)
    result = []
    for name, members in by_family.items():
        count = -(-len(members) // size)  # parts of at most `size`, as even as possible (9 -> 5 + 4)
        sizes = [len(members) // count + (k < len(members) % count) for k in range(count)]
        starts = [sum(sizes[:k]) for k in range(count)]
        parts = [members[start:start + n] for start, n in zip(starts, sizes)]
        for k, part in enumerate(parts):
            result.append((name + (f" ({k + 1} of {len(parts)})" if len(parts) > 1 else ""), part))
    return result


def styles(members, everyone=None) -> dict:
    """{method: matplotlib style} for the methods drawn in colour in one panel; a method's colour
    and marker follow its place among the other methods of ``everyone`` (the whole figure's
    methods; default ``members``), so that no two methods of a figure share them while there are
    enough."""
    others = [m for m in method_order(everyone if everyone is not None else members) if m not in PAPER_STYLE]
    out = {}
    for method in members:
        if method in PAPER_STYLE:
            out[method] = dict(PAPER_STYLE[method])
        else:
            k = others.index(method) if method in others else len(others)
            out[method] = {"color": PALETTE[k % len(PALETTE)], "lw": 1.6, "zorder": 4,
                           "label": LABELS.get(method, method),
                           "marker": MARKERS[(k + k // len(PALETTE) + 1) % len(MARKERS)]}
    return out


def _series(frame, method, metric):
    sub = frame[frame["method"] == method].sort_values("t")
    return (sub["t"].to_numpy(), sub[f"{metric}_mean"].to_numpy(), sub[f"{metric}_se"].to_numpy())


def draw_panel(ax, frame, metric, members, *, context=(), T0=None, ylabel="", hidden=None, T=None, everyone=None):
    """One panel: ``members`` in colour with +/- 2 SE bands, ``context`` methods as thin grey lines
    (RB as a thin red reference), log scale, T0 marked; ``hidden`` (from :func:`hidden_curves`)
    notes the hidden curves in their legend labels."""
    hidden = hidden or {}
    for method in context:
        t, mean, _ = _series(frame, method, metric)
        positive = mean > 0
        ref = method == PROPOSED
        ax.plot(t[positive], mean[positive], color="#d62728" if ref else "0.75", lw=1.0 if ref else 0.7,
                ls="--" if ref else "-", zorder=2 if ref else 1, label="RB (reference)" if ref else None)
    for method, style in styles(members, everyone).items():
        t, mean, se = _series(frame, method, metric)
        if not len(t):
            continue
        style = dict(style)
        if method in hidden:
            style["label"] = hidden_label(style["label"], hidden[method], T if T is not None else t[-1])
        positive = mean > 0
        every = max(1, len(t) // 8)
        ax.plot(t[positive], mean[positive], markevery=every, ms=4, **style)
        floor = np.nanmin(mean[positive]) / 10 if positive.any() else 1e-12
        ax.fill_between(t, np.clip(mean - 2 * se, floor, None), mean + 2 * se, color=style["color"], alpha=0.15,
                        lw=0, zorder=style["zorder"] - 1)
    log_axis(ax)
    ax.set_xlabel("t")
    ax.set_ylabel(ylabel)
    if T0:
        ax.axvline(T0, color="0.4", ls=":", lw=1)
        ax.annotate(f"$T_0$={T0}", xy=(T0, 1), xycoords=("data", "axes fraction"), xytext=(3, -12),
                    textcoords="offset points", fontsize=8, color="0.3")


def _plain_log_formatter():
    """Tick labels of a log axis as plain numbers (0.2, 0.5, 1, 2): every decade, and 2, 3, 5 (or
    fewer as the axis spans more decades) between them."""
    from matplotlib.ticker import Formatter

    class PlainLog(Formatter):
        def __call__(self, value, pos=None):
            if not value > 0:
                return ""
            lo, hi = (abs(v) for v in self.axis.get_view_interval())
            decades = np.log10(max(hi, lo, 1e-300) / max(min(hi, lo), 1e-300))
            keep = ((1,) if decades > 2.5 else (1, 2, 5) if decades > 1.2 else (1, 2, 3, 5) if decades > 0.7
                    else tuple(range(1, 10)))
            mantissa = round(value / 10 ** np.floor(np.log10(value) + 1e-9), 6)
            return f"{value:g}" if mantissa in keep else ""

    return PlainLog()


def log_axis(ax, axis: str = "y"):
    """A log scale labelled in plain numbers (0.2, 0.3, 1) rather than 2x10^-1."""
    getattr(ax, f"set_{axis}scale")("log")
    which = ax.yaxis if axis == "y" else ax.xaxis
    which.set_major_formatter(_plain_log_formatter())
    which.set_minor_formatter(_plain_log_formatter())


def hidden_curves(frame, members, metrics=("reg", "err"), min_fraction: float = 0.1) -> dict:
    """{hidden method: (method on top, t_end)}: within ``members`` (the methods drawn in colour in
    one panel), methods whose mean curves of every metric in ``metrics`` equal another's for
    t <= t_end (at least ``min_fraction`` of the horizon), so that the one drawn first or lower
    lies under the other there.  Exact equality: it happens by construction (common random
    numbers and identical choices), never by chance."""
    order = method_order(members)
    z = {m: st["zorder"] for m, st in styles(order).items()}
    curves = {}
    for method in order:
        sub = frame[frame["method"] == method].sort_values("t")
        if len(sub):
            curves[method] = (sub["t"].to_numpy(), np.stack([sub[f"{m}_mean"].to_numpy() for m in metrics]),
                              sub["n"].to_numpy())
    found: dict = {}
    present = [m for m in order if m in curves]
    for i, a in enumerate(present):
        for b in present[i + 1:]:
            (ta, va, na), (tb, vb, nb) = curves[a], curves[b]
            if not (np.array_equal(ta, tb) and np.array_equal(na, nb)):
                continue
            same = np.all(va == vb, axis=0)
            end = len(same) if same.all() else int(np.argmin(same))
            if end < max(1, min_fraction * len(ta)):
                continue
            # drawn in order; a higher zorder is on top, and on a tie the later one is
            under, over = (b, a) if z[a] > z[b] else (a, b)
            if end > found.get(under, (None, -1))[1]:
                found[under] = (over, int(ta[end - 1]))
    return found


def hidden_label(label: str, cover, T) -> str:
    """A legend label that says where the curve is hidden: "ERA (under RB for t <= 200)"."""
    over, end = cover
    return f"{label} (= {over} at every t)" if end >= T else f"{label} (under {over} for t $\\leq$ {end})"


def hidden_note(found: dict) -> str:
    """The caption's sentence on why curves coincide, where the construction says so."""
    reasons = [KNOWN_COINCIDENCES[frozenset((m, over))] for m, (over, _) in found.items()
               if frozenset((m, over)) in KNOWN_COINCIDENCES]
    generic = ("A legend entry '(under X for t ≤ ...)' marks a curve identical to X's there, hidden by "
               "construction (the same choices on the same environments)") if found else ""
    return "; ".join([generic] + reasons) + "." if found else ""


STAGE_NOTE = ("Dotted line: T0, where every method's estimator switches from the stage-1 constrained MLE (opt1) to "
              "the stage-2 ridge MLE (opt), so the error can jump there.")


def legend_outside(ax, fontsize=8):
    """The legend of ``ax`` to the right of its panel, outside the curves."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize=fontsize,
                  frameon=False, borderaxespad=0.0)
