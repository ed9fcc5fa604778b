"""Hand-set stand-ins for the policy tests: a debiased result with an explicit Phi_11, a generator
with set Gumbel draws, a 4-item graph and a Step builder (d = 1, x = 1, so item i's utility is
theta_i itself)."""
from __future__ import annotations

import numpy as np

from study.policies import Step
from study.simulation.graph import ComparisonGraph

X1 = np.array([1.0])  # d = 1, x = 1: the utility of item i is theta_i itself
# n = 4: edges 0-1, 0-2, 1-2, 2-3; neighbours 0: {1, 2}, 1: {0, 2}, 2: {0, 1, 3}, 3: {2}
GRAPH = ComparisonGraph.from_edges([(0, 1), (0, 2), (1, 2), (2, 3)], 4)


class StubDebias:
    """A debiased result set by hand: theta_d (n, d) and an explicit Phi_11 (nd, nd)."""

    def __init__(self, theta_d, phi, available=True, draws=()):
        self.theta_d = np.asarray(theta_d, dtype=float).reshape(len(theta_d), -1)
        self.phi = np.asarray(phi, dtype=float)
        self.available = available
        self.draws = list(draws)  # what sample() returns, in order
        self.z = []

    def _vector(self, x, i, j=None):
        n, d = self.theta_d.shape
        a = np.zeros((n, d))
        a[i] = x
        if j is not None:
            a[j] -= x
        return a.ravel()

    def spread(self, x):
        return np.array([self._vector(x, i) @ self.phi @ self._vector(x, i) for i in range(len(self.theta_d))])

    def pair_spread(self, x, pairs):
        pairs = np.asarray(pairs).reshape(-1, 2)
        return np.array([self._vector(x, i, j) @ self.phi @ self._vector(x, i, j) for i, j in pairs])

    def sample(self, z):
        self.z.append(np.array(z))
        return np.asarray(self.draws.pop(0), dtype=float).reshape(self.theta_d.shape)


class FixedGumbel:
    """A generator whose Gumbel draws are set by hand (and, for CoLSTIM's coin, its uniforms)."""

    def __init__(self, values, uniforms=()):
        self.values = np.asarray(values, dtype=float)
        self.uniforms = list(uniforms)

    def gumbel(self, size):
        assert size == len(self.values)
        return self.values.copy()

    def random(self):
        return self.uniforms.pop(0)


def step(debias, theta=(0.0, 0.0, 0.0, 0.0), t=50, uniforms=(0.99, 0.6, 0.7, 0.7), rng=None, graph=GRAPH):
    return Step(t, X1, uniforms, graph, np.asarray(theta, dtype=float).reshape(-1, 1), lambda: debias,
                rng=rng if rng is not None else np.random.default_rng(0))


UNAVAILABLE = StubDebias(np.full(4, np.nan), np.full((4, 4), np.nan), available=False)
