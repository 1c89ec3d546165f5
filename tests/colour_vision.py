"""Colour-vision deficiency on a screenshot (issue #27): simulate deuteranopia, then ask whether two patches
of the page still differ by pattern or line style, not by colour.

`deuteranopia` applies Machado, Oliveira and Fernandes (2009)'s matrix for severity 1.0 in linear RGB (the
matrix colour-vision simulators use). `Texture` describes a patch with its colour taken out: its "ink" (the
pixels whose lightness stands out from the patch's median) and, for each of four directions, how often ink
continues 3 pixels further that way. A solid fill has no ink; stripes run one way (/ along the antidiagonal,
- along x, | along y), a cross-hatch along both diagonals, a grid along both axes, dots nowhere; a solid
underline runs along x, a dotted one does not. Two kinds that a deuteranope cannot tell by colour must differ
in this description.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MACHADO_DEUTERANOPIA = np.array([[0.367322, 0.860646, -0.227968],
                                 [0.280085, 0.672501, 0.047413],
                                 [-0.011820, 0.042940, 0.968881]])
FLAT = 0.02              # mean lightness change per pixel below which a patch counts as solid (no pattern)
FLAT_RANGE = 0.1         # ... and a lightness range below which: a line of 0.3 across a 20 px patch changes
                         # by under FLAT per pixel, yet it is a line (a darker tint under an underline, issue #33)


def _to_linear(rgb: np.ndarray) -> np.ndarray:
    c = rgb / 255.0
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _to_srgb(linear: np.ndarray) -> np.ndarray:
    c = np.clip(linear, 0.0, 1.0)
    return np.where(c <= 0.0031308, 12.92 * c, 1.055 * c ** (1 / 2.4) - 0.055) * 255.0


def deuteranopia(rgb: np.ndarray) -> np.ndarray:
    """An (h, w, 3) uint8 sRGB image as a deuteranope sees it (float sRGB, 0-255)."""
    return _to_srgb(_to_linear(rgb[..., :3].astype(np.float64)) @ MACHADO_DEUTERANOPIA.T)


def lightness(rgb: np.ndarray) -> np.ndarray:
    """Relative luminance (0-1) of float sRGB pixels."""
    linear = _to_linear(rgb)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


DIRECTIONS = ((0, 3), (3, 0), (3, 3), (3, -3))    # (dy, dx): along x, along y, the diagonal, the antidiagonal


@dataclass(frozen=True)
class Texture:
    """A patch's pattern without its colour (see the module docstring)."""

    change: float                                # mean |Δ lightness| between neighbours, along x or y (the larger)
    contrast: float                              # the patch's lightness range (98th - 2nd percentile)
    ink: float                                   # share of pixels off the median by more than a third of the range
    lines: tuple[float, float, float, float]     # per direction: P(ink 3 px further | ink), a line runs that way

    @property
    def solid(self) -> bool:
        return self.change < FLAT and self.contrast < FLAT_RANGE

    def vector(self) -> np.ndarray:
        """Where the pattern's lines run, and how much of the patch they cover: comparable across colours."""
        return np.array([*self.lines, self.ink])


def texture(patch_rgb: np.ndarray) -> Texture:
    """The texture of an (h, w, 3) patch of a deuteranopia-simulated screenshot."""
    light = lightness(patch_rgb)
    change = max(float(np.abs(np.diff(light, axis=1)).mean()), float(np.abs(np.diff(light, axis=0)).mean()))
    low, high = np.percentile(light, [2, 98])
    contrast = float(high - low)
    ink = np.abs(light - np.median(light)) > max(contrast, FLAT) / 3
    lines = tuple(_runs_on(ink, dy, dx) for dy, dx in DIRECTIONS)
    return Texture(change, contrast, float(ink.mean()), lines)


def _runs_on(ink: np.ndarray, dy: int, dx: int) -> float:
    """P(the pixel (dy, dx) away is ink | this one is): high along a line, low across it and for dots."""
    height, width = ink.shape
    ys, xs = slice(max(0, -dy), height - max(0, dy)), slice(max(0, -dx), width - max(0, dx))
    here = ink[ys, xs]
    there = ink[max(0, dy): height - max(0, -dy), max(0, dx): width - max(0, -dx)]
    return float((here & there).sum() / here.sum()) if here.sum() else 0.0


def texture_distance(a: Texture, b: Texture) -> float:
    """How differently two patches are patterned: infinite between a solid and a patterned one, else the
    distance between where their lines run and how much ink they have (0 for the same pattern)."""
    if a.solid != b.solid:
        return math.inf
    if a.solid:
        return 0.0
    return float(np.abs(a.vector() - b.vector()).sum())


def cielab(rgb: np.ndarray) -> np.ndarray:
    """CIELAB (D65) of float sRGB colours (..., 3), 0-255."""
    xyz = _to_linear(np.asarray(rgb, dtype=np.float64)) @ np.array([[0.4124, 0.3576, 0.1805],
                                                                   [0.2126, 0.7152, 0.0722],
                                                                   [0.0193, 0.1192, 0.9505]]).T
    xyz = xyz / np.array([0.95047, 1.0, 1.08883])
    f = np.where(xyz > 216 / 24389, np.cbrt(xyz), (24389 / 27 * xyz + 16) / 116)
    return np.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], axis=-1)


def seen_by_deuteranope(hex_colour: str) -> np.ndarray:
    """'#00664A' -> its CIELAB under simulated deuteranopia (Machado 2009)."""
    rgb = np.array([[[int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]]], dtype=np.uint8)
    return cielab(deuteranopia(rgb)[0, 0])


def delta_e(a: np.ndarray, b: np.ndarray) -> float:
    """CIE76 colour distance of two CIELAB colours."""
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b)))
