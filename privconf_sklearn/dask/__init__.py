"""Scale-out with dask: calibration and prediction on data larger than memory.

:func:`fit_calibrate` calibrates a private conformal estimator on a dask array or
DataFrame, computing the scores partition by partition on the workers and releasing
from their exact statistics (the same release as in memory); :func:`predict_set_blocks`
maps ``predict_set`` over the row blocks of a dask array; :func:`local_cluster` starts a
cluster that listens on 127.0.0.1 only. Needs the optional ``[dask]`` extra
(``pip install "privconf_sklearn[dask]"``).
"""

from ._fit import fit_calibrate
from ._recipe import local_cluster, predict_set_blocks

__all__ = ["fit_calibrate", "local_cluster", "predict_set_blocks"]
