#!/usr/bin/env python3
"""Puts a loupe HTML page in front of headless Chromium and checks what a reader would see.

  html_check.py PAGE [--charts N] [--plots DIR]   exit 0 when every check holds, 1 otherwise
  html_check.py --self-test DIR                   the checks catch a broken page (exit 0 if so)

Checks, each printed:
  - no console message and no uncaught error while the page loads (Chromium's log on stderr);
  - the script ran (body carries "lp-js") and built one tab button per tab;
  - the dumped DOM holds N chart figures, each with an inline <svg> (N from --charts, else
    at least one);
  - in a full-page screenshot, each chart's region is not blank: its grey level varies
    (variance > 150 on 0..255: a white box with a frame and grid gives ~30-80) and it holds
    coloured pixels (>= 0.1 % with max-min channel > 60: series colours, where axes, text
    and grid are grey; one 2-px line across a 1000x380 chart is ~0.4 %);
  - each PNG under --plots decodes (cairo, through ctypes) and holds the series colours:
    >= 40 pixels within 8 of a palette colour or, for a heatmap, >= 2 % coloured pixels.
Chromium not installed: exit 77 (skip)."""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

WIDTH = 1300
# chart_draw.c's palette, 0..255
PALETTE = [(31, 120, 181), (255, 128, 13), (43, 161, 43), (214, 38, 41), (148, 102, 189), (140, 87, 74)]

SHOT_MAX = 16000
HIDE_TABLES = "<style>table, details { display: none !important; }</style>"
MEASURE = """<script>
(function(){var r=[];[].forEach.call(document.querySelectorAll('figure.lp-chart svg'),function(s){
var b=s.getBoundingClientRect();r.push([b.left+scrollX,b.top+scrollY,b.width,b.height]);});
var pre=document.createElement('pre');pre.id='lp-rects';
pre.textContent=JSON.stringify({h:document.documentElement.scrollHeight,r:r});document.body.appendChild(pre);})();
</script></body>"""


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def run_chromium(exe, url, *extra, height=1000):
    args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--force-device-scale-factor=1", f"--window-size={WIDTH},{height}",
            "--enable-logging=stderr", "--v=0", *extra, url]
    with tempfile.TemporaryDirectory(prefix="lp_chromium_") as prof:
        p = subprocess.run(args + [f"--user-data-dir={prof}"], capture_output=True, text=True, timeout=120)
    return p.stdout, p.stderr


def console_errors(stderr):
    """Chromium logs each console message as "...:CONSOLE(line)] "text", source: ..."; a
    loupe page writes none, so any is a failure (uncaught exceptions included)."""
    return [l for l in stderr.splitlines() if ":CONSOLE" in l or "Uncaught" in l]


class Png:
    """A PNG decoded by cairo (the library the charts are drawn with), through ctypes."""
    lib = None

    def __init__(self, path):
        if Png.lib is None:
            Png.lib = ctypes.CDLL("libcairo.so.2")
            for f, res in (("cairo_image_surface_create_from_png", ctypes.c_void_p),
                           ("cairo_image_surface_get_data", ctypes.POINTER(ctypes.c_ubyte))):
                getattr(Png.lib, f).restype = res
            for f in ("cairo_image_surface_create_from_png", "cairo_image_surface_get_data",
                      "cairo_image_surface_get_width", "cairo_image_surface_get_height",
                      "cairo_image_surface_get_stride", "cairo_surface_status", "cairo_surface_destroy"):
                getattr(Png.lib, f).argtypes = [ctypes.c_char_p if f.endswith("from_png") else ctypes.c_void_p]
        L = Png.lib
        s = L.cairo_image_surface_create_from_png(path.encode())
        if L.cairo_surface_status(s) != 0:
            L.cairo_surface_destroy(s)
            raise ValueError(f"{path}: cairo cannot decode it")
        self.w, self.h = L.cairo_image_surface_get_width(s), L.cairo_image_surface_get_height(s)
        stride = L.cairo_image_surface_get_stride(s)
        self.data = bytes(ctypes.string_at(L.cairo_image_surface_get_data(s), stride * self.h))
        self.stride = stride
        L.cairo_surface_destroy(s)

    def pixels(self, x0=0, y0=0, x1=None, y1=None):
        """(r, g, b) of each pixel in the box (cairo stores BGRA/BGRx little-endian)."""
        x1 = self.w if x1 is None else min(self.w, x1)
        y1 = self.h if y1 is None else min(self.h, y1)
        d = self.data
        for y in range(max(0, y0), y1):
            row = y * self.stride
            for x in range(max(0, x0), x1):
                o = row + 4 * x
                yield d[o + 2], d[o + 1], d[o]


