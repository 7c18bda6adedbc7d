"""Every public name of pai-durable-dbos has exactly one public home (see ``assert_one_public_home``)."""

from pai.core.testing import assert_one_public_home


def test_every_public_name_has_one_public_home() -> None:
    assert_one_public_home("pai.durable_dbos")
