"""The ranking table says which number is which and is coherent (score = the interval's centre =
the order, the plain fit beside it), prints whole, and the decision names its items; refused
tickets say why (TicketError.reason) -- what the service shows, tested on the Ranker itself."""
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from study.online import Decision, Ranker, TicketError

ITEMS = ["model-a", "model-b", "model-c", "model-d"]


def annotated(path, told=120, T=300):
    ranker = Ranker(path, items=ITEMS, dim=2, T=T, T0=60, seed=3)
    rng = np.random.default_rng(1)
    skill = np.array([2.0, 0.7, 0.0, -2.0])
    for _ in range(told):
        ticket = ranker.ask([1.0, rng.normal(0, 0.3)])
        ranker.tell(ticket, wins=int(rng.random() < 1 / (1 + np.exp(skill[ticket.major] - skill[ticket.other]))))
    return ranker


def test_the_score_is_the_centre_of_its_interval_and_the_order(tmp_path):
    with annotated(tmp_path / "r.sqlite") as ranker:
        x = ranker.mean_context()
        for anytime in (False, True):
            table = ranker.ranking(anytime=anytime)
            assert table.attrs["score"] == "debiased"
            result = ranker.debiased()
            np.testing.assert_array_equal(table["score"], (result.theta_d @ x)[table["item"]])
            np.testing.assert_allclose((table["lower"] + table["upper"]) / 2, table["score"], rtol=1e-12, atol=1e-12)
            assert ((table["lower"] < table["score"]) & (table["score"] < table["upper"])).all()
            assert np.all(np.diff(table["score"]) <= 0) and list(table["rank"]) == [1, 2, 3, 4]
            np.testing.assert_array_equal(table["estimate"], (ranker.theta @ x)[table["item"]])
        decision = ranker.decision()
        assert decision.top == (int(table["item"][0]),)  # the table's leader is the rule's candidate
    with Ranker(tmp_path / "few.sqlite", items=ITEMS, dim=2, T=50, seed=1) as ranker:
        ranker.tell(ranker.ask([1.0, 0.0]), wins=1)
        table = ranker.ranking()
        assert table.attrs["score"] == "estimate" and table[["se", "lower", "upper"]].isna().all().all()
        np.testing.assert_array_equal(table["score"], table["estimate"])


def test_a_printed_ranking_shows_every_column(tmp_path):
    with annotated(tmp_path / "r.sqlite") as ranker:
        table = ranker.ranking()
        with pd.option_context("display.width", 50, "display.max_columns", 4):
            text = repr(table)
            assert "..." not in text and all(c in text for c in ("se", "lower", "upper", "estimate", "se_method"))
            assert type(table.head(2)) is pd.DataFrame  # what is computed from it is a plain DataFrame
    shown = subprocess.run([sys.executable, "-m", "study.online", "show", str(tmp_path / "r.sqlite"), "--no-png"],
                           capture_output=True, text=True, timeout=120, env={"COLUMNS": "60", "PATH": ""})
    assert shown.returncode == 0, shown.stderr
    header = next(line for line in shown.stdout.splitlines() if line.lstrip().startswith("rank"))
    assert header.split() == ["rank", "item", "name", "score", "se", "lower", "upper", "estimate"]
    assert "score = x'theta^d_i, the debiased estimate" in shown.stdout


def test_the_decision_names_its_items_and_says_it_in_words(tmp_path):
    with Ranker(tmp_path / "empty.sqlite", items=ITEMS, dim=2, T=300, seed=3) as ranker:
        words = ranker.decision().words()
        assert words == "no intervals yet at level 0.95 after 0 judgments (tell more outcomes)"
    with annotated(tmp_path / "r.sqlite", told=250) as ranker:
        decision = ranker.decision(x=[1.0, 0.0])
        assert isinstance(decision, Decision) and decision.decided
        assert decision.top_names == ("model-a",) and decision.judgments == 250
        assert decision.words() == "model-a is best at level 0.95 after 250 judgments (confidence sequences)"
        close = ranker.decision(x=[1.0, 0.0], top=2)
        assert close.top_names == tuple(ITEMS[i] for i in close.top)
        assert close.closest_names == tuple(ITEMS[i] for i in close.closest)
        assert not close.decided and close.words().startswith("not decided at level 0.95 after 250 judgments: ")
        assert f"closest pair {close.closest_names[0]} vs {close.closest_names[1]}" in close.words()


def test_refused_tickets_say_why(tmp_path):
    with annotated(tmp_path / "r.sqlite", told=3) as ranker, \
            Ranker(tmp_path / "other.sqlite", items=ITEMS, dim=2, T=50, seed=1) as other:
        ticket, late = ranker.ask([1.0, 0.0]), ranker.ask([1.0, 0.1])
        ranker.tell(ticket, wins=1, m=1)
        ranker.expire(late)
        foreign = other.ask([1.0, 0.0])
        swapped = ranker.ask([1.0, 0.2])
        for call, reason, stored in [
            (lambda: ranker.tell(ticket, wins=0), "told", {"seq": 4, "wins": 1, "ties": 0, "m": 1}),
            (lambda: ranker.tell(late, wins=0), "expired", None),
            (lambda: ranker.tell(99, wins=0), "never_asked", None),
            (lambda: ranker.tell(foreign, wins=0), "other_store", None),
            (lambda: ranker.tell(replace(swapped, major=swapped.other, other=swapped.major), wins=0), "pair", None),
            (lambda: ranker.tell_many([(swapped.id, 1), (ticket.id, 1)]), "told", {"seq": 4, "wins": 1, "ties": 0,
                                                                                    "m": 1}),
            (lambda: ranker.expire(ticket), "told", {"seq": 4, "wins": 1, "ties": 0, "m": 1}),
        ]:
            with pytest.raises(TicketError) as refused:
                call()
            assert (refused.value.reason, refused.value.stored) == (reason, stored), refused.value
        assert refused.value.ticket == ticket.id
        with pytest.raises(TicketError, match="outcome 1: ticket") as refused:
            ranker.tell_many([(swapped.id, 1), (ticket.id, 1)])
        assert refused.value.outcome == 1 and refused.value.reason == "told"
        assert ranker.n_told == 4