try:  # vectorised when numpy is there; the pure-Python loops give the same figures, slower
    import numpy as np
except ImportError:
    np = None


def rgb_array(png, x0=0, y0=0, x1=None, y1=None):
    """The box as an (h, w, 3) int array (r, g, b), or None without numpy."""
    if np is None:
        return None
    x1 = png.w if x1 is None else min(png.w, x1)
    y1 = png.h if y1 is None else min(png.h, y1)
    a = np.frombuffer(png.data, dtype=np.uint8).reshape(png.h, png.stride // 4, 4)
    a = a[max(0, y0):y1, max(0, x0):x1, :3].astype(np.int32)
    return a[:, :, ::-1]  # BGR -> RGB


def region_stats_np(a):
    n = a.shape[0] * a.shape[1]
    if n == 0:
        return 0, 0, 0
    v = a.mean(axis=2)
    col = ((a.max(axis=2) - a.min(axis=2)) > 60).mean()
    return n, float(v.var()), float(col)


def region_stats(px):
    n = s = s2 = col = 0
    for r, g, b in px:
        v = (r + g + b) / 3
        n += 1
        s += v
        s2 += v * v
        if max(r, g, b) - min(r, g, b) > 60:
            col += 1
    if n == 0:
        return 0, 0, 0
    m = s / n
    return n, s2 / n - m * m, col / n


def check_png(path, failures):
    try:
        png = Png(path)
    except ValueError as e:
        failures.append(str(e))
        return
    a = rgb_array(png)
    near = [0] * len(PALETTE)
    n = col = 0
    if a is not None:
        n = a.shape[0] * a.shape[1]
        col = int(((a.max(axis=2) - a.min(axis=2)) > 60).sum())
        near = [int((np.abs(a - np.array(p)).max(axis=2) <= 8).sum()) for p in PALETTE]
    for r, g, b in png.pixels() if a is None else ():
        n += 1
        if max(r, g, b) - min(r, g, b) > 60:
            col += 1
        for i, (pr, pg, pb) in enumerate(PALETTE):
            if abs(r - pr) <= 8 and abs(g - pg) <= 8 and abs(b - pb) <= 8:
                near[i] += 1
    best = max(near)
    heat = "heat" in os.path.basename(path)
    ok = best >= 40 or (heat and col / max(n, 1) >= 0.02)
    print(f"  png {os.path.basename(path)}: {png.w}x{png.h}, palette pixels {best}, coloured {col / max(n, 1):.1%}"
          f" {'ok' if ok else 'BLANK or no series colour'}")
    if not ok:
        failures.append(f"{path}: no series colour (palette pixels {best}, coloured {col / max(n, 1):.2%})")


def check_page(exe, page, want_charts, plots):
    failures = []
    page = os.path.abspath(page)
    url = "file://" + page
    # 1. load as a reader would: console, script, tabs
    dom, err = run_chromium(exe, url, "--dump-dom")
    errs = console_errors(err)
    print(f"  console messages: {len(errs)}")
    failures += [f"console: {e.strip()}" for e in errs]
    body = re.search(r"<body[^>]*>", dom)
    if not body or "lp-js" in "" or "lp-js" not in body.group(0):
        failures.append("the page's script did not run (body has no lp-js class)")
    n_tabs = len(re.findall(r'<div class="lp-tab"', dom))
    n_buttons = len(re.findall(r"<button[^>]*>", dom.split('class="lp-tabnav"', 1)[1])) if n_tabs else 0
    if n_tabs and n_buttons < n_tabs:
        failures.append(f"{n_tabs} tabs but {n_buttons} tab buttons")
    figs = re.findall(r'<figure class="lp-chart"[^>]*>\s*<svg', dom)
    print(f"  tabs {n_tabs} (buttons {n_buttons}), charts in the DOM: {len(figs)}")
    if (want_charts is not None and len(figs) != want_charts) or len(figs) == 0:
        failures.append(f"{len(figs)} charts in the DOM, expected {want_charts if want_charts is not None else '>= 1'}")
    # 2. every tab shown (#all), charts measured, then a screenshot of the whole page
    with open(page, encoding="utf-8") as f:
        text = f.read()
    probe = os.path.join(os.path.dirname(page), ".lp-check-" + os.path.basename(page))
    with open(probe, "w", encoding="utf-8") as f:
        f.write(text.replace("</body>", MEASURE, 1))
    try:
        dom2, _ = run_chromium(exe, "file://" + probe + "#all", "--dump-dom")
        m = re.search(r'<pre id="lp-rects">(.*?)</pre>', dom2, re.S)
        if not m:
            failures.append("could not measure the charts")
            return failures
        info = json.loads(m.group(1).replace("&quot;", '"'))
        if int(info["h"]) + 20 > SHOT_MAX:
            # Chromium's screenshot stops at SHOT_MAX px: on a longer page (an analyze page of a
            # big trace: long op tables) hide the tables so every chart falls inside it; the
            # charts themselves are drawn the same
            print(f"  page {int(info['h'])} px high: tables hidden for the screenshot")
            with open(probe, "w", encoding="utf-8") as f:
                f.write(text.replace("</body>", HIDE_TABLES + MEASURE, 1))
            dom2, _ = run_chromium(exe, "file://" + probe + "#all", "--dump-dom")
            m = re.search(r'<pre id="lp-rects">(.*?)</pre>', dom2, re.S)
            if not m:
                failures.append("could not measure the charts")
                return failures
            info = json.loads(m.group(1).replace("&quot;", '"'))
        height = min(SHOT_MAX, int(info["h"]) + 20)
        with tempfile.TemporaryDirectory(prefix="lp_shot_") as td:
            shot = os.path.join(td, "shot.png")
            run_chromium(exe, "file://" + probe + "#all", f"--screenshot={shot}", height=height)
            if not os.path.exists(shot):
                failures.append("chromium wrote no screenshot")
                return failures
            png = Png(shot)
            print(f"  screenshot {png.w}x{png.h}")
            for i, (x, y, w, h) in enumerate(info["r"]):
                box = (int(x) + 2, int(y) + 2, int(x + w) - 2, int(y + h) - 2)
                a = rgb_array(png, *box)
                n, var, col = region_stats_np(a) if a is not None else region_stats(png.pixels(*box))
                ok = n > 1000 and var > 150 and col >= 0.001
                print(f"  chart {i}: {int(w)}x{int(h)} at y={int(y)}: variance {var:.0f}, coloured {col:.1%}"
                      f" {'ok' if ok else 'BLANK'}")
                if not ok:
                    failures.append(f"chart {i} is blank in the screenshot (variance {var:.0f}, coloured {col:.2%})")
    finally:
        os.unlink(probe)
    # 3. the PNG copies
    if plots:
        pngs = sorted(p for p in os.listdir(plots) if p.endswith(".png"))
        if not pngs:
            failures.append(f"{plots}: no PNG")
        for p in pngs:
            check_png(os.path.join(plots, p), failures)
    return failures


def self_test(exe, d):
    """A page whose script throws and whose chart is blank must fail both checks."""
    page = os.path.join(d, "broken.html")
    with open(page, "w") as f:
        f.write('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body class="x"><main>'
                '<figure class="lp-chart"><svg class="lp-svg" viewBox="0 0 400 300" width="400" height="300">'
                '<rect width="400" height="300" fill="#fff"/></svg></figure></main>'
                '<script>nosuchfunction();</script></body></html>')
    f = check_page(exe, page, 1, None)
    want = ["console", "did not run", "blank"]
    missed = [w for w in want if not any(w in x for x in f)]
    print("self-test:", "caught " + ", ".join(want) if not missed else "MISSED " + ", ".join(missed))
    return 0 if not missed else 1


def main():
    a = sys.argv[1:]
    exe = chromium()
    if not exe:
        print("html_check: chromium is not installed (scripts/bootstrap.sh installs it): skipped")
        return 77
    if a and a[0] == "--self-test":
        return self_test(exe, a[1])
    page, charts, plots = a[0], None, None
    if "--charts" in a:
        charts = int(a[a.index("--charts") + 1])
    if "--plots" in a:
        plots = a[a.index("--plots") + 1]
    print(f"html_check {page}")
    f = check_page(exe, page, charts, plots)
    for x in f:
        print("FAIL:", x)
    return 1 if f else 0


if __name__ == "__main__":
    sys.exit(main())
