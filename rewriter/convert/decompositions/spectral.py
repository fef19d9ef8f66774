"""DFT and STFT (opset 17) decomposed into MatMul with constant cos/sin matrices for older
targets.

(Not written yet: nothing is registered, so DFT and STFT below 17 are refused.)
"""

from __future__ import annotations

__all__: list[str] = []
