"""Virtual threads pay their freeze, thaw and queues as work (issue 29 item 2;
strategies/virtual_threads.py ContinuationCosts), computed by hand on small cases."""

from __future__ import annotations

import pytest

from warmcore.models.hardware import HardwareMachine
from warmcore.models.presets import Preset
from warmcore.simcore.work import SHARED, THREAD
from warmcore.strategies.virtual_threads import ContinuationCosts, Params, VThread


class _Req:
    def __init__(self, rid):
        self.id = rid


# 1 core at 1 GHz, 1 IPC, DRAM 100 ns, one miss at a time, no streamer: a cold line
# costs 100 ns, a warm one nothing beyond its L1 hit
ONE = Preset(name="test-vt", description="1 core", cores_per_socket=1, pstates_ghz=(1.0,),
             base_ipc=1.0, mlp=1.0, dram_ns=100.0, extra={"stream_ahead_lines": 0.0})
CACHES = {e: e == "caches" for e in ("caches", "coherence", "contention", "membus", "smt",
                                     "dvfs", "switch_costs", "energy")}


def test_freeze_and_thaw_are_their_paths_plus_one_instruction_per_word():
    cc = ContinuationCosts(Params(stack_frames=16, frame_bytes=96.0), HardwareMachine(ONE))
    vt = VThread(_Req(7))
    # 16 frames x 96 B = 1536 B: 192 words copied, 24 lines on each side
    assert cc.lines == 24.0
    fr, th = cc.freeze(vt), cc.thaw(vt)
    assert fr.instructions == 500 + 192 and th.instructions == 500 + 192
    assert [(f.kind, f.key, f.lines, f.writes) for f in fr.footprint] == [
        (THREAD, None, 24.0, False), (THREAD, ("vstack", 7), 24.0, True)]
    assert [(f.kind, f.key, f.lines, f.writes) for f in th.footprint] == [
        (THREAD, ("vstack", 7), 24.0, False), (THREAD, None, 24.0, True)]
    # parking on a semaphore adds the AQS enqueue: its node and a CAS on the tail
    park = cc.freeze(vt, "db")
    assert park.instructions == 692 + 50
    assert park.contended_ops == 1 and park.contended_line == ("aqs-tail", "db")
    assert (THREAD, ("aqs", 7), 1.0, True) in [(f.kind, f.key, f.lines, f.writes)
                                             for f in park.footprint]
    sig = cc.signal_next(vt, "db")
    assert sig.contended_line == ("aqs-head", "db") and sig.footprint[0].key == ("aqs", 7)
    assert cc.poll(3).contended_line == ("fjp", 3) and cc.poll(3) is cc.poll(3)
    assert cc.ctl.footprint[0].kind == SHARED


def test_a_thaw_costs_the_copy_and_the_chunk_lines_it_finds_cold():
    m = HardwareMachine(ONE, effects=CACHES)
    cc = ContinuationCosts(Params(stack_frames=16, frame_bytes=96.0), m)
    vt = VThread(_Req(1))
    # cold: 692 instructions (692 ns) + 24 chunk lines and 24 carrier-stack lines from
    # DRAM (48 x 100 ns)
    assert m.execute(0, cc.thaw(vt), "carrier", 0.0)[0] == pytest.approx(692e-9 + 4.8e-6)
    # at once again on the same core: both warm, only the copy
    assert m.execute(0, cc.thaw(vt), "carrier", 0.0)[0] == pytest.approx(692e-9)
    # a deeper stack copies more: 32 frames, 3072 B, 384 words, 48 + 48 lines
    deep = ContinuationCosts(Params(stack_frames=32, frame_bytes=96.0), m)
    assert m.execute(0, deep.thaw(VThread(_Req(2))), "carrier", 0.0)[0] == pytest.approx(
        884e-9 + 48 * 100e-9 + 24 * 100e-9)      # the carrier's first 24 lines are warm


def test_a_stack_of_500_words_or_more_moves_only_the_frames_a_park_returns_through():
    # 41 frames x 96 B = 3936 B = 492 words: under thaw_fast's threshold, copied whole
    whole = ContinuationCosts(Params(stack_frames=41, frame_bytes=96.0), HardwareMachine(ONE))
    assert whole.thaw_ins == 500 + 492 and whole.lines == 61.5
    # 42 frames = 504 words: one frame at the thaw, then the return barrier's, so the
    # 10 frames between doYield and the task's body move each way (960 B, 120 words)
    lazy = ContinuationCosts(Params(stack_frames=42, frame_bytes=96.0), HardwareMachine(ONE))
    assert lazy.thaw_ins == 500 + 120 and lazy.freeze_ins == 500 + 120 and lazy.lines == 15.0
