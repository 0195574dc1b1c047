"""Headless Chromium renders the profiler's memory-timeline HTML (offline, file://) to a
PNG, and the picture is not blank: enough non-background pixels in several distinct
colours (the stacked category areas). A blank page is checked too, so the check itself
is known to fail when nothing is drawn.

Usage: chromium_memory_timeline.py [OUT_PNG]  (runs examples/prof_demo; keeps the
screenshot at OUT_PNG when given)."""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

sys.path.insert(0, os.path.dirname(__file__))
import eco_common as ec  # noqa: E402


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    ec.skip("no chromium on PATH (Debian package 'chromium', listed in scripts/deps-debian-test.txt)")


def screenshot(html, png, width=1280, height=900):
    profile = ec.tempdir("lp_chromium_")
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-extensions", f"--user-data-dir={profile}",
           f"--window-size={width},{height}", "--virtual-time-budget=5000",
           f"--screenshot={png}", "file://" + os.path.abspath(html)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    shutil.rmtree(profile, ignore_errors=True)
    if r.returncode != 0 or not os.path.isfile(png):
        ec.fail(f"chromium failed ({r.returncode}):\n{r.stderr[-2000:]}")


def decode_png(path):
    """Minimal PNG reader (8-bit greyscale/RGB/RGBA, non-interlaced, as Chromium writes):
    returns (width, height, channels, rows of bytes)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        ec.fail(f"{path}: not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace or ctype not in (0, 2, 6):
                ec.fail(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
            ch = {0: 1, 2: 3, 6: 4}[ctype]
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = w * ch
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b = prev[i]
            c = prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, ch, rows


def picture_stats(path):
    """(fraction of pixels unlike the background, colours covering >= 0.05% each)."""
    w, h, ch, rows = decode_png(path)
    counts = {}
    for row in rows:
        for x in range(0, w * ch, ch):
            px = row[x:x + 3] if ch >= 3 else row[x:x + 1] * 3
            counts[px] = counts.get(px, 0) + 1
    total = w * h
    bg, nbg = max(counts.items(), key=lambda kv: kv[1])
    ink = 1.0 - nbg / total
    colours = [c for c, n in counts.items() if n >= total * 0.0005 and c != bg]
    return ink, colours, bg


def check(png, name):
    ink, colours, bg = picture_stats(png)
    print(f"{name}: {ink * 100:.1f}% of pixels drawn, {len(colours)} distinct colours besides background #{bg.hex()}")
    return ink >= 0.03 and len(colours) >= 4


def main():
    out_png = sys.argv[1] if len(sys.argv) > 1 else None
    tmp = tempfile.mkdtemp(prefix="lp_shot_")  # kept on failure, to look at the picture
    blank = os.path.join(tmp, "blank.html")
    with open(blank, "w") as f:
        f.write("<!doctype html><html><body></body></html>")
    chromium()
    prof = ec.run_prof_demo()
    html = os.path.join(prof, "memory_timeline.html")
    if not os.path.isfile(html):
        ec.fail(f"prof_demo wrote no memory_timeline.html in {prof}: {sorted(os.listdir(prof))}")
    blank_png = os.path.join(tmp, "blank.png")
    screenshot(blank, blank_png)
    if check(blank_png, "blank page"):
        ec.fail("the blank page passed the non-blank check: the check is broken")
    png = out_png or os.path.join(tmp, "memory_timeline.png")
    screenshot(html, png)
    if not check(png, "memory_timeline.html"):
        ec.fail(f"{html} renders (nearly) blank in Chromium; screenshot at {png}")
    print(f"PASS: Chromium draws {os.path.basename(html)}" + (f" (screenshot {png})" if out_png else ""))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
