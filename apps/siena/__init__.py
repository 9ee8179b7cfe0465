"""Siena-style publish/subscribe: a protocol spec and message traces matching ``gen rules --workload siena``.

The rule generator (:func:`apps.workloads.siena_rules`) names attributes ``<header>.i<k>`` and
``<header>.s<k>``; :mod:`apps.siena.spec` writes the P4 spec that declares exactly those fields
and :mod:`apps.siena.trace` the packets that carry them, so the three can be compiled, replayed
and checked together.
"""
