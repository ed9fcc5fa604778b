"""Which studies a results directory holds, read from their manifests alone.

A manifest names its study's figure family (``"figures"``) and its title (``"title"``), written by
the runner from its catalogue, so that reading results never needs the runner.  Manifests written
before those fields existed are recognised by the study's name (:data:`_BEFORE_FIELDS`).
"""
from __future__ import annotations

from pathlib import Path

from .errors import StorageError
from .files import COMMITS, read_manifest

FAMILY_ORDER = ("regret", "coverage", "msweep", "replay", "baselines")
STUDY_ORDER = ("regret", "coverage", "msweep", "llm", "arena", "byo", "baselines_random", "baselines_greedy",
               "baselines", "llm_baselines_random", "llm_baselines_greedy", "llm_baselines")
# manifests written before they recorded "figures" and "title": (family, title) by study name
_BEFORE_FIELDS = {
    "regret": ("regret", "Regret study (paper Figure 1)"),
    "coverage": ("coverage", "Coverage study (paper Figures 2–3)"),
    "msweep": ("msweep", "M-sweep (paper appendix)"),
    "llm": ("replay", "LLM ranking replay (real MMLU anatomy prompts and embeddings, GENERATED judgments)"),
    "arena": ("replay", "Chatbot Arena replay (129 models, real votes)"),
    "byo": ("replay", "Bring-your-own judgments replay"),
    "baselines": ("baselines", "Beyond the paper: nine methods, Settings A and B (docs/baselines.md)"),
    "llm_baselines": ("baselines", "Beyond the paper: nine methods on the LLM replay (GENERATED judgments)"),
}


def study_info(out, study) -> tuple:
    """(figure family, title) of a stored study; (None, study) when its manifest says neither and
    its name is not known."""
    try:
        manifest = read_manifest(out, study) or {}
    except StorageError:
        manifest = {}
    family, title = _BEFORE_FIELDS.get(study, (None, study))
    return manifest.get("figures", family), manifest.get("title", title)


def study_commits(out, study) -> tuple:
    """(the git commits, the package versions) the stored runs of ``study`` were made at, oldest
    first, from its manifest (runs recorded before runs named their commit count under the
    manifest's); empty tuples when the manifest says neither."""
    try:
        manifest = read_manifest(out, study) or {}
    except StorageError:
        return (), ()
    commits = [run.get("git_commit") for run in manifest.get("runs", []) if run.get("computed") or run.get("reused")]
    if not any(commits):
        commits = [manifest.get("git_commit")]
    versions = [manifest.get("package_version")]
    return (tuple(dict.fromkeys(c for c in commits if c)), tuple(dict.fromkeys(v for v in versions if v)))


def stored_studies(out) -> list:
    """[(study, figure family)] of every study directory under ``out`` (one with a manifest or
    commit records), the paper's studies first, then the replays, then the baselines."""
    out = Path(out)
    if not out.is_dir():
        return []
    names = [p.name for p in out.iterdir()
             if p.is_dir() and ((p / "_manifest.json").exists() or (p / COMMITS).is_dir())]
    found = [(name, study_info(out, name)[0]) for name in names]

    def order(item):
        name, family = item
        rank = FAMILY_ORDER.index(family) if family in FAMILY_ORDER else len(FAMILY_ORDER)
        known = STUDY_ORDER.index(name) if name in STUDY_ORDER else len(STUDY_ORDER)
        return rank, known, name

    return sorted(found, key=order)
