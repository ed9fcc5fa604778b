"""Environments: what a policy interacts with.  Any object with these attributes runs through
:func:`study.simulation.replication.run_environment`:

    n_items, dim, T, M : int
    edges       : (E, 2) int array, the comparison graph (connected unless the setting's
                  ``graph`` is ``"no_isolated"`` or ``"raw"``)
    theta_star  : (n, d) true attributes, centred (rows sum to zero)
    theta0      : (n, d) initial estimate theta(0)
    contexts    : (T, d); row t-1 is X_t
    compare(t, a, b) -> number of the M comparisons at step t (1-based) won by b over a
    graph_draws : int (optional), policy_seed : SeedSequence (optional)

Common random numbers: every random quantity of :class:`BTLEnvironment` is drawn up front from
its own child of the replication's ``SeedSequence`` (graph, theta(0), contexts, outcome
uniforms, policy uniforms), so replication r of every method sees the same graph, theta(0),
contexts, and the same uniforms behind each outcome and each exploration coin.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit

from .graph import check_edges, draw_graph
from .seeds import seed_sequence



class BTLEnvironment:
    """The paper's simulation environment for one (setting, replication)."""

    def __init__(self, setting, seed):
        # the sixth child (a drawn truth) leaves the first five, and so every fixed-truth
        # environment, unchanged
        graph_ss, init_ss, context_ss, outcome_ss, policy_ss, truth_ss = seed_sequence(seed).spawn(6)
        n, d = setting.n_items, setting.dim
        self.n_items, self.dim, self.T, self.M = n, d, setting.T, setting.M
        protocol = getattr(setting, "graph", "connected")
        if setting.edges is not None:
            self.edges, self.graph_draws = check_edges(setting.edges, n, protocol=protocol), 0
        else:  # every protocol reads the same draws from the same seed child, keeping the first it accepts
            self.edges, self.graph_draws = draw_graph(n, setting.edge_probability, np.random.default_rng(graph_ss),
                                                      protocol, max_draws=setting.max_graph_draws)
        truth = setting.draw_truth(np.random.default_rng(truth_ss))
        self.theta_star = truth - truth.mean(axis=0)
        init_rng = np.random.default_rng(init_ss)
        mean = (np.arange(1, n + 1, dtype=float)[:, None] if setting.init_mean == "item"
                else float(setting.init_mean))
        theta0 = mean + np.sqrt(setting.init_var) * init_rng.standard_normal((n, d))
        self.theta0 = theta0 - theta0.mean(axis=0)  # shift-invariant: argmax and loss unchanged
        context_rng = np.random.default_rng(context_ss)
        self.contexts = setting.context_mean + np.sqrt(setting.context_var) * context_rng.standard_normal((self.T, d))
        self._uniforms = np.random.default_rng(outcome_ss).random((self.T, self.M))
        self.policy_seed = policy_ss

    def win_probability(self, t: int, a: int, b: int) -> float:
        """P(b preferred over a | X_t), paper eq. ``cBT``."""
        x = self.contexts[t - 1]
        return float(expit(x @ (self.theta_star[b] - self.theta_star[a])))

    def compare(self, t: int, a: int, b: int) -> int:
        return int(np.count_nonzero(self._uniforms[t - 1] < self.win_probability(t, a, b)))
