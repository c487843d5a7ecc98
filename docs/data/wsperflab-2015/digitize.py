"""Read the RxNetty-vs-Tomcat study's load curves off its slides' charts.

Source: Netflix-Skunkworks/WSPerfLab, test-results/RxNetty_vs_Tomcat_April2015.pdf
(commit f4b1cad), slides 24-26 ("Thread Migrations", "LLC loads", "IPC"): three
Google Sheets line charts, 600 x 371 px, of the howto's staircase (wrk -t 4,
clients 50 to 1100 in steps of 50, 60 s a step; test-results/vs-tomcat-Apr-2015/
howto.txt). Each chart has two y axes whose three labelled gridlines sit at
y = 93, 185 and 278 px. Its lines run from edge to edge: the first step, 50
clients, at x = 0 and the last, 1,100, at x = 600, 600 / 1,050 = 0.5714 px a
client, which is the spacing of the x axis labels 300, 500, 700 and 900 (114 px
for 200 clients; the labels' text sits 14 px left of its step). The request
rates check the axis: at the first steps wrk's closed clients wait 157.5 ms a
request (the howto's example rows), so the rate is clients / 0.1575 s (Tomcat's
read at 100 clients: 633, against 633.28 in the howto's row; at 50: 315 against
304.08). A series is found by its colour
(Google's palette) and read at each step's x as the median y of its pixels
there, the legend (top left) excluded; a step where a series is hidden under
another is left empty (RxNetty's rate under Tomcat's at the first steps, where
both are the same latency-bound rate).

The columns, as the howto's benchrun and benchreport.awk define them:
  *_req_s            wrk's requests per second;
  *_migrations       perf stat's cpu-migrations over the 60 s step, the whole
                     machine (server, wrk and the backend mock; perf's cycles
                     in the howto's example row only fit all of its busy CPUs);
  *_llc_loads_per_req_awk  benchreport.awk's LLC_loads_per_req, which divides the
                     step's LLC loads by the request RATE (the example row:
                     838,235,253 / 304.08 = 2,756,627): 60 x a request's;
  *_ipc              perf's instructions / cycles, the whole machine;
  *_cpu_ms_per_req   the server process's user + system ms per request
                     (the howto's cputime helpers, /proc/PID/stat).

Needs pypdf and pillow (not warmcore's dependencies):
    python digitize.py RxNetty_vs_Tomcat_April2015.pdf > curves.csv
"""
import statistics
import sys

import pypdf

GRID_Y = (93.0, 185.0, 278.0)
PALETTE = {"blue": (51, 102, 204), "red": (255, 0, 0), "orange": (255, 153, 0),
           "green": (16, 150, 24)}
CHARTS = {   # image name: (left axis labels, right axis labels, {colour: (series, axis)})
    "/Image15": ((3800, 2600, 1400), (1.5e6, 1.0e6, 0.5e6),
                 {"blue": ("rxnetty_req_s", 0), "green": ("tomcat_req_s", 0),
                  "orange": ("rxnetty_migrations", 1), "red": ("tomcat_migrations", 1)}),
    "/Image16": ((0.64, 0.58, 0.52), (2.5e6, 2.0e6, 1.5e6),
                 {"orange": ("rxnetty_llc_loads_per_req_awk", 1),
                  "red": ("tomcat_llc_loads_per_req_awk", 1)}),
    "/Image17": ((0.64, 0.58, 0.52), (0.85, 0.70, 0.55),
                 {"blue": ("rxnetty_ipc", 0), "green": ("tomcat_ipc", 0),
                  "orange": ("rxnetty_cpu_ms_per_req", 1), "red": ("tomcat_cpu_ms_per_req", 1)}),
}
STEPS = range(50, 1101, 50)
LEGEND_RIGHT, LEGEND_BOTTOM = 430, 50     # the legend: x < 430, y < 50


def x_of(clients):
    """The step's x: 50 clients at the left edge, 1,100 at the right (599, the last
    pixel column)."""
    return min(599.0, (clients - 50) * 600.0 / 1050.0)


def value(y, labels):
    top, mid, low = labels            # at GRID_Y: linear in y
    per_px = (top - low) / (GRID_Y[2] - GRID_Y[0])
    return low + (GRID_Y[2] - y) * per_px


def series_y(im, colour, x):
    target = PALETTE[colour]
    top = 30 if x >= LEGEND_RIGHT else LEGEND_BOTTOM      # skip the title's legend
    ys = [y for y in range(top, im.size[1] - 16)
          if sum(abs(a - b) for a, b in zip(im.getpixel((x, y)), target, strict=True)) < 40]
    return statistics.median(ys) if ys else None


def main(pdf):
    images = {im.name: im.image.convert("RGB") for im in pypdf.PdfReader(pdf).pages[23].images}
    columns = {}
    for name, (left, right, series) in CHARTS.items():
        im = images[name.lstrip("/") + ".png"]
        for colour, (label, axis) in series.items():
            col = []
            for c in STEPS:
                y = series_y(im, colour, round(x_of(c)))
                col.append(None if y is None else value(y, (left, right)[axis]))
            columns[label] = col
    names = list(columns)
    print(",".join(["clients", *names]))
    for i, c in enumerate(STEPS):
        row = [str(c), *("" if columns[n][i] is None else f"{columns[n][i]:.4g}" for n in names)]
        print(",".join(row))


if __name__ == "__main__":
    main(sys.argv[1])
