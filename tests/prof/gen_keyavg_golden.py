#!/usr/bin/env python3
"""Writes data/keyavg_spec.txt (a small nested event list with memory events) and
data/keyavg_golden_<k>.txt: torch's own key_averages().table() text for it, built with
torch.autograd.profiler_util (FunctionEvent / EventList, the code torch.profiler uses),
under several options. test_prof_keyavg builds the same list through loupe's event-list
API and compares the tables byte for byte. Run: python3 tests/prof/gen_keyavg_golden.py"""
import os

from torch.autograd.profiler_util import EventList, FunctionEvent

# (tid, cat, start_us, end_us, flops, name, shapes); shapes: list of lists or None
UA, OP = "user_annotation", "cpu_op"
EVENTS = [
    (1, UA, 0, 1000, 0, "ProfilerStep#0", None),
    (1, UA, 10, 600, 0, "forward", None),
    (1, OP, 20, 300, 0, "aten::linear", [[8, 16], [16, 32], [32]]),
    (1, OP, 30, 250.5, 8192, "aten::mm", [[8, 16], [16, 32]]),
    (1, OP, 260, 290, 256, "aten::add", [[8, 32], [32]]),
    (1, OP, 310, 550, 0, "aten::linear", [[8, 32], [32, 4], [4]]),
    (1, OP, 320, 500.25, 2048, "aten::mm", [[8, 32], [32, 4]]),
    (1, OP, 560, 590, 0, "aten::relu", [[8, 4]]),
    (1, UA, 610, 900, 0, "Optimizer.step#AdamW.step", None),
    (1, OP, 620, 700, 0, "aten::mul", [[32, 4], []]),
    (1, OP, 700, 780, 0, "aten::mul", [[32, 4], []]),
    (1, UA, 1000, 1900, 0, "ProfilerStep#1", None),
    (1, UA, 1010, 1500, 0, "forward", None),
    (1, OP, 1020, 1400, 0, "aten::linear", [[8, 16], [16, 32], [32]]),
    (1, OP, 1030, 1390, 8192, "aten::mm", [[8, 16], [16, 32]]),
    (1, OP, 1500, 1600, 0, "aten::sum", [[8, 4]]),
    (1, UA, 1610, 1612.5, 0, "a_very_long_annotation_name_that_goes_past_the_name_column_width", None),
    (2, OP, 100, 400, 128, "aten::mm", [[4, 4], [4, 4]]),
    (2, OP, 450, 500, 0, "aten::copy_", [[4], [4]]),
    (2, OP, 460, 490, 0, "aten::copy_", [[4], [4]]),
]
# (tid, ts_us, bytes): CPU [memory] events
MEMORY = [(1, 25, 1024), (1, 35, 4096), (1, 255, -1024), (1, 315, 2048000), (1, 630, -512),
          (1, 1025, 100), (1, 1550, 2000000000), (2, 455, 3000), (2, 470, 77)]

CASES = [
    dict(group=False, sort_by="self_cpu_time_total", row_limit=100, top=False, unit=None),
    dict(group=True, sort_by="cpu_time_total", row_limit=5, top=False, unit=None),
    dict(group=False, sort_by="count", row_limit=100, top=True, unit=None),
    dict(group=False, sort_by="self_cpu_memory_usage", row_limit=100, top=False, unit="ms"),
    dict(group=False, sort_by="cpu_memory_usage", row_limit=3, top=False, unit="us"),
    dict(group=True, sort_by="flops", row_limit=100, top=False, unit=None),
]


def shapes_txt(s):
    if s is None:
        return "-"
    return ",".join("x".join(str(d) for d in dims) if dims else "s" for dims in s)


def main():
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    with open(os.path.join(here, "keyavg_spec.txt"), "w") as f:
        f.write("# tid cat start_ns dur_ns flops shapes name  |  M tid ts_ns bytes\n")
        for tid, cat, s, e, fl, name, sh in EVENTS:
            f.write(f"X {tid} {cat} {round(s * 1000)} {round((e - s) * 1000)} {fl} "
                    f"{shapes_txt(sh)} {name}\n")
        for tid, ts, b in MEMORY:
            f.write(f"M {tid} {round(ts * 1000)} {b}\n")
    for k, c in enumerate(CASES):
        evs = []
        for i, (tid, cat, s, e, fl, name, sh) in enumerate(EVENTS):
            mem = sum(b for _, ts, b in MEMORY if s <= ts <= e)
            if name.startswith("ProfilerStep#"):
                name = "ProfilerStep*"  # torch rewrites it when parsing kineto results
            evs.append(FunctionEvent(id=i, name=name, thread=tid, start_us=s, end_us=e,
                                     input_shapes=sh if sh is not None else [],
                                     cpu_memory_usage=mem, flops=fl,
                                     stack=[], is_user_annotation=(cat == UA)))
        # torch.profiler orders parsed events by (start, -end) before building the tree
        evs.sort(key=lambda e: [e.time_range.start, -e.time_range.end])
        el = EventList(evs, profile_memory=True, with_flops=True)
        el._build_tree()
        ka = el.key_averages(group_by_input_shapes=c["group"])
        text = ka.table(sort_by=c["sort_by"], row_limit=c["row_limit"],
                        top_level_events_only=c["top"], time_unit=c["unit"])
        with open(os.path.join(here, f"keyavg_golden_{k}.txt"), "w") as f:
            f.write(f"# group={int(c['group'])} sort_by={c['sort_by']} row_limit={c['row_limit']} "
                    f"top={int(c['top'])} unit={c['unit'] or '-'}\n")
            f.write(text)


if __name__ == "__main__":
    main()
