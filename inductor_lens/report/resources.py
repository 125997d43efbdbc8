"""Report stage: where the templates are.

In a built wheel the top-level ``templates/`` folder ships as ``inductor_lens/templates``; in a
source checkout (editable install, or PYTHONPATH on a GPU box) it sits beside the package.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import RenderError

_PACKAGE = Path(__file__).resolve().parents[1]


def templates_dir() -> Path:
    for candidate in (_PACKAGE / "templates", _PACKAGE.parent / "templates"):
        if (candidate / "base.html.j2").is_file():
            return candidate
    raise RenderError(
        f"report templates not found (looked in {_PACKAGE / 'templates'} and {_PACKAGE.parent / 'templates'}); "
        "reinstall inductor-lens"
    )
