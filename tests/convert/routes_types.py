"""Routes of the expressibility oracle (see ``routes.py``): none yet."""

from __future__ import annotations

ROUTES: dict = {}
