"""Provenance without gaps (issue 18, item 4): a user policy's hash covers its package and the
helper modules it imports, callable instances and partials by their state; a policy without
source on disk is refused unless the user opts in; reuse across studies is keyed by the user
policy's hash; a refused resume names what changed."""
from __future__ import annotations

import functools
import sys
import textwrap
import types

import numpy as np
import pytest

import study
from study import runner
from study.runner.fingerprint import describe_difference
from study.policies import unregister_policy
from study.results import storage
from engine_support import fake_replicate

TINY = {"T": 30, "T0": 10}
POLICY = '''
from study import Choice
from study.policies import uniform_neighbour, argmax_playable
from {helpers} import score


class Greedy:
    def __init__(self, setting):
        pass

    def select(self, step):
        major = argmax_playable(step, score(step))
        return Choice(major, uniform_neighbour(step, major), False)
'''


@pytest.fixture
def user_code(tmp_path, monkeypatch):
    """A user's source tree: package ``mypolicies`` (policy.py imports its own helpers module) and
    a top-level module ``toplevel_policy.py`` importing a sibling top-level ``toplevel_helpers.py``."""
    root = tmp_path / "src"
    pkg = root / "mypolicies"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "policy.py").write_text(POLICY.format(helpers="mypolicies.helpers"))
    (pkg / "helpers.py").write_text("def score(step):\n    return step.theta @ step.x\n")
    (root / "toplevel_policy.py").write_text(POLICY.format(helpers="toplevel_helpers"))
    (root / "toplevel_helpers.py").write_text("def score(step):\n    return step.theta @ step.x\n")
    monkeypatch.syspath_prepend(str(root))
    yield root
    for name in [m for m in sys.modules if m.startswith(("mypolicies", "toplevel_"))]:
        del sys.modules[name]


def edit_helper(path):
    path.write_text(path.read_text().replace("step.theta @ step.x", "-(step.theta @ step.x)"))


@pytest.mark.parametrize("method, helper", [("mypolicies.policy:Greedy", "mypolicies/helpers.py"),
                                            ("toplevel_policy:Greedy", "toplevel_helpers.py")])
def test_resume_refuses_an_edited_helper_module_naming_it(ray_session, tmp_path, user_code, method, helper):
    out = tmp_path / "out"
    plan = runner.make_plan("regret", settings=["A"], methods=[method], reps=2, overrides=TINY)
    assert runner.run_study(plan, out, replicate=fake_replicate, progress=False, log=lambda m: None).ok
    edit_helper(user_code / helper)
    again = runner.make_plan("regret", settings=["A"], methods=[method], reps=3, overrides=TINY)
    with pytest.raises(runner.ConfigMismatch) as exc:
        runner.run_study(again, out, replicate=fake_replicate, progress=False, log=lambda m: None)
    message = str(exc.value)
    assert method in message and helper in message and "changed" in message
    assert "fingerprint differs" not in message


def test_reuse_across_studies_is_keyed_by_the_user_policys_code(ray_session, tmp_path, user_code):
    """The issue's case: a policy edited between jobs/regret.py and jobs/baselines.py."""
    method = "mypolicies.policy:Greedy"
    out = tmp_path / "out"
    kwargs = dict(settings=["A"], methods=["RB", method], reps=2, overrides=TINY)
    run = functools.partial(runner.run_study, out=out, replicate=fake_replicate, progress=False, log=lambda m: None)
    assert run(runner.make_plan("regret", **kwargs)).ok
    # unchanged code: the baselines study copies both cells
    assert run(runner.make_plan("baselines", **kwargs)).reused == 4
    # edited code: the user policy's replications are computed, only RB's are copied
    edit_helper(user_code / "mypolicies" / "helpers.py")
    report = run(runner.make_plan("baselines", **kwargs), fresh=True)
    assert report.reused == 2 and report.computed == 2
    reused = storage.read_manifest(out, "baselines")["runs"][-1]["reused"]
    assert reused["replications"] == 2


class Tempered:
    """A callable instance: its parameter changes what the policy does."""

    def __init__(self, temperature):
        self.temperature = temperature

    def __call__(self, setting):
        return study.policies.make_policy("RB", setting)


def tempered(setting, temperature=1.0):
    return study.policies.make_policy("RB", setting)


