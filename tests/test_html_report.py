"""The HTML report in a real headless Chromium (OS package, driven by Selenium): it renders from a real
`gpuemu check` run, the browser logs no console errors, and in the screenshot the failing launcher's row
is visible and red while the passing one is green."""

from __future__ import annotations

import os
import shutil
import struct
import zlib

import pytest

from gpuemu.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.browser


def _unavailable(why: str):
    """Skip where the OS package is missing; under `make test-gate-e2e` (GPUEMU_REQUIRE_E2E=1) that is a failure."""
    if os.environ.get("GPUEMU_REQUIRE_E2E") == "1":
        pytest.fail(f"GPUEMU_REQUIRE_E2E=1 but {why}")
    pytest.skip(why)


def _import_or_unavailable(name: str):
    try:
        return __import__(name, fromlist=["_"])
    except ImportError:
        _unavailable(f"the Python package {name} is not installed (pip install -e '.[dev]')")


def _chromium() -> tuple[str, str] | None:
    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    driver = shutil.which("chromedriver") or ("/usr/lib/chromium/chromedriver"
                                              if os.path.exists("/usr/lib/chromium/chromedriver") else None)
    return (browser, driver) if browser and driver else None


def _png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, ...]]]:
    """A minimal PNG decoder (8-bit RGB/RGBA, not interlaced): enough to read a screenshot without Pillow."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (length,), ctype = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if ctype == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6) and body[12] == 0, "unexpected PNG format"
            bpp = 3 if color == 2 else 4
        elif ctype == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
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
    pixels = [tuple(r[x * bpp:x * bpp + 3]) for r in rows for x in range(width)]
    return width, height, pixels


def _dominant(pixels: list[tuple[int, ...]]) -> tuple[int, ...]:
    counts: dict[tuple[int, ...], int] = {}
    for p in pixels:
        counts[p] = counts.get(p, 0) + 1
    return max(counts, key=counts.get)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    (tmp / "kernels").mkdir()
    shutil.copy(os.path.join(ROOT, "examples", "kernels", "softmax.py"), tmp / "kernels" / "softmax.py")
    (tmp / "gpuemu.yaml").write_text(
        "check:\n  iterations: 3\n  seed: 3\n  dtypes: [fp32]\n  kernels:\n"
        "    - {target: kernels/softmax.py:softmax, op: softmax}\n"
        "    - {target: kernels/softmax.py:softmax_tail_leak, op: softmax}\n")
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        assert main(["check", "-j", "1", "--store", str(tmp / "store"), "--html", str(tmp / "report.html")]) == 1
    finally:
        os.chdir(cwd)
    return tmp / "report.html"


def test_report_renders_without_console_errors_and_failing_row_is_red(report, tmp_path):
    found = _chromium()
    if found is None:
        _unavailable("no chromium + chromedriver here (make test-gate-e2e installs them)")
    webdriver = _import_or_unavailable("selenium.webdriver")
    from selenium.webdriver.common.by import By

    opts = webdriver.ChromeOptions()
    opts.binary_location = found[0]
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1200"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=opts, service=webdriver.ChromeService(executable_path=found[1]))
    try:
        driver.get(report.as_uri())
        assert driver.title == "gpuemu check report"
        assert driver.find_element(By.ID, "verdict").text == "FAIL"
        rows = {r.get_attribute("data-status"): r for r in driver.find_elements(By.CSS_SELECTOR, "#summary tr[id]")}
        assert set(rows) == {"pass", "fail"}
        bad, good = rows["fail"], rows["pass"]
        assert "softmax_tail_leak" in bad.text and bad.is_displayed()
        # the failing launcher's section is open with its replay command; the plot drew its bar
        replay = driver.find_element(By.CSS_SELECTOR, "details.fail code.replay")
        assert replay.is_displayed() and replay.text.startswith("gpuemu reproduce 0x")
        assert driver.find_elements(By.CSS_SELECTOR, "svg rect")
        severe = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        assert severe == []
        shot = driver.get_screenshot_as_png()
        (tmp_path / "report.png").write_bytes(shot)
        scale = driver.execute_script("return window.devicePixelRatio") or 1
        width, height, px = _png_pixels(shot)

        def cell_colour(row) -> tuple[int, ...]:
            cell = row.find_element(By.CSS_SELECTOR, "td.status")
            loc, size = cell.location, cell.size  # the page is not scrolled: page coordinates = viewport
            x0, y0 = int(loc["x"] * scale) + 2, int(loc["y"] * scale) + 2
            x1, y1 = int((loc["x"] + size["width"]) * scale) - 2, int((loc["y"] + size["height"]) * scale) - 2
            assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height, "the row is not inside the first screen"
            return _dominant([px[y * width + x] for y in range(y0, y1) for x in range(x0, x1)])

        r, g, b = cell_colour(bad)
        assert r > 150 and g < 80 and b < 80, (r, g, b)  # red (#cf222e)
        r, g, b = cell_colour(good)
        assert g > 100 and r < 80 and b < 90, (r, g, b)  # green (#1a7f37)
    finally:
        driver.quit()
