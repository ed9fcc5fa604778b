"""The trusted side's verdict of :func:`study.check_policy` on a user policy.

The check suite of :mod:`study.policies.checks` runs in a confined process of its own, where it can
look inside the policy (the guard's copies, the global generators, the audit hook) -- but that
process runs the policy's code, which can patch the suite or write a report of its own on the
channel: its results are *self-reported*.  So the calling process runs the suite's replications
again with the loop here, the policy in a confined process per replication answering ``select``
and ``update`` through the channel of :mod:`study.policies.sandbox` (fixed formats, never
unpickled), and judges from what came back.  The verdict (:func:`combined`) takes a failure from
either side (a policy that reports its own failure only hurts itself) and a pass only where this
side passed too.

What this side judges (:data:`JUDGED`): ``runs``, ``returns_a_choice`` and ``explored_is_a_bool``
(every answer came back in the channel's format: two integers and a flag 0/1), ``only_edges`` (each
choice checked here against the graph), ``deterministic``, ``valid_before_phi``,
``valid_with_phi``, ``disconnected_graph``, ``finishes_in_time`` (timed here) and ``picklable``
(every run here rebuilt the factory from its pickled bytes).  Each run's process has its global
generators seeded differently (:data:`GLOBAL_SEEDS`), so a policy that draws from them in
``select`` or ``update`` fails ``deterministic`` here.  ``shared_state`` compares the two seeds'
runs here, each in a process of its own, with the same seeds run one after the other in one
confined process, the policy built anew for each (:func:`channel_runs_in_one_process`); the
suite's process makes the same comparison with its own runs (a failure there stands too).
Self-reported when they pass (:data:`SELF_REPORTED`): ``no_writes`` (the copies are compared
inside; here only a write that raised is seen), ``different_draws`` (the global generators are
watched inside; here every replication forks from the same state) and ``no_forbidden_calls`` (the
audit hook is inside; a call the kernel refuses is seen here, caught or not, where
``confine.status()["refusals_reported"]``: :mod:`study.policies.refusals`).
"""
from __future__ import annotations

from ..simulation.replication import run_replication
from . import confine
from .guard import Guard
from .sandbox import ConfinedFactory, PolicyProcessError, PolicyRefused

JUDGED = ("runs", "returns_a_choice", "explored_is_a_bool", "only_edges", "deterministic", "valid_before_phi",
          "valid_with_phi", "disconnected_graph", "finishes_in_time", "picklable", "shared_state")
SELF_REPORTED = ("no_writes", "different_draws", "no_forbidden_calls")
GLOBAL_SEEDS = 1_000_003  # run k of a check (k = 1, 2, ...) seeds its process's global generators k * this + seed
DETERMINISTIC = (" (here each run's process had its global generators seeded differently: a policy that draws from "
                 "np.random.* or random chooses differently)")
# what the policy's process reports when the policy's own answer was refused there (policy_server):
# text, trusted only to fail a check
_REPORTED = (("read-only", "no_writes"), ("WRITEABLE", "no_writes"),
             ("expected a Choice(major, other, explored)", "returns_a_choice"), ("; it must be a bool",
                                                                                 "explored_is_a_bool"))


class ChannelGuard(Guard):
    """The guard on this side of the channel: it validates each choice that came back (the
    channel's fixed format already made it two integers and a flag), burns in as the suite's does,
    and names the check of a failure the policy's process reported."""

    def _call(self, what, step, call):
        try:
            return super()._call(what, step, call)
        except PolicyRefused as exc:  # seen by this side's listener (study.policies.refusals)
            self.record.note("no_forbidden_calls", exc.message.partition(" (the confined process")[0])
            raise
        except PolicyProcessError as exc:
            for text, check in _REPORTED:
                if text in exc.message:
                    detail = (f"{what} at t={step.t} tried to write into a read-only array ({exc.message})"
                              if check == "no_writes" else exc.message.partition(" (in the confined process")[0])
                    self.record.note(check, detail.removeprefix("TypeError: "))
                    break
            raise


def channel_run(setting, name, seed, factory_bytes, needs, seconds, record, guarded=True, burn_in=0, global_seed=None,
                **overrides):
    """One replication with the loop in this process and the policy (``factory_bytes``:
    :func:`study.policies.fresh.dumps` of its factory; ``needs``: its declared needs) in a confined
    process answering through the channel, guarded by :class:`ChannelGuard` into ``record`` unless
    ``guarded`` is False; ``seconds``: the time limit that ends a hung policy's process;
    ``global_seed``: the seed of that process's global generators."""
    # trust=True: where the kernel cannot confine, the policy's process runs with the audit hooks
    # only, as the suite's own process does then (check_policy's report says which applied)
    confined = ConfinedFactory(name, factory_bytes, needs=needs, trust=True, seconds=seconds, global_seed=global_seed)
    policy = (lambda s: ChannelGuard(confined(s), record, None, burn_in)) if guarded else confined
    try:
        result = run_replication(setting, name, seed, policy=policy, **overrides)
        if guarded and (late := confined.late_refusal()) is not None:  # a declared thread's, after the last answer
            record.note("no_forbidden_calls", late.partition(" (the confined process")[0])
        return result
    finally:
        confined.close()


def channel_runs_in_one_process(setting, name, seeds, factory_bytes, needs, seconds, global_seed=None,
                                **overrides) -> list:
    """The replications of ``seeds``, one after the other, guarded, with the policy built anew for
    each in one confined process (``ConfinedFactory(reuse=True)``): what it keeps across
    replications in its process shows (``shared_state``)."""
    from .guard import Record
    confined = ConfinedFactory(name, factory_bytes, needs=needs, trust=True, seconds=seconds, global_seed=global_seed,
                               reuse=True)
    try:
        return [run_replication(setting, name, seed, policy=lambda s: ChannelGuard(confined(s), Record(), None, 0),
                                **overrides) for seed in seeds]
    finally:
        confined.close()


def one_line(exc: BaseException) -> str:
    """An exception in one line: a failure of a confined policy's process already says its kind."""
    return exc.message if isinstance(exc, PolicyProcessError) else f"{type(exc).__name__}: {exc}"


def confinement_of(needs) -> str:
    """The confinement a user policy's checks ran under (the report's ``confinement``)."""
    kernel = confine.status()
    if not kernel["available"]:
        return f"a process of their own, not confined by the kernel ({kernel['reason']}): audit hooks only"
    lifted = f"; its declared needs {needs} lift the matching rules" if needs else ""
    reported = "; the system calls it refuses reported to this process" if kernel["refusals_reported"] else ""
    return (f"a process confined by the kernel (Landlock ABI {kernel['landlock_abi']}, seccomp through libseccomp "
            f"{kernel['seccomp']}{reported}){lifted}")


def combined(trusted: dict, reported: dict, names) -> dict:
    """The verdict per check of ``names`` ({name: CheckResult} of each side): a failure of either
    side (this side's detail first), a skip of either, else a pass (this side's note where it judged
    the check)."""
    verdict = {}
    for name in names:
        sides = [r for r in (trusted.get(name), reported.get(name)) if r is not None]
        if sides:
            verdict[name] = (next((r for r in sides if r.status == "failed"), None)
                             or next((r for r in sides if r.status == "skipped"), None) or sides[0])
    return verdict


__all__ = ["DETERMINISTIC", "GLOBAL_SEEDS", "JUDGED", "SELF_REPORTED", "ChannelGuard", "channel_run",
           "channel_runs_in_one_process", "combined", "confinement_of", "one_line"]
