"""A user policy, outside the package: Boltzmann (softmax) exploration with a uniform opponent.

Each step the major item is drawn with probability proportional to exp(X_t'theta_i(t-1) / tau)
over the items that have a neighbour, and its opponent is a uniformly random neighbour.  The
shared estimator (the paper's two-stage MLE) is refitted by the study after every step, exactly
as for the built-in methods, so only the choice of the pair differs.

First check it against the policy contract (only edges, deterministic under a seed, no writes into
what it reads, valid before Phi exists and on a disconnected graph, picklable for Ray, fast enough):
every failed check is named (``python examples/my_policy.py`` does this)::

    import study
    from examples.my_policy import Boltzmann
    print(study.check_policy(Boltzmann))          # raises study.PolicyCheckError naming each failure

Then run it beside the paper's methods, from the repository root; ``PYTHONPATH=.`` makes
``examples`` importable in the driver and in the local Ray workers (a script's path does not
include the working directory).  Settings A and B x 2 methods x 20 replications = 80, about 40 s on
2 cores (without ``--reps`` the paper's 200: 800 replications, about 5 minutes); then each method's
paired difference from RB:

    PYTHONPATH=. python jobs/regret.py --methods RB examples.my_policy:Boltzmann --reps 20 --out outputs/mine
    python -m study.results compare outputs/mine

In Python (from the repository root):

    study.run_replication("A", "examples.my_policy:Boltzmann", seed=0)
    study.register_policy("boltzmann", Boltzmann)      # a short name, this process only
    study.run_replication("A", "boltzmann", seed=0)

On a cluster, the module must import on every Ray worker, not only on the driver: ship it with
``--py-modules examples`` (with ``--address``), submit the job with its working directory
(``ray job submit --working-dir . -- python jobs/regret.py --methods RB
examples.my_policy:Boltzmann --out /abs/path``), or ``pip install`` your package on every node
(docs/cluster.md, tested with token authentication on).
"""
from __future__ import annotations

import numpy as np

from study import Choice
from study.policies import uniform_neighbour


class Boltzmann:
    """Softmax over X_t'theta_i(t-1) with temperature ``temperature``; uniform opponent.

    The factory is the class: ``Boltzmann(setting)`` is called once per replication.  The draw
    uses ``step.rng``, the policy's private generator (seeded from the replication and the method
    name), so a run is reproducible and the other methods' shared uniforms are untouched.
    """

    def __init__(self, setting, temperature: float = 0.5):
        self.temperature = float(temperature)

    def select(self, step) -> Choice:
        scores = step.theta @ step.x / self.temperature
        scores = np.where(step.graph.playable, scores, -np.inf)  # an isolated item cannot be compared
        weights = np.exp(scores - scores.max())
        major = int(step.rng.choice(len(weights), p=weights / weights.sum()))
        explored = major != int(np.argmax(scores))
        return Choice(major, uniform_neighbour(step, major), explored)


if __name__ == "__main__":
    import study

    print(study.check_policy(Boltzmann))
