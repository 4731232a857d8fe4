"""What the test environment offers: diffprivlib (through the package's gateway), and
whether its LogisticRegression can be built with the installed scikit-learn."""

import sklearn

from privconf_sklearn import import_diffprivlib

# Through the gateway, which restores the two scikit-learn aliases diffprivlib 0.6.6
# needs on scikit-learn >= 1.9, before any test module imports diffprivlib itself.
try:
    DIFFPRIVLIB = import_diffprivlib()
    DIFFPRIVLIB_MISSING = ""
except ImportError as exc:  # the gateway's DiffprivlibUnavailableError
    DIFFPRIVLIB, DIFFPRIVLIB_MISSING = None, str(exc)

#: diffprivlib's LogisticRegression passes ``multi_class`` to scikit-learn, which removed it
#: in 1.8: the model cannot even be constructed there.
DP_LOGISTIC_BROKEN = tuple(int(part) for part in sklearn.__version__.split(".")[:2]) >= (1, 8)
DP_LOGISTIC_REASON = (
    "diffprivlib's LogisticRegression passes multi_class, removed in scikit-learn 1.8 "
    f"(installed: {sklearn.__version__})"
)