def test_callable_instances_and_partials_are_hashed_by_their_state():
    def fingerprint_of(factory):
        study.register_policy("tempered", factory, replace=True)
        try:
            plan = runner.make_plan("regret", settings=["A"], methods=["tempered"], reps=1, overrides=TINY)
            return plan.fingerprint()
        finally:
            unregister_policy("tempered")

    a, b = fingerprint_of(Tempered(1.0)), fingerprint_of(Tempered(2.0))
    record = a["policies"]["tempered"]
    assert record["source_sha256"] and record["state_sha256"]  # never None silently
    assert a != b and "parameters" in describe_difference(a, b)
    assert fingerprint_of(Tempered(1.0)) == a
    p, q = (fingerprint_of(functools.partial(tempered, temperature=t)) for t in (1.0, 3.0))
    assert p != q and p["policies"]["tempered"]["state_sha256"]


def test_a_policy_without_source_on_disk_is_refused_unless_allowed(monkeypatch):
    notebook = types.ModuleType("__main__")  # a notebook's __main__: no source file
    monkeypatch.setitem(sys.modules, "__main__", notebook)
    namespace = {"__name__": "__main__"}
    exec(compile(textwrap.dedent('''
        import study
        class CellPolicy:
            def __init__(self, setting):
                self.inner = study.policies.make_policy("RB", setting)
            def select(self, step):
                return self.inner.select(step)
    '''), "<ipython-input-3-5f2a>", "exec"), namespace)
    study.register_policy("cell", namespace["CellPolicy"], replace=True)
    try:
        with pytest.raises(ValueError, match="cannot be hashed.*allow_unhashable=True") as exc:
            runner.make_plan("regret", settings=["A"], methods=["cell"], reps=1, overrides=TINY)
        assert type(exc.value).__name__ == "UnhashablePolicy" and "'cell'" in str(exc.value)
        study.register_policy("cell", namespace["CellPolicy"], replace=True, allow_unhashable=True)
        plan = runner.make_plan("regret", settings=["A"], methods=["cell"], reps=1, overrides=TINY)
        record = plan.fingerprint()["policies"]["cell"]
        assert record["source_sha256"] is None and "notebook" in record["unhashable"]
    finally:
        unregister_policy("cell")


def test_exec_d_class_in_a_module_with_a_file_is_not_hashed_by_that_file(monkeypatch):
    """A class compiled from a string inside a real module must not claim the module's file."""
    namespace = {"__name__": __name__}
    exec(compile("class Generated:\n    def __init__(self, setting):\n        pass\n", "<generated>", "exec"),
         namespace)
    with pytest.raises(ValueError, match="cannot be hashed"):
        study.policy_provenance("generated", namespace["Generated"])


# --- issue 24: provenance covers what a policy reads ------------------------------------------------

def make_factory(n):
    """A factory parametrised by what it closes over (the issue: make_factory(10) and (20) kept one hash)."""
    def factory(setting):
        return study.policies.make_policy("RB" if n < 15 else "ETA", setting)
    return factory


def nested_factory(scale):
    weight = (lambda x: x * scale)  # a closure inside the closure
    def factory(setting):
        return study.policies.make_policy("RB" if weight(1) < 2 else "ETA", setting)
    return factory


def _record(name, factory):
    study.register_policy(name, factory, replace=True)
    try:
        return study.policy_provenance(name)
    finally:
        unregister_policy(name)


def test_the_values_a_factory_closes_over_join_its_hash():
    ten, twenty = _record("closured", make_factory(10)), _record("closured", make_factory(20))
    assert ten["source_sha256"] == twenty["source_sha256"]  # the same code ...
    assert ten["state_sha256"] != twenty["state_sha256"] and set(ten["state"]) == {"closure 'n'"}  # ... other values
    assert _record("closured", make_factory(10)) == ten
    assert _record("nested", nested_factory(1.0))["state_sha256"] != _record("nested", nested_factory(3.0))["state_sha256"]
    arrays = [_record("arr", functools.partial(tempered, temperature=np.full(3, v)))["state_sha256"] for v in (1.0, 2.0)]
    assert arrays[0] != arrays[1]


