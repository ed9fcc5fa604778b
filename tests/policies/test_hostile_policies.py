"""Issue 35: the audit hooks on user policies (``study.policies.hooks``) and the check suite under
them.  Four hostile policies that passed all 13 checks before (one reaching zero regret by reading
theta* off the call stack, one writing files) and a policy that returns a non-edge once Phi exists
(Phi reached at 21 of 660 steps, never where a non-edge was available) now fail; a policy that
declares what it needs, and one that uses the standard library innocently, pass."""
from __future__ import annotations

import collections
import enum
import gc
import inspect
import logging
import socket
import subprocess
import sys

import numpy as np
import pytest

import study
from study.policies import argmax_playable, confine, uniform_neighbour
from study.policies.hooks import PolicyRefused, Watch, needs_of, watching
from test_check_policy import Greedy  # the same well-behaved policy the check suite's tests break


class ReadsThetaOffTheStack(Greedy):
    """Walks the caller frames to the loop's environment and compares the true best item: zero
    regret (measured on 2565cad: R(T) 0.0 against 0.204 for Greedy, Setting A, T = 200, seed 3)."""

    def select(self, step):
        frame = sys._getframe(1)
        while frame is not None:
            env = frame.f_locals.get("env")
            if env is not None and hasattr(env, "theta_star"):
                major = argmax_playable(step, env.theta_star @ step.x)
                return study.Choice(major, uniform_neighbour(step, major), False)
            frame = frame.f_back
        return super().select(step)


class InspectsTheStack(Greedy):
    def select(self, step):
        for info in inspect.stack()[1:]:
            if "env" in info.frame.f_locals:
                break
        return super().select(step)


class FindsTheEnvironmentInTheHeap(Greedy):
    def select(self, step):
        for obj in gc.get_objects():
            if type(obj).__name__ == "BTLEnvironment":
                break
        return super().select(step)


class WritesFiles(Greedy):
    """Writes into the working directory (a policy found --out through /proc and wrote there)."""

    def select(self, step):
        with open(f"planted-{step.t}.parquet", "wb") as handle:
            handle.write(b"forged")
        return super().select(step)


class StartsAProcess(Greedy):
    def select(self, step):
        subprocess.run(["true"], check=False)
        return super().select(step)


class OpensASocket(Greedy):
    def select(self, step):
        socket.socket().close()
        return super().select(step)


class CatchesTheRefusal(WritesFiles):
    """Swallows the refusal and carries on: the call is still reported."""

    def select(self, step):
        try:
            return super().select(step)
        except PermissionError:
            return Greedy.select(self, step)


class NonEdgeOncePhiExists(Greedy):
    """Argmax item against its first neighbour until Phi exists, then a non-edge where the graph has
    one (the issue: 13 of 13 passed, Phi reached at 21 of 660 steps, all on the complete graph)."""

    def select(self, step):
        if step.debiased().available:
            adjacency = step.graph.adjacency
            pairs = [(a, b) for a in range(len(adjacency)) for b in range(len(adjacency))
                     if a != b and not adjacency[a, b]]
            if pairs:
                return study.Choice(*pairs[0], False)
        major = argmax_playable(step, step.theta @ step.x)
        return study.Choice(major, int(step.graph.neighbours[major][0]), False)


class DeclaresFiles(Greedy):
    """Writes a scratch file and says so."""

    policy_needs = ("files",)

    def __init__(self, setting):
        self.path = None

    def select(self, step):
        with open("scratch.txt", "w") as handle:
            handle.write(str(step.t))
        return super().select(step)


Pair = collections.namedtuple("Pair", "major other")


class UsesTheStandardLibrary(Greedy):
    """namedtuple, enum, logging and a traceback-free exception: the standard library walks frames
    for them, which is not the policy's doing."""

    def __init__(self, setting):
        self.Mode = enum.Enum("Mode", "greedy explore")
        self.log = logging.getLogger("user.policy")

    def select(self, step):
        self.log.debug("step %d", step.t)
        local = collections.namedtuple("Local", "a b")(1, 2)
        try:
            raise KeyError(local.a)
        except KeyError:
            pass
        major = argmax_playable(step, step.theta @ step.x)
        return study.Choice(*Pair(major, uniform_neighbour(step, major)), False)


