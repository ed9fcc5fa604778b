"""study.online.Client against a real server (uvicorn in a thread of the test): the README's ask/tell
loop runs unchanged and reaches the in-process ranker's choices and estimate exactly; refusals
raise what the Ranker raises; a tell whose answer was lost in transit is retried, recognised as
recorded and never counted twice."""
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.online import Client, Ranker, TicketError, verify_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))
from service_support import TOKEN, LosingProxy, creation, judge_outcome, threaded_server  # noqa: E402


def annotate(ranker, asks: int, seed: int = 3) -> list:
    """The README's loop (with a simulated judge): ask, judge, tell; the tickets handed out."""
    rng = np.random.default_rng(seed)
    tickets = []
    for _ in range(asks):
        ticket = ranker.ask(np.r_[1.0, rng.normal(0, 0.3, 2)])
        verdict = "other" if judge_outcome(ticket, rng) else ("tie" if rng.random() < 0.1 else "major")
        ranker.tell(ticket, wins=int(verdict == "other"), ties=int(verdict == "tie"))
        tickets.append(ticket)
    return tickets


def test_the_readme_loop_runs_unchanged_against_a_server(tmp_path):
    arguments = creation(T=300)
    with Ranker(tmp_path / "local.sqlite", **arguments) as local:
        mine = annotate(local, 120)
        expected = dict(theta=local.theta, ranking=local.ranking(se="sandwich"), decision=local.decision(),
                        intervals=local.intervals(), counts=local.counts(), fixed=local.ranking(x=[1.0, 0.2, -0.1],
                                                                                               anytime=True),
                        diagram=local.diagram([[1.0, 0.0, 0.0], [1.0, 0.3, 0.3]]))
        local.ask([1.0, 0.0, 0.0])
        expected["pending"] = local.pending()
    with threaded_server(lambda: Ranker(tmp_path / "served.sqlite", **arguments)) as url, \
            Client(url, token=TOKEN) as ranker:
        theirs = annotate(ranker, 120)
        assert [(t.id, t.major, t.other, t.x, t.major_name) for t in theirs] == \
               [(t.id, t.major, t.other, t.x, t.major_name) for t in mine]
        assert all(t.store_id == ranker.store_id for t in theirs)
        np.testing.assert_array_equal(ranker.theta, expected["theta"])  # bit for bit
        pd.testing.assert_frame_equal(ranker.ranking(se="sandwich"), expected["ranking"])
        pd.testing.assert_frame_equal(ranker.ranking(x=[1.0, 0.2, -0.1], anytime=True), expected["fixed"])
        pd.testing.assert_frame_equal(ranker.intervals(), expected["intervals"])
        decision = ranker.decision()
        assert decision.top_names == expected["decision"].top_names and decision.words() == expected["decision"].words()
        assert ranker.decided() == expected["decision"].decided
        assert ranker.counts() == expected["counts"] and ranker.n_told == 120
        np.testing.assert_array_equal(ranker.diagram([[1.0, 0.0, 0.0], [1.0, 0.3, 0.3]], tmp_path / "d.png"),
                                      expected["diagram"])
        assert (tmp_path / "d.png").read_bytes().startswith(b"\x89PNG")
        ranker.ask([1.0, 0.0, 0.0])
        assert [(t.id, t.pair) for t in ranker.pending()] == [(t.id, t.pair) for t in expected["pending"]]
        told = ranker.told(after=100)
        assert list(told["seq"]) == list(range(101, 121)) and list(told["ticket"]) == [t.id for t in theirs[100:]]
        assert ranker.expire(older_than=0) == 1
    verify_store(tmp_path / "served.sqlite", replay=True)


def test_refusals_raise_what_the_ranker_raises(tmp_path):
    with threaded_server(lambda: Ranker(tmp_path / "r.sqlite", **creation(T=50))) as url, \
            Client(url, token=TOKEN) as ranker:
        ticket = ranker.ask([1.0, 0.0, 0.0])
        ranker.tell(ticket, wins=1)
        with pytest.raises(TicketError, match="already told") as refused:
            ranker.tell(ticket, wins=1)  # not a retry of this client's: refused even with the same outcome
        assert refused.value.reason == "told" and refused.value.stored["wins"] == 1
        with pytest.raises(TicketError) as refused:
            ranker.tell(99, wins=1)
        assert refused.value.reason == "never_asked"
        with pytest.raises(ValueError, match=r"^x: x has 2 entries"):
            ranker.ask([1.0, 0.0])
        with pytest.raises(ValueError, match="wins: .*exceeds m"):
            ranker.tell(ranker.ask([1.0, 0.0, 0.0]), wins=1, ties=1)
        with pytest.raises(ValueError, match="outcome 1"):
            ranker.tell_many([(2, 0), {"ticket": 2}])
        with Client(url, token="wrong-token-000000") as stranger, pytest.raises(PermissionError, match="403"):
            stranger.ask([1.0, 0.0, 0.0])
        with Client(url) as anonymous:
            assert anonymous.n_told == 1  # reads need no token on loopback
            with pytest.raises(PermissionError, match="401"):
                anonymous.tell(2, wins=0)
    with Client(url, token=TOKEN, retry_for=0.3) as ranker, pytest.raises(ConnectionError, match="no answer"):
        ranker.n_told  # nothing listens any more


@pytest.mark.parametrize("batch", [False, True], ids=["tell", "tell_many"])
def test_a_tell_whose_answer_is_lost_is_retried_recognised_and_counted_once(tmp_path, batch):
    with threaded_server(lambda: Ranker(tmp_path / "r.sqlite", **creation(T=50))) as url:
        port = int(url.rsplit(":", 1)[1])
        proxy = LosingProxy(port, b"POST /api/v1/tell_many" if batch else b"POST /api/v1/tell ")
        try:
            with Client(proxy.url, token=TOKEN) as ranker:
                tickets = [ranker.ask([1.0, 0.1 * k, 0.0]) for k in range(3)]
                if batch:
                    assert ranker.tell_many([(t, 1) for t in tickets]) == 3
                else:
                    ranker.tell(tickets[0], wins=1)
                assert proxy.lost == 1 and ranker.recorded_on_retry == 1  # the first answer never came: retried
                assert ranker.n_told == (3 if batch else 1)
                with pytest.raises(TicketError, match="already told"):
                    ranker.tell(tickets[0], wins=0)  # another outcome is refused
        finally:
            proxy.close()
    verify_store(tmp_path / "r.sqlite")
