"""The catalogue of studies: what each study runs by default, and its seed namespace.

A *study* is a grid of *cells* -- (setting, method, M) with the setting's overrides -- times
``reps`` replications (:mod:`study.runner.plan`).  The paper's simulation studies (``regret``,
``coverage``, ``msweep``) share one seed namespace, so replication r of Setting A is the same
environment in all three and identical cells are computed once (:mod:`study.runner.reuse`).  The
*replay* studies (``llm``, ``arena``, ``byo``: the LLM-ranking application, :mod:`study.llm`) build
their one setting from data through their ``source``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..policies import ALL_METHODS, BASELINES, METHODS

DEFAULT_SEED = 20250101
STUDY_NAMES = ("regret", "coverage", "msweep")  # the paper's simulation studies (jobs/paper.py)
REPLAY_STUDIES = ("llm", "arena", "byo")  # the LLM-ranking application (jobs/llm_ranking.py)
# jobs/baselines.py: A and B, and the LLM replay, under each warm-up protocol (Setting.warmup)
WARMUP_STUDIES = {"random": "baselines_random", "greedy": "baselines_greedy", "own": "baselines"}
LLM_WARMUP_STUDIES = {"random": "llm_baselines_random", "greedy": "llm_baselines_greedy", "own": "llm_baselines"}
BASELINE_STUDIES = ("baselines_random", "baselines_greedy", "llm_baselines_random", "llm_baselines_greedy", "baselines",
                    "llm_baselines")
# a verdict needs both warm-ups, on A and B and on the replay alike
DEFAULT_BASELINE_STUDIES = ("baselines_random", "baselines_greedy", "llm_baselines_random", "llm_baselines_greedy")
# The simulation studies share their replications' seeds; the namespace is the regret study's, so
# that its replications (and so every earlier reference of it) stay what they were.
PAPER_SEED_NAMESPACE = "regret"
MAX_REPS = 1_000_000  # per cell: 10^6 replications of T = 500 steps are ~5e8 stored rows already


@dataclass(frozen=True)
class StudyDefaults:
    """A study's defaults.

    ``figures`` names the figure family that :func:`study.results.figures.draw_all` draws for it
    (recorded in the study's manifest). A replay study's ``source`` is a ``"module:function"``
    returning, for a setting name and the source options of :func:`study.runner.make_plan`, an
    object with ``setting`` (the base Setting), ``replicate`` (the hook), ``provenance`` (a dict
    that joins the fingerprint) and ``fixed_fields`` (Setting fields a user may not override)."""

    settings: tuple
    methods: tuple
    reps: int
    overrides: dict
    figures: str
    title: str
    m_values: dict | None = None  # msweep only: base setting name -> tuple of M
    description: str = ""
    source: str | None = None
    # a study that replays another study's environments: its seeds (and so its identical cells,
    # which are then copied instead of recomputed) are that study's
    seed_namespace: str | None = None


_REPLAY_SOURCE = "study.llm.runs:replay_source"


def _replay(setting, title, description, *, methods=METHODS, figures="replay", seed_namespace=None, warmup=None):
    """A replay study: one setting built from data by the replay source, 50 replications."""
    overrides = {"ci_every": 0} if warmup is None else {"ci_every": 0, "warmup": warmup}
    return StudyDefaults(settings=(setting,), methods=methods, reps=50, overrides=overrides, figures=figures,
                         title=title, description=description, source=_REPLAY_SOURCE, seed_namespace=seed_namespace)


def _llm_baselines(warmup, rule):
    """The baselines on the LLM replay under one warm-up protocol, 50 replications (the paper's)."""
    return _replay("llm", f"Beyond the paper: the baselines on the LLM replay, warm-up {warmup!r} (GENERATED judgments)",
                   f"The paper's methods and the baselines on the LLM-ranking replay (GENERATED judgments); warm-up "
                   f"{warmup!r}: {rule} (docs/baselines.md).", methods=ALL_METHODS, figures="baselines",
                   seed_namespace="llm", warmup=warmup)

def _baselines(warmup, title, rule):
    """A baselines study of Settings A and B under one warm-up protocol, 200 replications (the paper's)."""
    return StudyDefaults(
        title=title, settings=("A", "B"), methods=ALL_METHODS, reps=200, figures="baselines",
        overrides={"ci_every": 0, "warmup": warmup}, seed_namespace=PAPER_SEED_NAMESPACE,
        description=f"The paper's five methods against the baselines ({', '.join(BASELINES)}), Settings A and B; "
                    f"warm-up {warmup!r}: {rule} (docs/baselines.md).")


STUDIES = {
    "regret": StudyDefaults(
        title="Regret study (paper Figure 1)",
        settings=("A", "B"), methods=METHODS, reps=200, overrides={"ci_every": 0}, figures="regret",
        seed_namespace=PAPER_SEED_NAMESPACE,
        description="Regret and estimation error, Settings A and B, all five methods (paper Figure 1)."),
    "coverage": StudyDefaults(
        title="Coverage study (paper Figures 2–3)",
        settings=("A", "B"), methods=("RB",), reps=500, overrides={"ci_every": 10}, figures="coverage",
        seed_namespace=PAPER_SEED_NAMESPACE,
        description="Coverage of the 95% debiased CIs on a t grid, RB (paper Figures 2-3)."),
    "msweep": StudyDefaults(
        title="M-sweep (paper appendix)",
        settings=("A", "B"), methods=METHODS, reps=200, overrides={"ci_every": 0}, figures="msweep",
        m_values={"A": (1, 10, 20, 30), "B": (20, 50, 80)}, seed_namespace=PAPER_SEED_NAMESPACE,
        description="Regret and error as the per-step comparison budget M varies (paper appendix)."),
    "llm": _replay("llm", "LLM ranking replay (real MMLU anatomy prompts and embeddings, GENERATED judgments)",
                   "LLM ranking replay: five LLMs on 100 MMLU anatomy questions, GENERATED judgments "
                   "(paper section 'Applications to Language Model Ranking')."),
    "arena": _replay("arena", "Chatbot Arena replay (129 models, real votes)",
                     "Chatbot Arena replay: 129 models, real human votes, d = 1."),
    "byo": _replay("byo", "Bring-your-own judgments replay",
                   "Bring-your-own judgments replay (a CSV/Parquet file of pairwise judgments)."),
    "baselines_random": _baselines(
        "random", "Beyond the paper: the baselines, Settings A and B, warm-up 'random' (docs/baselines.md)",
        "every method whose rule needs Phi plays uniformly random edges until Phi exists"),
    "baselines_greedy": _baselines(
        "greedy", "Beyond the paper: the baselines, Settings A and B, warm-up 'greedy' (docs/baselines.md)",
        "every method whose rule needs Phi plays the greedy item against a uniform neighbour until Phi exists"),
    "baselines": _baselines(
        "own", "Beyond the paper: the baselines, Settings A and B, each method's own warm-up (docs/baselines.md)",
        "each method keeps its own rule until Phi exists (BT-UCB and TS greedy, the others random edges): not "
        "one protocol, so no verdict is drawn from it alone"),
    "llm_baselines_random": _llm_baselines("random", "every method whose rule needs Phi plays uniformly random edges "
                                                     "until Phi exists"),
    "llm_baselines_greedy": _llm_baselines("greedy", "every method whose rule needs Phi plays the greedy item against a "
                                                     "uniform neighbour until Phi exists"),
    "llm_baselines": _llm_baselines("own", "each method keeps its own rule until Phi exists: not one protocol, so no "
                                           "verdict is drawn from it alone"),
}


def seed_namespace(study: str) -> str:
    """The seed namespace of ``study``: ``"regret"`` for the simulation studies and the baselines
    studies of every warm-up (so replication r of setting A is the same environment in all of them,
    differences between warm-ups are paired, and identical cells are computed once), the replayed
    study's for the ``llm_baselines*`` studies (paired across warm-ups too), the study's own name
    otherwise."""
    spec = STUDIES.get(study)
    return (spec.seed_namespace if spec is not None else None) or study
