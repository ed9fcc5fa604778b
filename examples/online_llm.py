"""An annotation loop with the online ranker (study.online), against the LLM replay's judge.

    python examples/online_llm.py                        # 1,500 asks into online_llm.sqlite (~20 s)
    python examples/online_llm.py --asks 500             # run again: the store is continued, 500 more
    python -m study.online show online_llm.sqlite --se sandwich

Each ask is one prompt: question t of the LLM replay (a real MMLU anatomy question, its real
embedding as the context x, see docs/llm.md).  The ranker says which two of the five LLMs to
compare on it; the "annotator" is the replay's judge, one recorded judgment of that pair on that
question (GENERATED judgments: the paper's GPT-4 verdicts are not available offline).  Replace
``judge`` by your annotators and ``judge.contexts`` by your prompts' embeddings, and this is the
whole integration: ask, show the pair, tell the verdict.  Killed at any point, the loop resumes
where it stopped (open tickets are told first), because every ask and tell is in the store.
"""
from __future__ import annotations

import argparse
import time

from study.llm import LLMReplay
from study.online import Ranker

T, T0 = 5000, 3000  # the paper's horizon and first stage for this application


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="online_llm.sqlite", help="the ranker's SQLite file")
    parser.add_argument("--asks", type=int, default=1500, help="asks in this run (default 1500)")
    parser.add_argument("--seed", type=int, default=1, help="the judge's and the ranker's seed")
    args = parser.parse_args(argv)

    judge = LLMReplay(seed=args.seed, T=T)  # questions in a random order, one judgment per ask
    ranker = Ranker(args.store, n_items=judge.n_items, dim=judge.dim, items=judge.labels, policy="RB", T=T,
                    T0=T0, M=1, seed=args.seed)
    started, before = time.perf_counter(), ranker.n_told

    def verdict(ticket):  # the annotator: 0 = major preferred, 1 = other preferred, 2 = tie
        code = int(judge.draw(ticket.id, ticket.major, ticket.other)[0])
        return {"wins": int(code == 1), "ties": int(code == 2)}

    for ticket in ranker.pending():  # asked before an interruption, never told
        ranker.tell(ticket, **verdict(ticket))
    stop = min(T, ranker.n_asked + args.asks)
    while ranker.n_asked < stop:
        x = judge.contexts[ranker.n_asked]  # the next prompt's context
        ticket = ranker.ask(x)
        ranker.tell(ticket, **verdict(ticket))

    print(f"{ranker.n_told - before} judgments told in {time.perf_counter() - started:.1f} s; "
          f"{ranker.n_told} in {args.store}")
    print(ranker.ranking(judge.question_contexts.mean(axis=0), se="sandwich").to_string(index=False,
                                                                                        float_format="%.3f"))
    png = args.store + "_diagram.png"
    try:
        ranker.diagram(judge.question_contexts, png, se="sandwich")
        print(f"uncertainty-aware ranking diagram over the {len(judge.question_contexts)} questions: {png}")
    except ValueError as exc:
        print(f"no uncertainty-aware diagram yet: {exc}")
    ranker.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
