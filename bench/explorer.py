"""The explorer's speed on its defaults, through Streamlit's AppTest (the script run
that a browser's first visit triggers, without the browser's own rendering):

* cold: a fresh Python process, imports included, until the first comparison is
  built (target under 5 s on a 2-core machine), with the CPU seconds it took (on a
  loaded machine the wall time stretches; the CPU time says what the view needs);
* the same first script run in a warm process with the result cache cleared;
* cached: a rerun of the same setup (target under 0.5 s);
* simulations per default view (each a ``warmcore.simulate`` call).

    python bench/explorer.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

APP = str(Path(__file__).resolve().parents[1] / "app.py")

COLD = """
import resource, time, sys
t0 = time.perf_counter()
from streamlit.testing.v1 import AppTest
at = AppTest.from_file(sys.argv[1], default_timeout=120).run()
assert not at.exception, at.exception
assert any("req/s" in d.value.columns for d in at.main.dataframe)
ru = resource.getrusage(resource.RUSAGE_SELF)     # every thread's CPU: the runs' too
print(time.perf_counter() - t0, ru.ru_utime + ru.ru_stime)
"""


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    cold, cold_cpu = [], []
    for _ in range(args.repeat):
        wall, cpu = map(float, subprocess.run([sys.executable, "-c", COLD, APP],
                                              capture_output=True, text=True,
                                              check=True).stdout.split()[-2:])
        cold.append(wall)
        cold_cpu.append(cpu)

    import streamlit as st
    from streamlit.logger import set_log_level
    from streamlit.testing.v1 import AppTest

    set_log_level("error")

    import warmcore.api

    calls = []
    real = warmcore.api.simulate

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    warmcore.api.simulate = counting
    AppTest.from_file(APP, default_timeout=120).run()        # imports, warm
    first, cached = [], []
    for _ in range(args.repeat):
        st.cache_data.clear()
        calls.clear()
        at = AppTest.from_file(APP, default_timeout=120)
        t = time.perf_counter()
        at.run()
        first.append(time.perf_counter() - t)
        n_sims = len(calls)
        t = time.perf_counter()
        at.run()
        cached.append(time.perf_counter() - t)
        assert not at.exception
    warmcore.api.simulate = real

    def show(name, xs, target=None):
        line = f"{name:44s} median {statistics.median(xs):6.3f} s  (min {min(xs):.3f}, " \
               f"max {max(xs):.3f}, n={len(xs)})"
        print(line + (f"  target < {target} s" if target else ""))

    show("cold first view (fresh process, imports)", cold, 5)
    # The CPU seconds that view needs: on a machine shared with other work the wall
    # time stretches, and this says how far; wall / CPU near 1 means it ran alone.
    show("  its CPU time (every thread)", cold_cpu)
    ratio = statistics.median(cold) / statistics.median(cold_cpu)
    print(f"  wall / CPU of the cold view: {ratio:.2f}")
    show("first view, warm process, cache cleared", first)
    show("cached rerun of the same setup", cached, 0.5)
    print(f"simulations per default view: {n_sims}")


if __name__ == "__main__":
    main()