@pytest.mark.parametrize("factory, detail", [
    (ReadsThetaOffTheStack, "walking the interpreter's stack (sys._getframe"),
    (InspectsTheStack, "walking the interpreter's stack (sys._getframe"),
    (FindsTheEnvironmentInTheHeap, "garbage collector's objects (gc.get_objects"),
    (WritesFiles, "writing files (open 'planted-1.parquet'"),
    (StartsAProcess, "starting or signalling processes (subprocess.Popen"),
    (OpensASocket, "opening sockets (socket.__new__"),
    (CatchesTheRefusal, "writing files (open 'planted-1.parquet'"),
])
def test_a_hostile_policy_fails_check_policy_naming_the_call(factory, detail, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = study.check_policy(factory, raise_on_failure=False)
    assert "no_forbidden_calls" in report.failed, str(report)
    assert detail in report["no_forbidden_calls"].detail and factory.__qualname__ in report["no_forbidden_calls"].detail
    assert not list(tmp_path.glob("planted-*")), "a refused write left a file"


def test_the_stack_reader_is_refused_in_a_replication():
    with watching(Watch("stack-reader")):
        with pytest.raises(PolicyRefused, match="policy 'stack-reader' is not allowed walking"):
            study.run_replication("A", "stack", 3, T=60, T0=24, policy=ReadsThetaOffTheStack)


def test_a_policy_returning_a_non_edge_once_phi_exists_fails_only_edges():
    report = study.check_policy(NonEdgeOncePhiExists, raise_on_failure=False)
    assert report.failed == ["only_edges", "valid_with_phi"], str(report)
    assert "not an edge of the graph" in report["only_edges"].detail


def test_phi_exists_for_most_steps_of_the_sparse_scenario():
    from study.policies.checks import SPARSE, SPARSE_BURN_IN
    from study.policies.guard import Record, build
    from study.simulation.settings import WARMUPS

    assert len(SPARSE.edges) / (SPARSE.n_items * (SPARSE.n_items - 1) / 2) < 0.3  # a sparse graph
    class AsksForPhi(Greedy):  # the non-edge policy's choices before Phi, asking at every step
        def select(self, step):
            step.debiased()
            major = argmax_playable(step, step.theta @ step.x)
            return study.Choice(major, int(step.graph.neighbours[major][0]), False)

    for warmup in WARMUPS:
        record = Record()
        study.run_replication(SPARSE, "first-neighbour", 3, warmup=warmup,
                              policy=lambda s: build(AsksForPhi, s, record, burn_in=SPARSE_BURN_IN))
        assert record.asked == SPARSE.T and record.available >= 0.6 * record.asked, (warmup, record.available)
        assert not record.violations


class WritesNativelyWithHooksOff(Greedy):
    """Switches the audit hooks off, then writes with numpy's C code: only the kernel stops it."""

    def __init__(self, setting, target="."):
        self.target = target

    def select(self, step):
        sys.modules["study.policies.hooks"]._local.busy = True
        np.zeros(3).tofile(self.target)
        return super().select(step)


@pytest.mark.skipif(not confine.status()["available"], reason="no kernel confinement here")
def test_check_policy_runs_confined_by_the_kernel(tmp_path):
    import functools

    target = tmp_path / "planted.npy"
    report = study.check_policy(functools.partial(WritesNativelyWithHooksOff, target=str(target)),
                                raise_on_failure=False)
    assert report["runs"].status == "failed" and "PermissionError" in report["runs"].detail, str(report)
    assert not target.exists() and "confined by the kernel" in report.confinement
    assert "confinement: a process confined by the kernel (Landlock ABI" in str(report)


def test_declared_needs_and_the_standard_library_pass(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    report = study.check_policy(DeclaresFiles)
    assert report.passed
    if confine.status()["available"]:  # its checks ran confined, in a scratch directory of their own
        assert "['files'] lift the matching rules" in report.confinement and "Landlock ABI" in report.confinement
        assert not (tmp_path / "scratch.txt").exists()
    assert study.check_policy(UsesTheStandardLibrary).passed
    assert needs_of(DeclaresFiles) == {"files"} and needs_of(Greedy) == frozenset()

    class Unknown(Greedy):
        policy_needs = ("network",)

    with pytest.raises(ValueError, match="policy_needs names"):
        needs_of(Unknown)


def test_the_hook_is_inert_outside_a_watch_and_study_code_is_not_the_policy(tmp_path):
    (tmp_path / "free.txt").write_text("outside any watch")  # the hook is installed by now, and idle
    watch = Watch("w")
    with watching(watch):
        # study's own work is not the policy's: a results file written by the package is allowed
        from study.results.files import atomic_write_json
        atomic_write_json({"a": 1}, tmp_path / "by-study.json")
        with pytest.raises(PolicyRefused):
            (tmp_path / "by-me.txt").write_text("refused")  # pathlib (stdlib) on behalf of this code
        np.zeros(3)
    assert not (tmp_path / "by-me.txt").exists() and (tmp_path / "by-study.json").is_file()
    assert len(watch.refusals) == 1
