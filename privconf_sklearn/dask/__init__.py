"""Scale-out with dask: prediction over the row blocks of a dask array.

Needs the optional ``[dask]`` extra (``pip install "privconf_sklearn[dask]"``).
"""

from ._recipe import local_cluster, predict_set_blocks

__all__ = ["local_cluster", "predict_set_blocks"]