def test_the_m_sweep_does_not_reuse_rows_of_a_policy_whose_parameters_changed(ray_session, tmp_path):
    """The issue's case: the regret study ran make_factory(10), the M-sweep make_factory(20) under
    the same name; the sweep reused the regret study's rows."""
    out = tmp_path / "out"
    run = functools.partial(runner.run_study, out=out, progress=False, log=lambda m: None)  # real replications
    kwargs = dict(settings=["A"], methods=["RB", "closured"], reps=2, overrides=TINY)
    try:
        study.register_policy("closured", make_factory(10), replace=True)
        assert run(runner.make_plan("regret", **kwargs)).ok
        assert run(runner.make_plan("msweep", m_values=[20], **kwargs)).reused == 4  # same parameters: both cells
        study.register_policy("closured", make_factory(20), replace=True)
        report = run(runner.make_plan("msweep", m_values=[20], **kwargs), fresh=True)
        assert report.reused == 2 and report.computed == 2  # RB's copied, the changed policy's computed
        with pytest.raises(runner.ConfigMismatch, match=r"closured.*parameters.*closure 'n'"):
            run(runner.make_plan("regret", **{**kwargs, "reps": 3}))
    finally:
        unregister_policy("closured")


def test_resume_refuses_a_changed_data_file_of_the_policys_package(ray_session, tmp_path, user_code):
    """The issue's case: the policy's behaviour comes from params.json in its package."""
    (user_code / "mypolicies" / "params.json").write_text('{"temperature": 1.0}')
    method = "mypolicies.policy:Greedy"
    out = tmp_path / "out"
    plan = runner.make_plan("regret", settings=["A"], methods=[method], reps=2, overrides=TINY)
    assert "mypolicies/params.json" in plan.fingerprint()["policies"][method]["files"]
    assert runner.run_study(plan, out, replicate=fake_replicate, progress=False, log=lambda m: None).ok
    (user_code / "mypolicies" / "params.json").write_text('{"temperature": 2.0}')
    again = runner.make_plan("regret", settings=["A"], methods=[method], reps=3, overrides=TINY)
    with pytest.raises(runner.ConfigMismatch, match=r"changed: mypolicies/params\.json"):
        runner.run_study(again, out, replicate=fake_replicate, progress=False, log=lambda m: None)


def test_a_helper_imported_by_a_literal_dynamic_import_is_hashed(user_code):
    (user_code / "dyn_policy.py").write_text(POLICY.replace("from {helpers} import score\n", "").format() .replace(
        "class Greedy:", "import importlib\nscore = importlib.import_module('dyn_helpers').score\n\n\nclass Greedy:"))
    (user_code / "dyn_helpers.py").write_text("def score(step):\n    return step.theta @ step.x\n")
    before = study.policy_provenance("dyn_policy:Greedy")
    assert "dyn_helpers.py" in before["files"]
    edit_helper(user_code / "dyn_helpers.py")
    assert study.policy_provenance("dyn_policy:Greedy")["source_sha256"] != before["source_sha256"]


def test_declared_inputs_join_the_hash_and_a_change_is_named(user_code, tmp_path, monkeypatch):
    weights = tmp_path / "weights.txt"
    weights.write_text("1 2 3")
    (user_code / "declared.py").write_text(POLICY.format(helpers="toplevel_helpers") + textwrap.dedent(f'''
        Greedy.policy_inputs = ({str(weights)!r}, "$DECLARED_TEMPERATURE", "absent.csv")
    '''))
    monkeypatch.setenv("DECLARED_TEMPERATURE", "0.4321987")

    def fingerprint():
        return runner.make_plan("regret", settings=["A"], methods=["declared:Greedy"], reps=1,
                                overrides=TINY).fingerprint()

    first = fingerprint()
    inputs = first["policies"]["declared:Greedy"]["inputs"]
    assert set(inputs) == {str(weights), "$DECLARED_TEMPERATURE", "absent.csv"} and inputs["absent.csv"] == "<missing>"
    assert "0.4321987" not in str(first)  # an environment variable's value is hashed, never stored
    monkeypatch.setenv("DECLARED_TEMPERATURE", "0.7")
    assert "declared inputs (policy_inputs) changed (changed: $DECLARED_TEMPERATURE)" in \
        describe_difference(first, fingerprint())
    monkeypatch.setenv("DECLARED_TEMPERATURE", "0.4321987")
    weights.write_text("1 2 4")
    assert f"changed: {weights}" in describe_difference(first, fingerprint())
