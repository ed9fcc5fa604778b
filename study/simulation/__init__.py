"""The simulation layer: a policy run against an environment, the shared estimator refitted every
step.

* :mod:`.settings` -- the paper's Settings A and B as frozen, validated objects;
* :mod:`.graph` -- the comparison graph;
* :mod:`.environment` -- the BTL environment of one (setting, replication);
* :mod:`.seeds` -- every random stream from one SeedSequence;
* :mod:`.estimator` -- the estimator schedule every policy shares;
* :mod:`.replication` -- the replication loop;
* :mod:`.result` -- the record of one replication.

The policies (:mod:`study.policies`) belong to this layer.  This ``__init__`` imports nothing, so
that :mod:`study.policies` and the loop can import each other's modules without a cycle.
"""
