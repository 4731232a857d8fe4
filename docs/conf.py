"""Sphinx configuration of the privconf_sklearn documentation.

Build (from the repository root, with the ``docs`` extra installed)::

    .venv/bin/python -m sphinx -W --keep-going -b html docs docs/_build/html

``tests/test_docs.py`` runs the same build with warnings as errors in CI.
"""

from __future__ import annotations

import privconf_sklearn

project = "privconf_sklearn"
author = "privconf_sklearn developers"
copyright = "privconf_sklearn developers"
version = release = privconf_sklearn.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "numpydoc",
]

# The build and the built site work without a network (CI has none): no intersphinx
# inventories, and the math renderer is bundled. MathJax 3.2.2's single-file TeX-to-SVG
# component (all TeX extensions, fonts drawn as SVG paths, so no font files; Apache-2.0,
# LICENSE beside it; from the npm package "mathjax" 3.2.2, file es5/tex-svg-full.js)
# lives in _static/mathjax/ and is copied into the site. The menu is off: it would load
# its accessibility extensions on demand from files that are not bundled.
# tests/test_docs.py checks that no page loads a remote script or stylesheet.
mathjax_path = "mathjax/tex-svg-full.js"
mathjax3_config = {"options": {"enableMenu": False}}
exclude_patterns = ["_build"]
html_static_path = ["_static"]
html_theme = "furo"
html_title = f"privconf_sklearn {release}"
html_show_sourcelink = False

# numpydoc renders the docstrings; classes list their members through autodoc options
# on the API pages, not through numpydoc's autosummary tables.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True

autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_preserve_defaults = True

default_role = "code"
pygments_style = "friendly"

# Every class shows its own methods and those inherited from privconf_sklearn classes;
# members inherited from scikit-learn (get_params, score, ...) are skipped, since their
# docstrings point into scikit-learn's own documentation.
autodoc_default_options = {"members": True, "inherited-members": True}


def _defined_outside_package(obj) -> bool:
    """Whether a class member comes from outside privconf_sklearn (e.g. scikit-learn)."""
    target = getattr(obj, "fget", obj)  # properties
    module = getattr(target, "__module__", None)
    return module is not None and not module.startswith("privconf_sklearn")


def _skip_foreign_members(app, what, name, obj, skip, options):
    if what == "class" and _defined_outside_package(obj):
        return True
    return None


def setup(app):
    """Register the member filter."""
    app.connect("autodoc-skip-member", _skip_foreign_members)
