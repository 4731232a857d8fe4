"""forecast_groups: the data-free forecast of every Mondrian group's release."""

import numpy as np
import pytest

from privconf_sklearn.mechanisms import DPAPS, ExponQ, FedCP2QQ
from privconf_sklearn.mondrian import forecast_groups


@pytest.mark.parametrize("mechanism", [ExponQ(epsilon=1.0), DPAPS(epsilon=2.0)], ids=repr)
def test_each_group_is_forecast_at_its_own_size(mechanism):
    sizes = {"rare": 40, "common": 400, 3: 150}
    forecasts = forecast_groups(mechanism, sizes, 0.1, spread=0.5)
    assert list(forecasts) == list(sizes)
    for group, size in sizes.items():
        alone = mechanism.forecast(size, 0.1, spread=0.5)
        assert forecasts[group].n_samples == size
        assert forecasts[group].informative_probability == alone.informative_probability
        np.testing.assert_array_equal(forecasts[group].ranks, alone.ranks)
    # A larger group is at least as likely to be informative (more rows, same budget).
    assert forecasts["common"].informative_probability >= forecasts["rare"].informative_probability


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({"a": 0}, "group 'a'"),
        ({"a": True}, "group 'a'"),
        ({"a": 2.5}, "group 'a'"),
        ({}, "'group_sizes' parameter is empty"),
        ([3], "'group_sizes' parameter"),
    ],
)
def test_bad_sizes_are_named(sizes, message):
    with pytest.raises(ValueError, match=message):
        forecast_groups(ExponQ(epsilon=1.0), sizes, 0.1)


def test_a_federated_mechanism_is_refused():
    with pytest.raises(ValueError, match="central mechanism"):
        forecast_groups(FedCP2QQ(epsilon=1.0), {"a": 100}, 0.1)
