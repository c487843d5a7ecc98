"""The kernel package's house rules (issue 27):

* SimPy's private attributes are touched in one module only (simcore/kernel/fastpath.py);
* the breakdown's indices come from the one list of causes (simcore.work.CAUSES);
* the hot path's inline copies of ``credit`` and of the breakdown's booking touch
  the same counters and causes as the tables the general code uses, and give the
  same numbers as the general code (a run with the slow path forced).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import warmcore
from tests.test_layers import SOURCES, source_files
from warmcore.simcore.kernel import accounting
from warmcore.simcore.work import CAUSES

ROOT = Path(__file__).resolve().parents[1]

# SimPy's private names: Environment (_now, _queue, _eid, _active_proc), Event
# (_value, _ok, _defused), Timeout (_delay), Process (_generator, _target).
SIMPY_PRIVATE = {"_now", "_queue", "_eid", "_active_proc", "_value", "_ok", "_defused",
                 "_delay", "_generator", "_target"}
ALLOWED = {"warmcore.simcore.kernel.fastpath"}


def simpy_private_uses(root: Path = ROOT) -> list[str]:
    found = []
    for path, module in source_files(root):
        if module in ALLOWED:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in SIMPY_PRIVATE:
                found.append(f"{path.relative_to(root)}:{node.lineno}: .{node.attr}")
    return found


def test_simpy_internals_are_touched_in_one_module_only():
    assert simpy_private_uses() == []


def test_the_allow_listed_module_is_where_the_internals_are():
    """The check is not vacuous: the fast-path module does use them."""
    text = (ROOT / "simcore" / "kernel" / "fastpath.py").read_text()
    assert "env._queue" in text and "env._now" in text


def test_a_private_use_elsewhere_is_caught(tmp_path):
    for src in SOURCES:
        p = ROOT / src
        files = [p] if p.is_file() else list(p.rglob("*.py"))
        for f in files:
            dest = tmp_path / src if p.is_file() else tmp_path / src / f.relative_to(p)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(f.read_text())
    target = tmp_path / "simcore" / "recorder.py"
    target.write_text(target.read_text() + "\n\ndef _peek(env):\n    return env._now\n")
    found = simpy_private_uses(tmp_path)
    assert len(found) == 1 and found[0].startswith("simcore/recorder.py:")


def test_breakdown_indices_follow_the_causes():
    names = {"queue_wait": "B_QUEUE", "dispatch": "B_DISPATCH", "compute": "B_COMPUTE",
             "cache_reload": "B_RELOAD", "coherence": "B_COHER", "contention": "B_CONTEND",
             "blocked_io": "B_IO"}
    assert set(names) == set(CAUSES)
    for cause, name in names.items():
        assert getattr(accounting, name) == CAUSES.index(cause), name


def _augmented_indices(func: str, ledger: str) -> set[str]:
    """Names ``X`` in ``ledger[X] += ...`` inside the function ``func`` of accounting."""
    # the .py beside it: the module itself may be the compiled extension (setup.py)
    tree = ast.parse(Path(accounting.__file__).with_name("accounting.py").read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == func)
    out = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) \
                and isinstance(node.target.value, ast.Name) and node.target.value.id == ledger:
            out.add(node.target.slice.id)
    return out


def _names(prefix: str, indices) -> set[str]:
    return {n for n, v in vars(accounting).items()
            if n.startswith(prefix) and isinstance(v, int) and v in set(indices)}


def test_the_model_fast_path_credits_what_credit_credits():
    cost_counters = _names("K_", [k for k, _ in accounting.COST_COUNTERS])
    assert _augmented_indices("_run_model", "ctr") == {"K_TASK", "K_SYS"} | cost_counters


def test_the_model_fast_path_books_the_causes_recredit_books():
    cost_causes = _names("B_", [b for b, _ in accounting.COST_CAUSES])
    # plus the dispatch (kernel work, wake-up latency) and the blocking wait
    assert _augmented_indices("_run_model", "bd") == cost_causes | {"B_DISPATCH", "B_IO"}
    assert cost_causes == {"B_COMPUTE", "B_RELOAD", "B_COHER", "B_CONTEND"}


def test_the_ideal_fast_path_credits_what_credits_ideal_branch_credits():
    assert _augmented_indices("run_segment", "ctr") == {"K_TASK", "K_INS", "K_SYS"}
    assert _augmented_indices("run_segment", "bd") == {"B_COMPUTE", "B_DISPATCH", "B_IO"}


@pytest.mark.parametrize("name, sets", [
    ("mmc", {}),                                       # ideal machine: run_segment
    ("pipeline", {"strategy.name": "pec"}),            # model, fluid rates
    ("contended", {"machine.threads_per_core": 2}),    # model, SMT re-rating
])
def test_fast_and_slow_paths_give_the_same_numbers(name, sets):
    """A trace forces every segment through the slow path (``run_slow`` -> chunks ->
    ``credit``): the counters and the breakdown must not change."""
    sc = warmcore.Scenario.load(name).with_(sets, requests=1500)
    fast = warmcore.simulate(sc).to_dict()
    slow = warmcore.simulate(sc.with_({"run.trace_events": 10})).to_dict()
    slow.pop("trace")
    assert slow == fast
