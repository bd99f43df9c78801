"""Benchmark driver for every sliding-window engine of :mod:`mta`.

One driver, every engine side by side in one process (in the style of
IBM's sliding-window-aggregators benchmark driver)::

    python -m bench exp1     [--quick] [--out bench/results]   # MTA paper Fig. 6
    python -m bench exp2     [--quick]                          # MTA paper Fig. 7
    python -m bench exp3     [--quick]                          # MTA paper Table 2
    python -m bench latency  [--quick]                          # DABA paper Table 2
    python -m bench all      [--quick]

Each experiment writes ``<out>/<experiment>.json`` (with machine info) and
``<out>/<experiment>.png`` and prints a table.  Engines come from
:data:`bench.engines.ENGINES`; each experiment follows the contract of
:mod:`bench.experiment`.  Nothing here asserts on timings.
"""
