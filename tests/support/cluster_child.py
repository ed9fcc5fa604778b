"""A two-node Ray cluster on loopback (``ray.cluster_utils.Cluster``) in a process of its own; a
study run on it loses its second node mid-study (the node's raylet killed), and then the same
study is run on the head alone.  Prints one JSON line: what the tests check."""
from __future__ import annotations

import json
import os
import sys
import threading
import time

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # every server on 127.0.0.1
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from study import load, runner  # noqa: E402
from study.results import storage  # noqa: E402


def _warm() -> int:
    import study.runner.worker  # noqa: F401 -- what a study task imports
    return 1


def main(out: str) -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        node = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        warm = ray.remote(num_cpus=1)(_warm)  # the second node's worker up, its imports done
        ray.get(warm.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node.node_id, soft=False)).remote())
        plan = runner.make_plan("regret", settings=["A"], methods=["RB", "ETA"], reps=24, overrides={"T": 60, "T0": 24})
        logs, result = [], {}
        options = dict(address=cluster.address, progress=False, handle_signals=False, batch_size=1)

        def study():
            result["killed"] = runner.run_study(plan, f"{out}/killed", log=logs.append, **options)

        thread = threading.Thread(target=study)
        thread.start()
        stored = 0
        while thread.is_alive() and stored < 12:  # a quarter of the study stored: the node is busy
            time.sleep(0.05)
            try:
                stored = storage.verify(f"{out}/killed", "regret")["replications"]
            except storage.StorageError:
                pass
        cluster.remove_node(node, allow_graceful=False)  # its raylet and workers killed
        thread.join()
        whole = runner.run_study(plan, f"{out}/whole", log=lambda m: None, **options)
        killed = result["killed"]
        run = storage.read_manifest(f"{out}/killed", "regret")["runs"][-1]
        equal = load(f"{out}/killed", "regret").equals(load(f"{out}/whole", "regret"))
        print(json.dumps({"killed_at": stored, "killed_node": node.node_id, "nodes_used": run["nodes_used"],
                          "address": cluster.address, "ok": killed.ok, "computed": killed.computed,
                          "failed": killed.failed, "whole_ok": whole.ok, "equal": equal,
                          "node_lost": [m for m in logs if "was lost" in m or "worker died" in m]}), flush=True)
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
