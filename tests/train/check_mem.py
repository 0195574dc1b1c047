"""Compares `loupe inspect --json` memory prediction with a `loupe train` run's measured
peak (summary.json): prints both per category and fails when the total is off by more
than --tolerance (relative to the measured peak_memory_bytes).

With --per-category, each category holding at least 1 % of the peak must be within the
tolerance too.

Usage: check_mem.py INSPECT_JSON SUMMARY_JSON [--tolerance 0.10] [--label TEXT] [--per-category]"""
import json
import sys

# inspect's bytes keys -> summary.json memory_by_category keys
CATEGORIES = [
    ("parameters", "parameter"),
    ("gradients", "gradient"),
    ("optimizer_state", "optimizer_state"),
    ("activations", "activation"),
    ("temporary", "temporary"),
    ("quantized_weights", "quantized_weight"),
    ("input", "input"),
]


def main(argv):
    args, tol, label, per_cat = [], 0.10, "", False
    i = 1
    while i < len(argv):
        if argv[i] == "--per-category":
            per_cat = True
            i += 1
        elif argv[i] == "--tolerance":
            tol = float(argv[i + 1])
            i += 2
        elif argv[i] == "--label":
            label = argv[i + 1]
            i += 2
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0]) as f:
        pred = json.load(f)["memory"]["bytes"]
    with open(args[1]) as f:
        summ = json.load(f)
    meas = summ["memory_by_category"]
    peak = summ["peak_memory_bytes"]
    errors = []
    print(f"{label}: category            predicted      measured   diff")
    for pk, mk in CATEGORIES:
        p, m = pred[pk], meas.get(mk, 0)
        d = f"{(p - m) / m * 100:+6.1f} %" if m else ("     ok" if p == 0 else "   n/a")
        print(f"{label}:   {pk:18s} {p:12.0f} {m:12.0f}  {d}")
        if per_cat and max(p, m) >= 0.01 * peak and abs(p - m) > tol * max(m, 1):
            errors.append(f"{pk}: predicted {p:.0f}, measured {m:.0f}")
    other = meas.get("other", 0)
    if other:
        print(f"{label}:   other (not predicted)         {other:12.0f}")
    rel = (pred["total"] - peak) / peak
    rss = summ.get("peak_rss_bytes")
    print(f"{label}:   total (peak, sum at one instant) {pred['total']:12.0f} {peak:12.0f}  {rel * 100:+6.1f} %"
          + (f"   (process peak RSS {rss:.0f})" if rss else ""))
    sum_peaks = sum(meas.values())
    if sum_peaks != peak:
        print(f"{label}:   note: sum of per-category peaks {sum_peaks:.0f} != total peak {peak:.0f}")
    if pred["total"] != sum(pred[k] for k, _ in CATEGORIES):
        errors.append("inspect's total is not the sum of its categories")
    if abs(rel) > tol:
        errors.append(f"predicted total {pred['total']:.0f} is {rel * 100:+.1f} % off the measured peak "
                      f"{peak:.0f} (tolerance {tol * 100:.0f} %)")
    for e in errors:
        print(f"FAIL {label}: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
