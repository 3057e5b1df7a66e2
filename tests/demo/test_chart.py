"""The demo's chart (grm/demo/run.py `_chart`): a y axis in seconds with round ticks above the
highest bar, grid lines at each tick, and the bars drawn to that scale."""

from __future__ import annotations

import pytest

from grm.demo.run import _chart, tick_step


@pytest.mark.parametrize("highest, step", [(0.07, 0.02), (1.0, 0.2), (3.4, 1.0), (12.0, 5.0), (48.0, 10.0), (0.0, 1.0)])
def test_ticks_are_round_and_about_five(highest, step):
    assert tick_step(highest) == pytest.approx(step)
    assert highest <= 0 or 2 <= highest / tick_step(highest) <= 10


def test_the_chart_has_a_scale_and_bars_to_it(tmp_path):
    from PIL import Image

    rows = [{"cold_ttft_s": c, "warm_ttft_s": w, "doc_tokens": n, "speedup": c / w}
            for c, w, n in ((1.0, 0.1, 500), (4.0, 0.2, 2000), (11.5, 0.3, 6000))]
    path = tmp_path / "chart.png"
    _chart(rows, path)
    img = Image.open(path).convert("RGB")
    column = [img.getpixel((img.width - 30, y)) for y in range(img.height)]  # right of the bars: grid only
    grid = [y for y, px in enumerate(column) if px == (0xE0, 0xE0, 0xE0)]
    assert len(grid) == 3  # step 5: the axis at 0 (black), grid lines at 5, 10 and 15 (the first tick above 11.5)
    red = [y for y in range(img.height) if img.getpixel((390, y)) == (0xC0, 0x50, 0x4D)]
    assert red, "the cold bar of the middle document"
